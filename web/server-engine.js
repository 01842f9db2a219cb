// Server mode: POST /stream and feed the raw 16-bit PCM to the player as it arrives (at the rate
// /health reports), or POST /stream/words (JSON lines: the audio and its words) where the model
// times words; text streams over the WebSocket /v1/audio/speech/stream.

// A stream that sends nothing for this long has stalled (the server sends a frame's audio at least
// every 80 ms of audio while it generates); its first answer may take longer (a voice to clone or
// to download first).
export const STALL_MS = 5000;
export const ANSWER_MS = 30000;

// Calls onChunk(Float32Array) for every piece of audio received, and with `words`, onWord(event)
// for each word event as the server sends it, the shape of every wire (as browser-engine.js);
// resolves when the stream ends. Rejects with the server's error message (a 4xx/5xx JSON body), an
// Error saying the server went away or stalled (its stream is closed then), or an AbortError on Stop.
export async function speak({ text, voice, signal, onChunk, onWord, options, words }) {
  const body = { ...(options || {}), text };
  if (voice) body.voice = voice;
  const request = new AbortController();
  const stop = () => request.abort();
  signal.addEventListener("abort", stop);
  const unanswered = setTimeout(() => request.abort(), ANSWER_MS);
  try {
    let response;
    try {
      response = await fetch(words ? "/stream/words" : "/stream", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        signal: request.signal,
      });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new Error(
        request.signal.aborted
          ? `the server did not answer in ${ANSWER_MS / 1000} s`
          : "the server is not answering: is it still running?",
      );
    } finally {
      clearTimeout(unanswered);
    }
    if (!response.ok) throw new Error(await errorMessage(response));
    const reader = watched(response.body.getReader(), signal);
    if (words) {
      await readWordLines(reader, onChunk, onWord);
      return;
    }
    const samples = pcm16Reader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const chunk = samples(value);
      if (chunk) onChunk(chunk);
    }
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

// A response body's reader whose reads fail with a clear error when the server goes away, or sends
// nothing for STALL_MS (the body is cancelled then: the server sees its client gone).
function watched(reader, signal) {
  return {
    async read() {
      let timer;
      const stalled = new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the server stopped sending audio (nothing for ${STALL_MS / 1000} s)`)),
          STALL_MS,
        );
      });
      try {
        return await Promise.race([reader.read(), stalled]);
      } catch (error) {
        reader.cancel().catch(() => {});
        if (signal.aborted || error.name === "AbortError") throw error;
        if (error instanceof TypeError) throw new Error("the connection to the server was lost mid-stream");
        throw error;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

// POST /stream/words' JSON lines (started, audio, word, word_end, done), as they come.
async function readWordLines(reader, onChunk, onWord) {
  const decoder = new TextDecoder();
  let buffered = "";
  const line = (text) => {
    const message = JSON.parse(text);
    if (message.type === "audio") onChunk(pcm16Samples(Uint8Array.from(atob(message.audio), (c) => c.charCodeAt(0))));
    else if (message.type === "word" || message.type === "word_end") onWord(message);
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    const lines = buffered.split("\n");
    buffered = lines.pop();
    for (const text of lines) if (text) line(text);
  }
  if (buffered) line(buffered);
}

// A text stream (see browser-engine.js for the contract) over the server's WebSocket: JSON frames
// out (start, text, flush, end, cancel), 16-bit PCM and JSON events (started, segment, done,
// error) in. Frames sent before the connection is open wait for it.
export function textStream({ voice, options, onChunk, onSegment, onWord, words }) {
  const url = new URL("/v1/audio/speech/stream", location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  const waiting = [];
  let over = false;
  let resolve, reject;
  const done = new Promise((yes, no) => {
    resolve = yes;
    reject = no;
  });
  const settle = (error) => {
    if (over) return;
    over = true;
    if (error) reject(error);
    else resolve();
    if (socket.readyState <= WebSocket.OPEN) socket.close(1000);
  };
  const send = (frame) => {
    if (over) return;
    const data = JSON.stringify(frame);
    if (socket.readyState === WebSocket.OPEN) socket.send(data);
    else waiting.push(data);
  };
  send({ ...(options || {}), ...(voice ? { voice } : {}), ...(words ? { words: true } : {}), type: "start" });
  socket.onopen = () => waiting.splice(0).forEach((data) => socket.send(data));
  const samples = pcm16Reader();
  socket.onmessage = (event) => {
    if (over) return;
    if (typeof event.data !== "string") {
      const chunk = samples(new Uint8Array(event.data));
      if (chunk) onChunk(chunk);
      return;
    }
    const message = JSON.parse(event.data);
    if (message.type === "segment") {
      onSegment({ text: message.text, spoken: message.spoken, start_sample: message.start_sample });
    } else if (message.type === "word" || message.type === "word_end") {
      if (onWord) onWord(message);
    } else if (message.type === "done") settle(null);
    else if (message.type === "error") settle(new Error(message.error.message));
  };
  socket.onclose = (event) => {
    const reason = event.reason ? `: ${event.reason}` : "";
    settle(new Error(`the server closed the text stream (${event.code}${reason})`));
  };
  return {
    append: (text) => send({ type: "text", text }),
    flush: () => send({ type: "flush" }),
    end: () => send({ type: "end" }),
    cancel: () => {
      send({ type: "cancel" });
      settle(new DOMException("cancelled", "AbortError"));
    },
    done,
  };
}

// 16-bit little-endian PCM bytes, as they come (any split) -> Float32Array samples, or null when a
// piece holds no whole sample (an odd byte waits for the next piece).
function pcm16Reader() {
  let carry = null;
  return (value) => {
    let bytes = value;
    if (carry !== null) {
      bytes = new Uint8Array(value.length + 1);
      bytes[0] = carry;
      bytes.set(value, 1);
      carry = null;
    }
    if (bytes.length % 2 === 1) {
      carry = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    if (bytes.length === 0) return null;
    return pcm16Samples(bytes);
  };
}

// Whole 16-bit little-endian samples -> Float32Array.
function pcm16Samples(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const chunk = new Float32Array(bytes.length / 2);
  for (let i = 0; i < chunk.length; i++) chunk[i] = view.getInt16(2 * i, true) / 32768;
  return chunk;
}

// The voices a request may name here: the default's name, the predefined ones, and the uploads the
// server keeps (with --voices-dir, across restarts): [{id, name}].
export async function voices() {
  const response = await fetch("/v1/audio/voices");
  if (!response.ok) throw new Error(await errorMessage(response));
  const listed = (await response.json()).voices;
  return {
    default: listed.find((v) => v.kind === "default").name,
    voices: listed.filter((v) => v.kind === "predefined").map((v) => v.id),
    uploaded: listed.filter((v) => v.kind === "uploaded").map((v) => ({ id: v.id, name: v.name })),
  };
}

// Forget an uploaded voice on the server, and its saved file.
export async function deleteVoice(id) {
  const response = await fetch(`/v1/audio/voices/${encodeURIComponent(id)}`, { method: "DELETE" });
  if (!response.ok) throw new Error(await errorMessage(response));
}

// The server's /health ({status, model, sample_rate, ...}).
export async function health() {
  const response = await fetch("/health", { cache: "no-cache" });
  if (!response.ok) throw new Error(await errorMessage(response));
  return response.json();
}

export async function uploadVoice(file) {
  const form = new FormData();
  form.append("voice_wav", file, file.name);
  const response = await fetch("/voices", { method: "POST", body: form });
  if (!response.ok) throw new Error(await errorMessage(response));
  return (await response.json()).voice;
}

async function errorMessage(response) {
  try {
    return (await response.json()).error.message;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}
