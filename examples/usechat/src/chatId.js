import { generateId } from "ai";

/** The chat's id, kept in the address (`?chat=<id>`): a reload, or the link opened elsewhere,
 * reopens the same chat, and useChat's `resume` asks genq for its answer in progress. A page
 * opened without one starts a new chat. */
export function chatIdFromAddress() {
  const url = new URL(window.location.href);
  let id = url.searchParams.get("chat");
  if (!id) {
    id = generateId();
    url.searchParams.set("chat", id);
    window.history.replaceState(null, "", url);
  }
  return id;
}
