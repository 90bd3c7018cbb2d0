// What the app keeps in the browser (localStorage). genq keeps generations, not conversations:
// the app keeps the chat's messages (by chat id) and useChat sends them all with each new
// message. What is kept when the page goes away mid-answer is the question; the answer comes
// back from genq. The model picked last is kept too, so a reload does not change it.

const chatKey = (chatId) => `genq-usechat:chat:${chatId}`;
const MODEL_KEY = "genq-usechat:model";

export function loadMessages(chatId) {
  try {
    return JSON.parse(localStorage.getItem(chatKey(chatId))) ?? [];
  } catch {
    return [];
  }
}

export function saveMessages(chatId, messages) {
  localStorage.setItem(chatKey(chatId), JSON.stringify(messages));
}

export const loadModel = () => localStorage.getItem(MODEL_KEY) ?? "";

export const saveModel = (model) => localStorage.setItem(MODEL_KEY, model);
