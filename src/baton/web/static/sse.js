// A server-sent events reader on fetch: the stream's body read as it arrives and parsed here
// (the text/event-stream format: "event:", "data:", "id:", "retry:", comments, blank-line
// dispatch), reconnecting after a drop with Last-Event-ID set to the last id received, as
// EventSource does. Unlike EventSource it never hands the page more than one network chunk's
// frames at a time, and each frame's data stays a string (the caller parses it when it shows
// it), so a stream of 50,000 events never holds the main thread.

const DEFAULT_RETRY_MS = 1000;

export class EventReader {
  // onFrame({type, id, data}) for each frame; onOpen() when a connection answers 200;
  // onDrop(error) when one ends before close(); onFatal(error) for an answer that is not a stream.
  constructor(url, handlers) {
    this.url = url;
    this.handlers = handlers;
    this.lastEventId = "";
    this.retryMs = DEFAULT_RETRY_MS;
    this.closed = false;
    this.controller = null;
  }

  start() {
    this.loop();
    return this;
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }

  async loop() {
    while (!this.closed) {
      let failure = null;
      try {
        await this.once();
      } catch (error) {
        failure = error;
      }
      if (this.closed) return;
      if (failure && failure.fatal) {
        this.closed = true;
        if (this.handlers.onFatal) this.handlers.onFatal(failure);
        return;
      }
      if (this.handlers.onDrop) this.handlers.onDrop(failure);
      await new Promise((resolve) => setTimeout(resolve, this.retryMs));
    }
  }

  async once() {
    this.controller = new AbortController();
    const headers = { accept: "text/event-stream" };
    if (this.lastEventId) headers["last-event-id"] = this.lastEventId;
    const response = await fetch(this.url, { headers, credentials: "same-origin", cache: "no-store", signal: this.controller.signal });
    const type = response.headers.get("content-type") || "";
    if (!response.ok || !type.startsWith("text/event-stream")) {
      const error = new Error(`the event stream answered ${response.status}`);
      error.status = response.status;
      error.fatal = response.status !== 503 && response.status !== 429; // busy: try again later
      if (response.status === 401) location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
      throw error;
    }
    if (this.handlers.onOpen) this.handlers.onOpen();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new FrameParser((frame) => {
      if (frame.id !== null) this.lastEventId = frame.id;
      if (frame.retry !== null) this.retryMs = frame.retry;
      if (frame.type !== null) this.handlers.onFrame(frame);
    });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
      if (this.closed) {
        reader.cancel().catch(() => {});
        return;
      }
    }
  }
}

// The event-stream format, chunk by chunk (a line or a frame may be split across chunks).
export class FrameParser {
  constructor(dispatch) {
    this.dispatch = dispatch;
    this.rest = "";
    this.reset();
  }

  reset() {
    this.type = "";
    this.data = null;
    this.id = null;
    this.retry = null;
  }

  push(text) {
    const buffer = this.rest ? this.rest + text : text;
    let start = 0;
    let cr = buffer.indexOf("\r"); // -1 (no CR at all, the usual case) is never searched again
    for (;;) {
      let end = buffer.indexOf("\n", start);
      if (cr !== -1 && cr < start) cr = buffer.indexOf("\r", start);
      if (cr !== -1 && (end === -1 || cr < end)) {
        if (cr === buffer.length - 1) break; // a CR at the end: wait for a possible LF
        end = cr;
      }
      if (end === -1) break;
      this.line(buffer.slice(start, end));
      start = end + (buffer.charCodeAt(end) === 13 && buffer.charCodeAt(end + 1) === 10 ? 2 : 1);
    }
    this.rest = buffer.slice(start);
  }

  line(line) {
    if (line === "") {
      // A frame without data is no event, but its id and retry still count.
      const frame = { type: this.data === null ? null : this.type || "message", data: this.data, id: this.id, retry: this.retry };
      this.reset();
      if (frame.type !== null || frame.id !== null || frame.retry !== null) this.dispatch(frame);
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ":" a comment (the server's keep-alive)
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "data") this.data = this.data === null ? value : this.data + "\n" + value;
    else if (field === "event") this.type = value;
    else if (field === "id") {
      if (!value.includes("\0")) this.id = value;
    } else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
  }
}
