import { getToolOrDynamicToolName, isToolUIPart } from "ai";

export function Message({ message }) {
  const generationId = message.metadata?.genq?.generationId;
  return (
    <li className={`message ${message.role}`} data-role={message.role}>
      {message.parts.map((part, index) => (
        <Part key={index} part={part} />
      ))}
      {generationId && (
        <small className="generation" data-generation-id={generationId}>
          generation {generationId}
        </small>
      )}
    </li>
  );
}

function Part({ part }) {
  if (part.type === "text") return <p className="text">{part.text}</p>;
  if (part.type === "reasoning") {
    return (
      <details className="reasoning">
        <summary>Reasoning</summary>
        <p>{part.text}</p>
      </details>
    );
  }
  if (isToolUIPart(part)) return <ToolCall part={part} />;
  // A worker died mid-answer and genq retried the generation. useChat has already dropped the
  // lost attempt's parts (genq sends the AI SDK's `reset-step` first): the answer goes on once.
  if (part.type === "data-genq-restarted") {
    return <p className="restarted">A worker stopped mid-answer; genq started it again.</p>;
  }
  return null; // step boundaries and parts this app does not show
}

function ToolCall({ part }) {
  return (
    <div className="tool" data-state={part.state}>
      <span className="tool-name">{getToolOrDynamicToolName(part)}</span>{" "}
      <span className="tool-state">{part.state}</span>
      <pre className="tool-input">{JSON.stringify(part.input, null, 2)}</pre>
      {part.state === "output-available" && (
        <pre className="tool-output">{JSON.stringify(part.output, null, 2)}</pre>
      )}
      {part.state === "output-error" && <p className="tool-error">{part.errorText}</p>}
    </div>
  );
}
