// The change stream (/v1/events) read with fetch(): EventSource cannot send an
// Authorization header. Frames are parsed as the SSE format says; after a dropped
// connection the stream resumes from the last event id (Last-Event-ID).

/**
 * Follow the stream until stop() is called.
 * onEvent({event, id, data}) per frame; onState("live" | "reconnecting" | "off", detail, status):
 * status is the HTTP status that ended it for good (401: the token is no longer accepted).
 */
export function follow(getToken, onEvent, onState) {
  let lastId = null;
  let stopped = false;
  let controller = null;
  let delay = 500;

  async function once() {
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${getToken() ?? ""}`, Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    const response = await fetch("/v1/events", {
      headers,
      signal: controller.signal,
      cache: "no-store",
      credentials: "omit",
    });
    if (!response.ok) {
      let message = `${response.status}`;
      try {
        message = (await response.json()).message ?? message;
      } catch {}
      const error = new Error(message);
      error.status = response.status;
      error.fatal = response.status === 401 || response.status === 403 || response.status === 404;
      throw error;
    }
    onState("live");
    delay = 500;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const frames = buffer.split(/\r\n\r\n|\n\n|\r\r/);
      buffer = frames.pop();
      for (const frame of frames) dispatch(frame);
    }
  }

  function dispatch(frame) {
    let event = "message";
    let id = null;
    const data = [];
    for (const line of frame.split(/\r\n|\n|\r/)) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
    }
    if (id !== null) lastId = id;
    if (!data.length) return;
    let parsed = data.join("\n");
    try {
      parsed = JSON.parse(parsed);
    } catch {}
    onEvent({ event, id, data: parsed });
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
        if (!stopped) onState("reconnecting", "the stream ended");
      } catch (error) {
        if (stopped) break;
        if (error.fatal) {
          onState("off", error.message, error.status);
          return;
        }
        onState("reconnecting", error.message);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10000);
    }
  })();

  return {
    stop() {
      stopped = true;
      controller?.abort();
      onState("off");
    },
    /** Drop the connection (as a network failure would); the loop resumes it. */
    drop() {
      controller?.abort();
    },
  };
}
