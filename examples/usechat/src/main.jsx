import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.jsx";
import { chatIdFromAddress } from "./chatId.js";
import "./style.css";

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App chatId={chatIdFromAddress()} />
  </StrictMode>,
);
