// The in-browser engine's requests (worker.js): the flow side says texts and text streams one frame
// per turn of the event loop (a Stop or more text gets in between), the decoder side turns frames
// into audio and word times; voice uploads (the voice-cloning part on the first) and normalization.

"use strict";

let handover = null; // the port to a decoder worker that takes over from the next request ("both")
let running = null; // the flow side's current request (see pump)
// The voice-cloning part ({name, url, size}, from site.json): the flow side fetches and loads it on
// the first voice upload (`cloning`, a Promise from then on), not at boot.
let cloningPart = null;
let cloning = null;
const stopped = new Set(); // requests the decoder side drops
const decodeQueue = []; // frames and ends the decoder side has yet to handle
let decoding = false;

// A zero-delay pause that lets queued messages (a Stop, more text) in between two frames.
function yieldToEvents() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

function stop(id) {
  stopped.add(id);
  if (!running || running.id !== id) return;
  running.stopped = true;
  if (!running.pumping) {
    engine.cancel(); // a text stream waiting for text: nothing else would drop it
    running = null;
  }
}

// The flow side. A request is {id, stopped, ended, pumping}: `ended` once no more text can come
// (at once for SPEAK; at END for a text stream). Its frames go to the decoder side: the other
// worker, or this one ("both").
function toDecoder(message) {
  if (role === "both") decodeNow(message);
  else port.postMessage(message);
}

// A "both" worker's decoding moves to the decoder worker behind `decoderPort`, between two requests:
// the one under way (if any) is decoded here to its end.
function handOver(decoderPort) {
  if (role !== "both" && role !== "flow") throw new Error(`a ${role} worker has no frames to hand over`);
  handover = decoderPort;
}

function begin(id, answer, ended) {
  const started = JSON.parse(answer);
  if (started.error) throw new Error(started.error);
  if (handover) {
    role = "flow";
    port = handover;
    handover = null;
  }
  running = { id, stopped: false, ended, pumping: false }; // a newer request replaces this one
  return running;
}

async function speak({ id, text, voice, options, words }) {
  if (!engine) throw new Error("the model is not loaded yet");
  await pump(begin(id, engine.start(text, voice || "", JSON.stringify(options || {}), Boolean(words)), true));
}

function openStream({ id, voice, options, words }) {
  if (!engine) throw new Error("the model is not loaded yet");
  begin(id, engine.open_stream(voice || "", JSON.stringify(options || {}), Boolean(words)), false);
}

// TEXT, FLUSH and END of the running text stream: new segments join the queue that pump() says.
async function streamText({ type, id, text }) {
  const request = running;
  if (!request || request.id !== id || request.stopped || request.ended) return; // stopped, or replaced
  const answer = JSON.parse(type === EngineMessage.TEXT ? engine.push(text) : engine.flush());
  if (answer.error) {
    request.stopped = true;
    engine.cancel();
    throw new Error(answer.error);
  }
  if (type === EngineMessage.END) request.ended = true;
  await pump(request);
}

// Hands on the request's segments and frames, one frame per turn of the event loop (so that a
// Stop or more text gets in), until nothing is queued: then, once the text has ended, its END.
async function pump(request) {
  if (request.pumping) return; // the loop under way takes what was just queued
  request.pumping = true;
  try {
    for (;;) {
      if (running !== request) return;
      if (request.stopped) {
        engine.cancel();
        return;
      }
      const item = engine.next_frame();
      if (item === undefined || item === null) break;
      const parsed = JSON.parse(item);
      if ("segment" in parsed) {
        const { segment: text, spoken, speed } = parsed;
        toDecoder({ type: FrameMessage.SEGMENT, id: request.id, text, spoken, speed });
      } else toDecoder({ type: FrameMessage.FRAME, id: request.id, frame: item });
      await yieldToEvents();
    }
  } finally {
    request.pumping = false;
  }
  if (!request.ended) return; // until more text comes
  running = null;
  toDecoder({ type: FrameMessage.END, id: request.id });
}

// The decoder side: frames in order, one per turn of the event loop, so that a Stop gets in.
function queueForDecoding(message) {
  decodeQueue.push(message);
  if (!decoding) decodeAll();
}

async function decodeAll() {
  decoding = true;
  try {
    while (decodeQueue.length > 0) {
      decodeNow(decodeQueue.shift());
      await yieldToEvents();
    }
  } finally {
    decoding = false;
  }
}

// One message of the flow side: a generation begins (its segment is announced with its first
// audio), one of its frames (its END last, which gives out what the speed change held back), or
// the request's end. `decoded` is the request being decoded: {id, samples (sent so far), start
// (the samples before the generation being decoded), segment (announced with the next audio or
// word, or null)}.
let decoded = null;

function decodeNow({ type, id, frame, text, spoken, speed }) {
  if (stopped.has(id)) return;
  try {
    if (decoded && decoded.id !== id) decoded = null; // a request replaced by a newer one
    if (type === FrameMessage.END) {
      decoded = null;
      post({ type: EngineMessage.DONE, id });
      return;
    }
    if (type === FrameMessage.SEGMENT) {
      engine.begin(speed);
      decoded = decoded || { id, samples: 0 };
      decoded.segment = { text, spoken };
      decoded.start = decoded.samples;
    } else {
      const audio = engine.decode(frame);
      sendWords(JSON.parse(engine.take_words()));
      sendAudio(audio);
    }
  } catch (error) {
    stopped.add(id);
    decoded = null;
    fail(id, error);
  }
}

// A frame's audio: none (undefined) while the speed change gathers its first few ms.
function sendAudio(proxy) {
  if (proxy === undefined) return;
  const buffer = proxy.getBuffer("f32");
  const chunk = buffer.data.slice(); // a copy: buffer.data views the whole wasm heap
  buffer.release();
  proxy.destroy();
  announce();
  decoded.samples += chunk.length;
  post({ type: EngineMessage.CHUNK, id: decoded.id, chunk }, [chunk.buffer]);
}

// A frame's word events (before its audio), in samples of the request.
function sendWords(events) {
  if (events.length === 0) return;
  announce();
  const { id, start } = decoded;
  for (const { kind, word, index, sample, start: begins, end } of events) {
    const times =
      kind === "start" ? { start_sample: start + sample } : { start_sample: start + begins, end_sample: start + end };
    post({ type: EngineMessage.WORD, id, kind, word, index, ...times });
  }
}

// The generation's SEGMENT, before its first audio or word.
function announce() {
  const { id, segment } = decoded;
  if (!segment) return;
  post({ type: EngineMessage.SEGMENT, id, text: segment.text, spoken: segment.spoken, start_sample: decoded.start });
  decoded.segment = null;
}

async function addVoice({ id, samples, sampleRate }) {
  if (!engine) throw new Error("the model is not loaded yet");
  if (cloningPart) {
    cloning = cloning || loadCloning(id);
    try {
      await cloning;
    } catch (error) {
      cloning = null; // the next upload tries again
      throw error;
    }
  }
  fileSystem().writeFile("/tmp/voice.f32", new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  const result = JSON.parse(engine.add_voice("/tmp/voice.f32", sampleRate));
  if (result.error) throw new Error(result.error);
  post({ type: EngineMessage.VOICE, id, voice: result.voice });
}

// The voice-cloning part, on the first upload: downloaded (through the cache, with progress for the
// upload `id`), then added to the loaded model. Its last PROGRESS says the voice itself is next.
async function loadCloning(id) {
  const { name, url, size } = cloningPart;
  const progress = progressMessages(id, size);
  progress("Downloading the voice-cloning part", 0);
  const file = await modelFile(name, url, size, (loaded) => progress("Downloading the voice-cloning part", loaded));
  fileSystem().writeFile("/model/" + name, file.bytes(), { canOwn: true });
  progress("Loading the voice-cloning part", size);
  await yieldToEvents(); // the page hears of it before the load holds this worker
  const result = JSON.parse(engine.add_cloning());
  if (result.error) throw new Error(result.error);
  progress("Cloning the voice", size);
}

function normalizeText({ id, text }) {
  if (!engine) throw new Error("the model is not loaded yet");
  const result = JSON.parse(engine.normalize(text));
  if (result.error) throw new Error(result.error);
  post({ type: EngineMessage.NORMALIZE, id, text: result.text });
}
