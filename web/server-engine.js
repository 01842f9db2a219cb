// Server mode: POST /stream and feed the raw 16-bit PCM to the player as it arrives (at the rate
// /health reports).

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
  let carry = null; // an odd byte left over from the previous network chunk
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
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
    if (bytes.length === 0) continue;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const chunk = new Float32Array(bytes.length / 2);
    for (let i = 0; i < chunk.length; i++) chunk[i] = view.getInt16(2 * i, true) / 32768;
    onChunk(chunk);
  }
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
