// The generate page's view of a generation's parts besides its text: the reasoning (a
// collapsed <details> that fills in live) and the tool calls (each one's name and arguments,
// filling in as they stream and pretty-printed once the call is whole). It shows what a
// Transcript (api.js) holds; the page owns the fold and tells the view what changed.
import { EVENT, el } from "./api.js";

// The arguments as shown: pretty-printed JSON once the call is whole, as written until then
// (and when the model wrote something that is not JSON).
export function shownArguments(call) {
  if (!call.done) return call.arguments;
  try {
    return JSON.stringify(JSON.parse(call.arguments), null, 2);
  } catch {
    return call.arguments;
  }
}

export class PartsView {
  constructor({ reasoning, reasoningText, toolCalls }) {
    this.reasoning = reasoning; // the <details>
    this.reasoningText = reasoningText;
    this.toolCalls = toolCalls; // the <ol>
  }

  // Shows `transcript` whole: after a restore, a `restarted`, or a result that replaced it.
  render(transcript) {
    this.reasoningText.textContent = transcript.reasoning ?? "";
    this.reasoning.hidden = transcript.reasoning === null;
    this.toolCalls.replaceChildren(...transcript.toolCalls.map((call) => this.callItem(call)));
    this.toolCalls.hidden = this.toolCalls.childElementCount === 0;
  }

  // Shows what the event `type` (already added to `transcript`) changed.
  update(type, data, transcript) {
    if (type === EVENT.REASONING) {
      if (typeof data !== "string" || data === "") return;
      // Appending a text node keeps long reasoning cheap to show, piece after piece.
      this.reasoningText.append(document.createTextNode(data));
      this.reasoning.hidden = false;
    } else if (type === EVENT.TOOL_CALL || type === EVENT.TOOL_ARGS || type === EVENT.TOOL_DONE) {
      const call = transcript.toolCalls.find((c) => c.index === data?.index);
      if (!call) return;
      const item = this.callItem(call);
      const shown = this.toolCalls.querySelector(`li[data-index="${call.index}"]`);
      if (shown) shown.replaceWith(item);
      else this.toolCalls.append(item);
      this.toolCalls.hidden = false;
    } else if (type === EVENT.RESTARTED) {
      this.render(transcript);
    }
  }

  callItem(call) {
    return el(
      "li",
      { class: "tool-call", "data-index": call.index, "data-id": call.id, "data-done": call.done ? "true" : "false" },
      el("span", { class: "tool-name" }, el("code", { text: call.name })),
      el("pre", { class: "tool-args", text: shownArguments(call) }),
    );
  }
}
