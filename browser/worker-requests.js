// The in-browser engine's requests (worker.js): the flow side says texts and text streams one frame
// per turn of the event loop (a Stop or more text gets in between), the decoder side turns frames
// into audio and word times; voice uploads (the voice-cloning part on the first) and normalization.

"use strict";

// The flow side's requests: the one being said (see pump), and the port to a decoder worker that
// takes over from the next request ("both").
const flowSide = { running: null, handover: null };
// The voice-cloning part ({name, url, size}, from site.json): the flow side fetches and loads it on
// the first voice upload (`loading`, a Promise from then on), not at boot.
const cloning = { part: null, loading: null };
// The decoder side: the requests it drops, the frames and ends it has yet to handle (`busy` while it
// works through them), and the request being decoded: {id, samples (sent so far), start (the
// samples before the generation being decoded), segment (announced with the next audio or word, or
// null)}.
const decoderSide = { stopped: new Set(), queue: [], busy: false, request: null };

// A zero-delay pause that lets queued messages (a Stop, more text) in between two frames.
function yieldToEvents() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

function stop(id) {
  decoderSide.stopped.add(id);
  const { running } = flowSide;
  if (!running || running.id !== id) return;
  running.stopped = true;
  if (!running.pumping) {
    worker.engine.cancel(); // a text stream waiting for text: nothing else would drop it
    flowSide.running = null;
  }
}

// The flow side. A request is {id, stopped, ended, pumping}: `ended` once no more text can come
// (at once for SPEAK; at END for a text stream). Its frames go to the decoder side: the other
// worker, or this one ("both").
function toDecoder(message, transfer) {
  if (worker.role === "both") decodeNow(message);
  else worker.port.postMessage(message, transfer || []);
}

// A "both" worker's decoding moves to the decoder worker behind `decoderPort`, between two requests:
// the one under way (if any) is decoded here to its end.
function handOver(decoderPort) {
  if (worker.role !== "both" && worker.role !== "flow")
    throw new Error(`a ${worker.role} worker has no frames to hand over`);
  flowSide.handover = decoderPort;
}

function begin(id, answer, ended) {
  const started = JSON.parse(answer);
  if (started.error) throw new Error(started.error);
  if (flowSide.handover) {
    worker.role = "flow";
    worker.port = flowSide.handover;
    flowSide.handover = null;
  }
  flowSide.running = { id, stopped: false, ended, pumping: false }; // a newer request replaces this one
  return flowSide.running;
}

async function speak({ id, text, voice, options, words }) {
  const { engine } = worker;
  if (!engine) throw new Error("the model is not loaded yet");
  await pump(begin(id, engine.start(text, voice || "", JSON.stringify(options || {}), Boolean(words)), true));
}

function openStream({ id, voice, options, words }) {
  const { engine } = worker;
  if (!engine) throw new Error("the model is not loaded yet");
  begin(id, engine.open_stream(voice || "", JSON.stringify(options || {}), Boolean(words)), false);
}

// TEXT, FLUSH and END of the running text stream: new segments join the queue that pump() says.
async function streamText({ type, id, text }) {
  const { engine } = worker;
  const request = flowSide.running;
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
  const { engine } = worker;
  request.pumping = true;
  try {
    for (;;) {
      if (flowSide.running !== request) return;
      if (request.stopped) {
        engine.cancel();
        return;
      }
      const item = engine.next_frame();
      if (item === undefined || item === null) break;
      const parsed = JSON.parse(item);
      if ("segment" in parsed) {
        const { segment: text, spoken, speed, gain_db: gain } = parsed;
        toDecoder({ type: FrameMessage.SEGMENT, id: request.id, text, spoken, speed, gain });
      } else {
        const numbers = float32Copy(engine.frame_numbers());
        toDecoder({ type: FrameMessage.FRAME, id: request.id, ...parsed, numbers }, [numbers.buffer]);
      }
      await yieldToEvents();
    }
  } finally {
    request.pumping = false;
  }
  if (!request.ended) return; // until more text comes
  flowSide.running = null;
  toDecoder({ type: FrameMessage.END, id: request.id });
}

// A float32 NumPy array of this worker's Python (a PyProxy, destroyed here) -> a Float32Array of
// its own: a copy, because the array's buffer views the whole WebAssembly heap.
function float32Copy(proxy) {
  const buffer = proxy.getBuffer("f32");
  const copy = buffer.data.slice();
  buffer.release();
  proxy.destroy();
  return copy;
}

// The decoder side: frames in order, one per turn of the event loop, so that a Stop gets in.
function queueForDecoding(message) {
  decoderSide.queue.push(message);
  if (!decoderSide.busy) decodeAll();
}

async function decodeAll() {
  decoderSide.busy = true;
  try {
    while (decoderSide.queue.length > 0) {
      decodeNow(decoderSide.queue.shift());
      await yieldToEvents();
    }
  } finally {
    decoderSide.busy = false;
  }
}

// One message of the flow side: a generation begins (its segment is announced with its first
// audio), one of its frames (its END last, which gives out what the speed change held back), or
// the request's end.
function decodeNow(message) {
  const { type, id } = message;
  if (decoderSide.stopped.has(id)) return;
  const { engine } = worker;
  try {
    if (decoderSide.request && decoderSide.request.id !== id) decoderSide.request = null; // replaced by a newer one
    if (type === FrameMessage.END) {
      decoderSide.request = null;
      post({ type: EngineMessage.DONE, id });
      return;
    }
    if (type === FrameMessage.SEGMENT) {
      engine.begin(message.speed, JSON.stringify(message.gain === undefined ? null : message.gain));
      const request = decoderSide.request || { id, samples: 0 };
      request.segment = { text: message.text, spoken: message.spoken };
      request.start = request.samples;
      decoderSide.request = request;
    } else {
      const { numbers, silence, first, end, latent, units } = message;
      const address = engine.frame_room(numbers.length);
      if (numbers.length > 0)
        new Float32Array(worker.pyodide._module.HEAPU8.buffer, address, numbers.length).set(numbers);
      const audio = engine.decode(silence, first, end, latent, units || "");
      sendWords(JSON.parse(engine.take_words()));
      sendAudio(audio);
    }
  } catch (error) {
    decoderSide.stopped.add(id);
    decoderSide.request = null;
    fail(id, error);
  }
}

// A frame's audio: none (undefined) while the speed change gathers its first few ms.
function sendAudio(proxy) {
  if (proxy === undefined) return;
  const chunk = float32Copy(proxy);
  announce();
  const request = decoderSide.request;
  request.samples += chunk.length;
  post({ type: EngineMessage.CHUNK, id: request.id, chunk }, [chunk.buffer]);
}

// A frame's word events (before its audio), moved from samples of the generation to samples of
// the request: the shape stays the one of every wire (docs/word-timestamps.md).
function sendWords(events) {
  if (events.length === 0) return;
  announce();
  const { id, start } = decoderSide.request;
  for (const event of events) {
    const moved = { ...event, id, start_sample: start + event.start_sample };
    if (event.type === EngineMessage.WORD_END) moved.end_sample = start + event.end_sample;
    post(moved);
  }
}

// The generation's SEGMENT, before its first audio or word.
function announce() {
  const request = decoderSide.request;
  if (!request.segment) return;
  const { text, spoken } = request.segment;
  post({ type: EngineMessage.SEGMENT, id: request.id, text, spoken, start_sample: request.start });
  request.segment = null;
}

async function addVoice({ id, samples, sampleRate }) {
  const { engine } = worker;
  if (!engine) throw new Error("the model is not loaded yet");
  if (cloning.part) {
    cloning.loading = cloning.loading || loadCloning(id);
    try {
      await cloning.loading;
    } catch (error) {
      cloning.loading = null; // the next upload tries again
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
  const { name, url, size } = cloning.part;
  const progress = progressMessages(id, size);
  progress("Downloading the voice-cloning part", 0);
  const file = await modelFile(name, url, size, (loaded) => progress("Downloading the voice-cloning part", loaded));
  fileSystem().writeFile("/model/" + name, file.bytes(), { canOwn: true });
  progress("Loading the voice-cloning part", size);
  await yieldToEvents(); // the page hears of it before the load holds this worker
  const result = JSON.parse(worker.engine.add_cloning());
  if (result.error) throw new Error(result.error);
  progress("Cloning the voice", size);
}

function normalizeText({ id, text }) {
  const { engine } = worker;
  if (!engine) throw new Error("the model is not loaded yet");
  const result = JSON.parse(engine.normalize(text));
  if (result.error) throw new Error(result.error);
  post({ type: EngineMessage.NORMALIZE, id, text: result.text });
}
