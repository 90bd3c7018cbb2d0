import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import { useEffect, useRef, useState } from "react";
import { CLOCK_TOOL, readClock } from "./clockTool.js";
import { loadMessages, saveMessages } from "./storage.js";

const API = "/v1/ui/chat";

/** useChat on genq's routes, with a Stop that stops the generation. `choices` (`model`,
 * `offerClock`) are read when a request is sent. */
export function useGenqChat(chatId, choices) {
  const current = useRef(choices);
  current.current = choices;
  const resendQuestion = useRef(() => {});
  const [transport] = useState(
    () =>
      new DefaultChatTransport({
        api: API,
        body: () => bodyOf(current.current),
        fetch: async (url, init) => {
          const response = await fetch(url, init);
          if (response.status === 204) setTimeout(() => resendQuestion.current());
          return response;
        },
      }),
  );
  const [saved] = useState(() => loadMessages(chatId));

  const chat = useChat({
    id: chatId,
    messages: saved,
    resume: true,
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    // Not awaited: useChat is still reading the stream that asked for the call.
    onToolCall: ({ toolCall }) => {
      const { toolName: tool, toolCallId, input } = toolCall;
      try {
        if (tool !== CLOCK_TOOL.function.name) throw new Error(`no tool named ${tool}`);
        chat.addToolOutput({ tool, toolCallId, output: readClock(input) });
      } catch (err) {
        chat.addToolOutput({ tool, toolCallId, state: "output-error", errorText: String(err) });
      }
    },
  });
  const { messages, status, sendMessage, stop } = chat;
  const busy = status === "submitted" || status === "streaming";

  // Saved when no answer is on its way, and when a question was just sent: mid-answer the
  // message changes at every token, and a page that went away gets the answer back from genq.
  useEffect(() => {
    if (!busy || messages.at(-1)?.role === "user") saveMessages(chatId, messages);
  }, [chatId, messages, busy]);

  // The resume (on load) answers 204 when the chat has no generation running: if the saved
  // chat still ends with a question, its answer ended while the page was away (or never
  // started). The same question sent again as it was (same id, same body) re-attaches to that
  // generation: genq streams the whole answer without calling the provider a second time.
  resendQuestion.current = () => {
    const last = messages.at(-1);
    if (last?.role === "user" && status === "ready") {
      const { parts, metadata, id: messageId } = last;
      sendMessage({ parts, metadata, messageId }, { body: metadata?.body });
    }
  };

  // Each question keeps what it was sent with, to be sent again the same way.
  function ask(text) {
    const body = bodyOf(current.current);
    sendMessage({ text, metadata: { body } }, { body });
  }

  // useChat's stop() only closes this page's connection, and genq never cancels a generation
  // for a dropped connection (that is what resume is for): the stop route cancels it, with the
  // provider's call, for every page that follows it.
  const [stopError, setStopError] = useState("");
  async function stopAnswer() {
    setStopError("");
    const response = await fetch(`${API}/${encodeURIComponent(chatId)}/stop`, { method: "POST" });
    if (!response.ok) setStopError(await response.text());
    await stop();
  }

  return { ...chat, busy, ask, stopAnswer, stopError };
}

/** What the app adds to the messages it sends (the transport's `body`). */
function bodyOf({ model, offerClock }) {
  return { model, ...(offerClock ? { tools: [CLOCK_TOOL] } : {}) };
}
