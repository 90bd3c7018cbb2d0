import { useState } from "react";
import { Message } from "./Message.jsx";
import { loadModel, saveModel } from "./storage.js";
import { useGenqChat } from "./useGenqChat.js";
import { useModels } from "./useModels.js";

export function App({ chatId }) {
  const models = useModels();
  const [model, setModel] = useState(loadModel);
  const [offerClock, setOfferClock] = useState(false);
  const [input, setInput] = useState("");
  const picked = models.list.includes(model) ? model : models.list[0] || "";
  const chat = useGenqChat(chatId, { model: picked, offerClock });

  function pickModel(id) {
    setModel(id);
    saveModel(id);
  }

  function send(event) {
    event.preventDefault();
    if (!input.trim()) return;
    chat.ask(input);
    setInput("");
  }

  const problems = [models.error, chat.error?.message, chat.stopError].filter(Boolean);
  return (
    <main>
      <header>
        <h1>genq · useChat</h1>
        <label>
          Model{" "}
          <select id="model" value={picked} onChange={(e) => pickModel(e.target.value)}>
            {models.list.map((id) => (
              <option key={id}>{id}</option>
            ))}
          </select>
        </label>
        <label>
          <input
            id="offer-clock"
            type="checkbox"
            checked={offerClock}
            onChange={(e) => setOfferClock(e.target.checked)}
          />{" "}
          Offer the model this browser's clock (a tool)
        </label>
      </header>

      <ol id="messages">
        {chat.messages.map((message) => (
          <Message key={message.id} message={message} />
        ))}
      </ol>

      <p id="status" data-status={chat.status}>
        {[chat.status, ...problems.map(detailOf)].join(": ")}
      </p>

      <form onSubmit={send}>
        <input
          id="input"
          value={input}
          onChange={(e) => setInput(e.target.value)}
          placeholder="Say something"
          aria-label="Message"
          autoComplete="off"
        />
        <button id="send" type="submit" disabled={chat.busy || !picked}>
          Send
        </button>
        <button id="stop" type="button" onClick={chat.stopAnswer} disabled={!chat.busy}>
          Stop
        </button>
      </form>
    </main>
  );
}

/** genq's errors are `{"detail": ...}`; anything else is shown as it came. */
function detailOf(text) {
  try {
    return JSON.parse(text).detail ?? text;
  } catch {
    return text;
  }
}
