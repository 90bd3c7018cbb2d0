// A tool that runs in the browser. Offered to the model (in the OpenAI function format genq
// takes), it is answered by useChat's onToolCall; useChat then sends the chat back with the
// answer and genq gives it to the provider as the tool's result.

export const CLOCK_TOOL = {
  type: "function",
  function: {
    name: "get_local_time",
    description: "The user's local date, time and time zone",
    parameters: {
      type: "object",
      properties: {
        locale: { type: "string", description: "How to write the time: a BCP 47 tag, e.g. en-GB" },
      },
    },
  },
};

/** The tool's answer; a locale the browser does not know throws (useChat shows the error). */
export function readClock({ locale } = {}) {
  return {
    time: new Date().toLocaleString(locale),
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  };
}
