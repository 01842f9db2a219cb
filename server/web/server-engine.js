// Server mode: POST /stream and feed the raw 16-bit PCM to the player as it arrives (at the rate
// /health reports); text streams over the WebSocket /v1/audio/speech/stream.

// Calls onChunk(Float32Array) for every piece of audio received; resolves when the stream ends.
// Rejects with the server's error message (a 4xx/5xx JSON body) or an AbortError on Stop.
export async function speak({ text, voice, signal, onChunk, options }) {
  const body = { ...(options || {}), text };
  if (voice) body.voice = voice;
  const response = await fetch("/stream", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw new Error(await errorMessage(response));
  const reader = response.body.getReader();
  const samples = pcm16Reader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const chunk = samples(value);
    if (chunk) onChunk(chunk);
  }
}

// A text stream (see browser-engine.js for the contract) over the server's WebSocket: JSON frames
// out (start, text, flush, end, cancel), 16-bit PCM and JSON events (started, segment, done,
// error) in. Frames sent before the connection is open wait for it.
export function textStream({ voice, options, onChunk, onSegment }) {
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
  send({ ...(options || {}), ...(voice ? { voice } : {}), type: "start" });
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
    }
    else if (message.type === "done") settle(null);
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
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const chunk = new Float32Array(bytes.length / 2);
    for (let i = 0; i < chunk.length; i++) chunk[i] = view.getInt16(2 * i, true) / 32768;
    return chunk;
  };
}

export async function voices() {
  const response = await fetch("/voices");
  if (!response.ok) throw new Error(await errorMessage(response));
  const list = await response.json();
  return { default: list.default, voices: list.voices };
}

// The server's /health ({status, model, sample_rate, ...}).
export async function health() {
  const response = await fetch("/health", { cache: "no-cache" });
  if (!response.ok) throw new Error(await errorMessage(response));
  return response.json();
}

// Whether a server answers here (a static host of the site has none).
export async function available() {
  try {
    return (await fetch("/health", { cache: "no-cache" })).ok;
  } catch {
    return false;
  }
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
