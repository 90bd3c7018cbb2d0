// The app calls genq through this server: `vite` (development) and `vite preview` (the built
// app) forward /v1 to the gateway and add the API key there, so the key never reaches the
// browser. The proxy streams responses as they come (vite compresses only its own files), which
// the UI message stream needs.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

function genqProxy() {
  const key = process.env.GENQ_API_KEY;
  if (!key) {
    throw new Error("set GENQ_API_KEY (with `make dev`: GENQ_API_KEY=genq-dev-key)");
  }
  const target = process.env.GENQ_URL || "http://127.0.0.1:8000";
  return { "/v1": { target, changeOrigin: true, headers: { Authorization: `Bearer ${key}` } } };
}

export default defineConfig(({ command }) => {
  // A build talks to nobody: only the servers need the gateway's address and key.
  const proxy = command === "serve" ? genqProxy() : undefined;
  return { plugins: [react()], server: { proxy }, preview: { proxy } };
});
