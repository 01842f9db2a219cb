// The page: text, voice, speed, normalization, Generate/Stop, "speak as I type", playback as audio
// arrives with its waveform and the segment sounding, a download link, and the TTFA panel. Two
// engines with one contract (speak, textStream, uploadVoice): the server (POST /stream and the
// WebSocket /v1/audio/speech/stream; its voices from GET /voices) and the browser (Pyodide in
// workers, browser/browser-engine.js, loaded only where site.json says the site has a model; its
// voices from the model's info at boot). What the page records of its runs, and the calls
// automation drives it with, are window.pocketTTS (automation.js).

import "./audio-protocol.js";
import { expose, records } from "./automation.js";
import { createPlayer, wavBlob } from "./player.js";
import * as server from "./server-engine.js";
import { Waveform } from "./waveform.js";

const AudioMessage = globalThis.PocketAudioProtocol;

const $ = (id) => document.getElementById(id);
const player = createPlayer();
const waveform = new Waveform($("wave"));
// sampleRate: of the engine in use (its /health, or the in-browser model's info). run: what the
// player plays (a Generate run or a text stream); live: the "speak as I type" stream.
const state = {
  controller: null,
  run: null,
  site: null,
  sampleRate: null,
  live: null,
  liveRun: null,
  liveText: "",
  livePause: null,
  words: false, // whether the engine's model times words (timestamp heads)
};
// After this long without typing, "speak as I type" says what it holds (an unfinished sentence).
const TYPING_PAUSE_MS = 1500;

function status(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

function median(values) {
  const sorted = values.filter((v) => v !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function ms(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value)}`;
}

function renderPanel() {
  const runs = records.runs;
  const rows = runs
    .slice(-10)
    .reverse()
    .map(
      (r, i) =>
        `<tr><td>${runs.length - i}</td><td>${r.mode}</td><td>${ms(r.ttfc_ms)}</td><td>${ms(r.ttfa_ms)}</td>` +
        `<td>${ms(r.total_ms)}</td><td>${ms(r.audio_ms)}</td></tr>`,
    );
  const modes = [...new Set(runs.map((r) => r.mode))];
  const medians = modes.map((mode) => {
    const mine = runs.filter((r) => r.mode === mode);
    return (
      `<tr class="median"><td>median (${mine.length})</td><td>${mode}</td>` +
      ["ttfc_ms", "ttfa_ms", "total_ms", "audio_ms"]
        .map((k) => `<td>${ms(median(mine.map((r) => r[k])))}</td>`)
        .join("") +
      "</tr>"
    );
  });
  $("runs").innerHTML = medians.join("") + rows.join("");
  const load = records.load;
  $("load").textContent = load
    ? `In-browser model loaded in ${ms(load.total_ms)} ms (Pyodide ${ms(load.pyodide_ms)}, NumPy and core ` +
      `${ms(load.numpy_ms)}, ${modelSource(load)}, model ${ms(load.load_ms)}); ` +
      "the runs below are with it warm."
    : "";
}

// Where the first worker's model came from: its download alongside Python's start, or the files
// the workers keep (a returning visit), read once Python is up.
function modelSource(load) {
  return load.model_stored
    ? `model read from the ${load.model_store} in ${ms(load.model_copy_ms)}`
    : `model download ${ms(load.download_ms)} alongside`;
}

// The in-browser engine's module is imported by start() where the site has a model.
const engines = { server, browser: null };
const mode = () => $("mode").value;

function fillVoices(list) {
  const select = $("voice");
  select.innerHTML = "";
  state.voiceless = !list.default;
  select.append(new Option(state.voiceless ? "none yet: upload a voice" : `default (${list.default})`, ""));
  for (const name of list.voices) select.append(new Option(name, name));
}

// Voice upload on or off, with why (the page knows from site.json and the model's manifest, before
// any of the voice-cloning part is downloaded).
function offerUploads(on, why) {
  $("voice-file").disabled = !on;
  $("voice-file").parentElement.title = why;
}

function cloningNote() {
  const name = state.site.model.voice_cloning;
  const megabytes = (state.site.model.files[name] / 1e6).toFixed(0);
  return `The first upload downloads the voice-cloning part of the model (${megabytes} MB)`;
}

async function useMode(name) {
  stop();
  $("generate").disabled = true;
  if (name === "server") {
    const health = await server.health();
    state.sampleRate = health.sample_rate;
    state.words = Boolean(health.word_timestamps);
    fillVoices(await server.voices());
    offerUploads(true, "");
    $("generate").disabled = false;
    status("Ready (server).");
    return;
  }
  const start = performance.now();
  const { info, timings, phases, workers } = await engines.browser.boot(state.site, (progress) => {
    const share = progress.total ? ` (model ${Math.round((100 * progress.loaded) / progress.total)}%)` : "";
    status(`${progress.stage}…${share}`);
  });
  const firstLoad = !records.load;
  if (firstLoad) {
    records.load = {
      ...timings,
      total_ms: performance.now() - start,
      ready_at_ms: performance.now(), // since the page was opened
      all_ready_at_ms: null, // once every worker is up (the decoder worker joins after the first)
      decoder_started_at_ms: null, // when the decoder worker began to boot (after a pause in requests)
      phases,
      workers,
      heap_bytes: info.heap_bytes,
      model_store: info.model_store, // where the workers keep the model's files (browser/worker.js)
    };
  }
  state.sampleRate = info.sample_rate;
  state.words = Boolean(info.word_timestamps);
  fillVoices({ default: info.default_voice, voices: info.voices.filter((v) => v !== info.default_voice) });
  offerUploads(info.can_clone_voices, info.can_clone_voices ? cloningNote() : "this model comes without voice cloning");
  renderPanel();
  if (!info.default_voice && !info.voices.length && !info.can_clone_voices) {
    throw new Error("This site's model has no voice and cannot clone one: build the site again with --voice NAME.");
  }
  $("generate").disabled = false;
  const ready = (count) =>
    `Ready (in this browser: Python ${info.python}, NumPy ${info.numpy}, ${info.kernels}, ${count === 2 ? "two workers" : "one worker"}).` +
    (state.voiceless ? " This model has no voice of its own: upload a recording of one." : "");
  status(ready(workers));
  engines.browser.allWorkers().then((all) => {
    if (firstLoad) {
      records.load.all_ready_at_ms = performance.now();
      records.load.decoder_started_at_ms = all.decoder_started_at_ms || null;
      records.load.workers = all.workers;
    }
    if (all.workers !== workers && $("status").textContent === ready(workers)) status(ready(all.workers));
  });
}

async function generate() {
  const text = $("text").value;
  if (!text.trim()) {
    status("Type something to say first.", true);
    return;
  }
  if (state.voiceless && !$("voice").value) {
    status("This model has no voice of its own: upload a recording of a voice first (any audio file).", true);
    return;
  }
  stop();
  const controller = new AbortController();
  const run = {
    mode: mode(),
    sampleRate: state.sampleRate,
    t0: performance.now(),
    ttfc: null,
    ttfa: null,
    end: null,
    chunks: [],
    samples: 0,
    words: [],
  };
  showRun(run);
  state.controller = controller;
  state.run = run;
  records.current = { mode: run.mode, samples: 0 };
  $("generate").disabled = true;
  $("stop").disabled = false;
  $("download").hidden = true;
  status("Generating…");
  // The engine is asked first, then the player starts alongside: a first click makes the
  // AudioContext (which holds this thread for tens of ms) and loads the worklet. Audio that comes
  // before the player is up is queued behind it.
  const speaking = engines[run.mode].speak({
    text,
    voice: $("voice").value,
    options: pageOptions(),
    signal: controller.signal,
    words: state.words,
    onWord: (event) => showWord(run, event),
    onChunk: (chunk) => {
      if (run.ttfc === null) run.ttfc = performance.now() - run.t0;
      run.samples += chunk.length;
      if (state.run === run && records.current) records.current.samples = run.samples;
      run.chunks.push(chunk.slice());
      waveform.add(chunk);
      ready.then(() => state.run === run && player.push(chunk));
    },
  });
  const ready = player.start(run.sampleRate);
  ready.then(
    () => state.run === run && records.current && (records.current.playing = true),
    () => controller.abort(),
  );
  try {
    await speaking;
    await ready;
    if (state.run !== run) return; // stopped while the player started
    run.end = performance.now() - run.t0;
    player.end();
    finish(run);
  } catch (error) {
    // The engine's own failure (the server gone) is the one to show; where the player could not
    // start (its worklet not loaded: the server gone at the first click), it stopped the engine,
    // and its failure is shown whatever its name: never a run left "Generating…".
    const playerFailure = await ready.then(
      () => null,
      (reason) => reason,
    );
    const failed = error.name !== "AbortError" ? error : playerFailure;
    if (failed && state.run === run) runFailed(failed);
  } finally {
    if (state.run === run) records.current = null;
    if (state.run === run) {
      $("generate").disabled = false;
      // Stop stays for as long as the audio plays (DRAINED ends it).
      $("stop").disabled = run.samples === 0 || run.end === null;
      state.controller = null;
    }
  }
}

// A run that failed: its error, and nothing of it left on the page as if it were a result (its
// audio, waveform, segments, words and download link go).
function runFailed(error) {
  stop();
  waveform.reset();
  $("segments").replaceChildren();
  $("words").replaceChildren();
  $("download").hidden = true;
  records.words = [];
  status(error.message, true);
}

function finish(run) {
  const audioMs = (1000 * run.samples) / run.sampleRate;
  $("download").href = URL.createObjectURL(wavBlob(run.chunks, run.sampleRate));
  $("download").hidden = false;
  if (run.record) return; // a text stream: its record is in pocketTTS.streams
  const record = () => {
    run.entry = {
      mode: run.mode,
      started_at_ms: run.t0,
      ttfc_ms: run.ttfc,
      ttfa_ms: run.ttfa,
      total_ms: run.end,
      audio_ms: audioMs,
      words: wordRecords(run), // again once it has played out: when each was heard
    };
    records.runs.push(run.entry);
    renderPanel();
    status(`Done: ${(audioMs / 1000).toFixed(2)} s of audio, first audio after ${ms(run.ttfa)} ms.`);
  };
  // The first audible sample may still be on its way to the speakers (a very short run).
  if (run.ttfa !== null || run.samples === 0) record();
  else run.onFirstAudio = record;
}

function stop() {
  records.current = null;
  if (state.controller) state.controller.abort();
  if (state.run && state.run.stream) state.run.stream.cancel();
  state.controller = null;
  state.run = null;
  state.live = null;
  clearTimeout(state.livePause);
  player.stop();
  $("generate").disabled = false;
  $("stop").disabled = true;
  $("finish").disabled = true;
}

// The options of every generation, from the page's controls.
function pageOptions() {
  return { speed: Number($("speed").value), normalize: $("normalize").checked };
}

// A text stream: text arriving in pieces (an LLM's reply, a user typing), spoken segment by segment
// as each is complete, with the same calls in both modes (the server's WebSocket, or the workers):
//   const s = pocketTTS.textStream({mode, voice, options, play, onSegment, onChunk});   // all optional
//   s.append("Hello wor"); s.append("ld. How are"); s.flush(); s.end(); await s.done;  // or s.cancel()
// mode: the page's engine by default (another must have been selected once: the browser's boots
// then); voice: the page's; options (any generation option: speed, normalize, seed, ...) on top of
// the page's controls (speed, normalize).
// With play (the default) the page plays it, draws it and shows the segment sounding; without, it
// only collects. onSegment({text, spoken, start_sample}) before each segment's first audio;
// onChunk(Float32Array) for each piece of audio. `done` resolves, once everything has been received
// (and played out, with play), with the stream's record, also appended to pocketTTS.streams:
// {mode, sample_rate, opened_at, appends: [{at, text}], segments: [{text, spoken, start_sample,
// received_at, heard_at, shown_at}], first_audio_at, ended_at, done_at, samples, played} where `*_at` are
// performance.now() times: when each piece was appended, when each segment's first audio arrived,
// left the speakers (audio clock) and was highlighted, when the first audible sample left the
// speakers, when end() was called and when the last audio arrived; played: {samples, audible,
// stalls, starved} from the worklet (stalls: the gaps where playback waited for audio; starved:
// the samples of silence they lasted). cancel() stops at once (barge-in); `done` then rejects
// with an AbortError, as it rejects with the engine's error. Playing needs a user gesture on the
// page before (browsers keep audio off until one).
function textStream({ mode: name = mode(), voice = $("voice").value, options, play = true, onSegment, onChunk } = {}) {
  const record = {
    mode: name,
    sample_rate: state.sampleRate,
    opened_at: performance.now(),
    appends: [],
    segments: [],
    first_audio_at: null,
    ended_at: null,
    done_at: null,
    samples: 0,
    played: null,
  };
  const run = { mode: name, sampleRate: state.sampleRate, record, chunks: [], samples: 0, stream: null, drained: null };
  const playedOut = new Promise((resolve) => {
    run.drained = resolve; // by the worklet's DRAINED: {samples, audible, stalls, starved}
  });
  if (play) {
    stop();
    state.run = run;
    showRun(run);
    $("stop").disabled = false;
  }
  // Audio may come before the AudioContext has resumed: it is queued behind that.
  const ready = play ? player.start(run.sampleRate) : Promise.resolve();
  const stream = engines[name].textStream({
    voice,
    options: { ...pageOptions(), ...options },
    words: state.words,
    onWord: (event) => {
      if (play) showWord(run, event);
    },
    onSegment: (event) => {
      const segment = { ...event, received_at: performance.now(), heard_at: null, shown_at: null };
      record.segments.push(segment);
      if (play) showSegment(run, segment);
      if (onSegment) onSegment(event);
    },
    onChunk: (chunk) => {
      run.samples += chunk.length;
      if (onChunk) onChunk(chunk);
      if (!play) return;
      run.chunks.push(chunk.slice());
      waveform.add(chunk);
      const copy = chunk.slice(); // the player takes its buffer
      ready.then(() => state.run === run && player.push(copy));
    },
  });
  const done = (async () => {
    await ready;
    try {
      await stream.done;
    } catch (error) {
      if (state.run === run) {
        state.run = null;
        $("stop").disabled = true;
      }
      throw error;
    }
    record.done_at = performance.now();
    record.samples = run.samples;
    if (play && state.run === run) {
      player.end();
      if (run.samples > 0) record.played = await playedOut;
      finish(run);
      $("stop").disabled = true;
    }
    record.words = wordRecords(run); // once played out: when each was heard
    records.streams.push(record);
    return record;
  })();
  done.catch(() => {}); // the caller's to handle; this only keeps the console quiet
  const handle = {
    append(text) {
      record.appends.push({ at: performance.now(), text });
      stream.append(text);
    },
    flush: () => stream.flush(),
    end() {
      if (record.ended_at === null) record.ended_at = performance.now();
      stream.end();
    },
    cancel() {
      stream.cancel();
      if (state.run === run) {
        state.run = null;
        player.stop();
        $("stop").disabled = true;
      }
    },
    done,
    record,
  };
  run.stream = handle;
  return handle;
}

// The waveform, the segment list and the words start over for a run that plays.
function showRun(run) {
  waveform.reset();
  $("segments").replaceChildren();
  $("words").replaceChildren();
  $("download").hidden = true;
  run.items = [];
  run.words = [];
  records.words = run.words;
}

// A word event (models with timestamp heads; the shape of every wire, docs/word-timestamps.md): a
// word begins (shown now, lit when it sounds), or ends. In samples of the run.
function showWord(run, event) {
  if (state.run !== run) return;
  if (event.type === "word") {
    const item = document.createElement("span");
    item.textContent = event.word;
    $("words").append(item, " ");
    run.words.push({
      word: event.word,
      index: event.index,
      start_sample: event.start_sample,
      end_sample: null,
      heard_at: null,
      lit_at: null,
      item,
    });
    return;
  }
  const word = run.words.find((w) => w.index === event.index && w.end_sample === null);
  if (word) word.end_sample = event.end_sample;
}

// The word whose first sample leaves the speakers now: lit, those before it said.
function lightWord(run, word) {
  if (state.run !== run) return;
  for (const other of run.words) {
    other.item.classList.toggle("sounding", other === word);
    other.item.classList.toggle("said", other !== word && other.lit_at !== null);
  }
  word.lit_at = performance.now();
}

// A run's words as the automation API reports them: {word, index, start_sample, end_sample,
// heard_at (its first sample left the speakers), lit_at (shown lit)}.
function wordRecords(run) {
  return (run.words || []).map(({ item, ...word }) => word);
}

// A segment whose audio begins: listed now, highlighted when it sounds.
function showSegment(run, segment) {
  const item = document.createElement("li");
  item.textContent = segment.text;
  if (segment.spoken && segment.spoken !== segment.text) {
    const spoken = document.createElement("span");
    spoken.className = "spoken-as";
    spoken.textContent = segment.spoken;
    item.append(" ", spoken);
  }
  $("segments").append(item);
  run.items.push(item);
  waveform.mark(segment.start_sample);
}

// The segment whose first sample leaves the speakers now.
function highlight(run, index) {
  if (state.run !== run) return;
  run.items.forEach((item, i) => {
    item.classList.toggle("sounding", i === index);
    item.classList.toggle("said", i < index);
  });
  run.record.segments[index].shown_at = performance.now();
}

player.on(AudioMessage.POSITION, ({ rendered, time }) => {
  const run = state.run;
  if (!run) return;
  const now = performance.now();
  const later = (at, work) => setTimeout(work, Math.max(0, at - now));
  later(player.toPerformanceTime(time), () => state.run === run && waveform.position(rendered));
  for (const word of run.words || []) {
    if (word.heard_at !== null || rendered < word.start_sample) continue;
    word.heard_at = player.heardAt(time - (rendered - word.start_sample) / run.sampleRate, word.start_sample);
    later(word.heard_at, () => lightWord(run, word));
  }
  if (!run.record) return;
  run.record.segments.forEach((segment, index) => {
    if (segment.heard_at !== null || rendered < segment.start_sample) return;
    segment.heard_at = player.heardAt(time - (rendered - segment.start_sample) / run.sampleRate, segment.start_sample);
    later(segment.heard_at, () => highlight(run, index));
  });
});

player.on(AudioMessage.FIRST_AUDIO, ({ time, sample }) => {
  const run = state.run;
  if (!run) return;
  if (run.record) {
    if (run.record.first_audio_at === null) run.record.first_audio_at = player.heardAt(time, sample);
    return;
  }
  if (run.ttfa !== null) return;
  run.ttfa = player.heardAt(time, sample) - run.t0;
  if (run.onFirstAudio) run.onFirstAudio();
});

player.on(AudioMessage.DRAINED, ({ rendered, audible, stalls, starved }) => {
  const run = state.run;
  for (const word of (run && run.words) || []) {
    word.item.classList.remove("sounding");
    word.item.classList.add("said");
  }
  if (run && run.record) {
    run.items.forEach((item) => {
      item.classList.remove("sounding");
      item.classList.add("said");
    });
    run.drained({ samples: rendered, audible, stalls, starved });
    return;
  }
  if (run && run.entry) run.entry.words = wordRecords(run);
  if (run && !state.controller) $("stop").disabled = true; // it has played out
  records.played.push({ samples: rendered, audible, stalls });
  if (stalls > 0) {
    status(
      `${$("status").textContent} Playback waited for audio ${stalls === 1 ? "once" : `${stalls} times`} ` +
        "(generation slower than real time).",
    );
  }
});

// "Speak as I type": one text stream while the box is being typed in. Words are sent as they are
// finished (a word ends with whitespace, so one being corrected is not sent yet), each sentence is
// spoken once it is complete, a pause in the typing says what is left (flush), and Finish (or
// switching the mode off) sends the rest and ends the stream. state.liveText is the text of the
// box up to where it has been sent (or was there before); text edited there is sent again from the
// first change.
function typed() {
  if (!$("live").checked) return;
  const text = $("text").value;
  let common = 0;
  while (common < state.liveText.length && text[common] === state.liveText[common]) common++;
  state.liveText = state.liveText.slice(0, common);
  const words = /^[\s\S]*\S\s+/.exec(text);
  sendTyped(text, words ? words[0].length : 0);
  clearTimeout(state.livePause);
  state.livePause = setTimeout(() => {
    sendTyped($("text").value, $("text").value.length);
    if (state.live) state.live.flush();
  }, TYPING_PAUSE_MS);
}

function sendTyped(text, end) {
  const from = state.liveText.length;
  if (end <= from) return;
  const piece = text.slice(from, end);
  state.liveText = text.slice(0, end);
  if (!state.live || state.run !== state.liveRun) {
    if (!piece.trim()) return;
    openLive();
  }
  state.live.append(piece);
}

function openLive() {
  const stream = textStream();
  state.live = stream;
  state.liveRun = state.run;
  $("finish").disabled = false;
  status("Speaking as you type…");
  stream.done.then(
    (record) => status(`Done: ${record.segments.length} segment${record.segments.length === 1 ? "" : "s"} spoken.`),
    (error) => {
      if (error.name !== "AbortError") status(error.message, true);
    },
  );
}

function finishLive() {
  clearTimeout(state.livePause);
  $("live").checked = false;
  $("finish").disabled = true;
  if (!state.live) return;
  sendTyped($("text").value, $("text").value.length);
  state.live.end();
  state.live = null;
}

$("generate").addEventListener("click", generate);
$("stop").addEventListener("click", () => {
  stop();
  state.liveText = $("text").value; // what was typed so far is not said after a Stop
  status("Stopped.");
});
$("finish").addEventListener("click", finishLive);
$("text").addEventListener("input", typed);
$("live").addEventListener("change", () => {
  if (!$("live").checked) return finishLive();
  state.liveText = $("text").value; // only what is typed from now on is spoken
  $("text").focus();
  status("Type: each sentence is spoken as soon as you finish it.");
});
$("speed").addEventListener("input", () => {
  $("speed-value").textContent = `${Number($("speed").value).toFixed(2)}×`;
});
function failed(error) {
  records.failed = error.message;
  status(error.message, true);
}

$("mode").addEventListener("change", () => {
  records.failed = null;
  useMode(mode()).catch(failed);
});
$("voice-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  status(`Preparing the voice ${file.name}…`);
  const start = performance.now();
  try {
    let partMs = 0;
    const id = await engines[mode()].uploadVoice(file, state.sampleRate, (progress) => {
      const share =
        progress.loaded < progress.total ? ` (${Math.round((100 * progress.loaded) / progress.total)}%)` : "";
      status(`${progress.stage}…${share}`);
      partMs = performance.now() - start; // the last progress: the part is ready
    });
    const ms = performance.now() - start;
    records.uploads.push({ mode: mode(), ms, part_ms: partMs });
    $("voice").append(new Option(`uploaded: ${file.name}`, id));
    $("voice").value = id;
    status(`Voice ${file.name} ready (${(ms / 1000).toFixed(1)} s).`);
  } catch (error) {
    status(error.message, true);
  }
});

// The site's description (site.json, written by the site builder, or the server's), or null where
// neither answers.
async function siteDescription() {
  try {
    const response = await fetch("site.json", { cache: "no-cache" });
    return response.ok ? await response.json() : null;
  } catch {
    return null;
  }
}

async function start() {
  // One file says which engines this page has: a static host's site.json (the in-browser engine),
  // or the server's (`server: true`, and the in-browser engine where it serves a built site).
  const site = await siteDescription();
  state.site = site && site.model ? site : null;
  if (state.site) engines.browser = await import("./browser/browser-engine.js");
  const select = $("mode");
  select.innerHTML = "";
  if (site && site.server) select.append(new Option("server", "server"));
  if (state.site) select.append(new Option("in this browser", "browser"));
  if (!select.options.length) {
    throw new Error(
      "no engine: this page found neither a server nor a built site (site.json, from pocket-tts-numpy build-site)",
    );
  }
  await useMode(select.value);
  records.ready = true;
}

expose(engines, textStream);
renderPanel();
start().catch(failed);
