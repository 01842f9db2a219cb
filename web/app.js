// The page: text, voice, Generate/Stop, playback as audio arrives, a download link, and the TTFA
// panel. Two engines with one contract (speak, uploadVoice): the server (POST /stream; its voices
// from GET /voices) and the browser (Pyodide in workers; its voices from the model's info at boot).
// Every finished run is appended to window.pocketTTS.runs as {mode, ttfc_ms, ttfa_ms, total_ms,
// audio_ms}, every run that played out to window.pocketTTS.played as {samples, audible, stalls}
// (samples the worklet rendered, how many not silent, how often playback waited for audio), and
// every voice upload to window.pocketTTS.uploads as {mode, ms} (until the voice was ready).
// Automation reads them (tests/test_web_ui.py, e2e/).

import * as browser from "./browser-engine.js";
import { Player, wavBlob } from "./player.js";
import "./protocol.js";
import * as server from "./server-engine.js";

const { audio: AudioMessage } = globalThis.PocketProtocol;

const $ = (id) => document.getElementById(id);
const player = new Player();
// sampleRate: of the engine in use (its /health, or the in-browser model's info).
const state = { controller: null, run: null, site: null, sampleRate: null };
window.pocketTTS = { runs: [], played: [], uploads: [], ready: false, load: null, collect };

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
  const runs = window.pocketTTS.runs;
  const rows = runs.slice(-10).reverse().map((r, i) =>
    `<tr><td>${runs.length - i}</td><td>${r.mode}</td><td>${ms(r.ttfc_ms)}</td><td>${ms(r.ttfa_ms)}</td>` +
    `<td>${ms(r.total_ms)}</td><td>${ms(r.audio_ms)}</td></tr>`);
  const modes = [...new Set(runs.map((r) => r.mode))];
  const medians = modes.map((mode) => {
    const mine = runs.filter((r) => r.mode === mode);
    return `<tr class="median"><td>median (${mine.length})</td><td>${mode}</td>` +
      ["ttfc_ms", "ttfa_ms", "total_ms", "audio_ms"].map((k) => `<td>${ms(median(mine.map((r) => r[k])))}</td>`).join("") +
      "</tr>";
  });
  $("runs").innerHTML = medians.join("") + rows.join("");
  const load = window.pocketTTS.load;
  $("load").textContent = load
    ? `In-browser model loaded in ${ms(load.total_ms)} ms (Pyodide ${ms(load.pyodide_ms)}, NumPy and core ` +
      `${ms(load.numpy_ms)}, model download ${ms(load.download_ms)} alongside, model ${ms(load.load_ms)}); ` +
      "the runs below are with it warm."
    : "";
}

const engines = { server, browser };
const mode = () => $("mode").value;

function fillVoices(list) {
  const select = $("voice");
  select.innerHTML = "";
  select.append(new Option(`default (${list.default})`, ""));
  for (const name of list.voices) select.append(new Option(name, name));
}

async function useMode(name) {
  $("generate").disabled = true;
  if (name === "server") {
    state.sampleRate = (await server.health()).sample_rate;
    fillVoices(await server.voices());
    $("generate").disabled = false;
    status("Ready (server).");
    return;
  }
  const start = performance.now();
  const { info, timings, workers } = await browser.boot(state.site, (progress) => {
    const share = progress.total ? ` (model ${Math.round((100 * progress.loaded) / progress.total)}%)` : "";
    status(`${progress.stage}…${share}`);
  });
  if (!window.pocketTTS.load) {
    window.pocketTTS.load = { ...timings, total_ms: performance.now() - start, workers, heap_bytes: info.heap_bytes };
  }
  state.sampleRate = info.sample_rate;
  fillVoices({ default: info.default_voice, voices: info.voices.filter((v) => v !== info.default_voice) });
  renderPanel();
  $("generate").disabled = false;
  const runs = workers === 2 ? "two workers" : "one worker";
  status(`Ready (in this browser: Python ${info.python}, NumPy ${info.numpy}, ${info.kernels}, ${runs}).`);
}

async function generate() {
  const text = $("text").value;
  if (!text.trim()) {
    status("Type something to say first.", true);
    return;
  }
  stop();
  const controller = new AbortController();
  const run = {
    mode: mode(), sampleRate: state.sampleRate, t0: performance.now(), ttfc: null, ttfa: null, end: null, chunks: [], samples: 0,
  };
  state.controller = controller;
  state.run = run;
  $("generate").disabled = true;
  $("stop").disabled = false;
  $("download").hidden = true;
  status("Generating…");
  try {
    await player.start(run.sampleRate);
    await engines[run.mode].speak({
      text,
      voice: $("voice").value,
      signal: controller.signal,
      onChunk: (chunk) => {
        if (run.ttfc === null) run.ttfc = performance.now() - run.t0;
        run.samples += chunk.length;
        run.chunks.push(chunk.slice());
        player.push(chunk);
      },
    });
    run.end = performance.now() - run.t0;
    player.end();
    finish(run);
  } catch (error) {
    if (error.name !== "AbortError") status(error.message, true);
  } finally {
    if (state.run === run) {
      $("generate").disabled = false;
      $("stop").disabled = true;
      state.controller = null;
    }
  }
}

function finish(run) {
  const audioMs = (1000 * run.samples) / run.sampleRate;
  $("download").href = URL.createObjectURL(wavBlob(run.chunks, run.sampleRate));
  $("download").hidden = false;
  const record = () => {
    window.pocketTTS.runs.push({
      mode: run.mode, ttfc_ms: run.ttfc, ttfa_ms: run.ttfa, total_ms: run.end, audio_ms: audioMs,
    });
    renderPanel();
    status(`Done: ${(audioMs / 1000).toFixed(2)} s of audio, first audio after ${ms(run.ttfa)} ms.`);
  };
  // The first audible sample may still be on its way to the speakers (a very short run).
  if (run.ttfa !== null || run.samples === 0) record();
  else run.onFirstAudio = record;
}

function stop() {
  if (state.controller) state.controller.abort();
  state.controller = null;
  state.run = null;
  player.stop();
  $("generate").disabled = false;
  $("stop").disabled = true;
}

// All the audio of one generation, without playing it (for automated comparisons).
async function collect({ mode: name, text, voice, options }) {
  const chunks = [];
  await engines[name].speak({ text, voice, options, signal: new AbortController().signal, onChunk: (c) => chunks.push(c) });
  return chunks.flatMap((c) => Array.from(c));
}

player.on(AudioMessage.FIRST_AUDIO, ({ time }) => {
  const run = state.run;
  if (!run || run.ttfa !== null) return;
  run.ttfa = player.toPerformanceTime(time) - run.t0;
  if (run.onFirstAudio) run.onFirstAudio();
});

player.on(AudioMessage.DRAINED, ({ rendered, audible, stalls }) => {
  window.pocketTTS.played.push({ samples: rendered, audible, stalls });
  if (stalls > 0) {
    status(`${$("status").textContent} Playback waited for audio ${stalls === 1 ? "once" : `${stalls} times`} ` +
      "(generation slower than real time).");
  }
});

$("generate").addEventListener("click", generate);
$("stop").addEventListener("click", () => {
  stop();
  status("Stopped.");
});
$("mode").addEventListener("change", () => useMode(mode()).catch((error) => status(error.message, true)));
$("voice-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  status(`Preparing the voice ${file.name}…`);
  const start = performance.now();
  try {
    const id = await engines[mode()].uploadVoice(file, state.sampleRate);
    const ms = performance.now() - start;
    window.pocketTTS.uploads.push({ mode: mode(), ms });
    $("voice").append(new Option(`uploaded: ${file.name}`, id));
    $("voice").value = id;
    status(`Voice ${file.name} ready (${(ms / 1000).toFixed(1)} s).`);
  } catch (error) {
    status(error.message, true);
  }
});

async function start() {
  const [hasServer, site] = await Promise.all([server.available(), browser.site()]);
  state.site = site;
  const select = $("mode");
  select.innerHTML = "";
  if (hasServer) select.append(new Option("server", "server"));
  if (site) select.append(new Option("in this browser", "browser"));
  if (!select.options.length) throw new Error("no engine: neither a server nor the in-browser site files answer");
  await useMode(select.value);
  window.pocketTTS.ready = true;
}

renderPanel();
start().catch((error) => status(error.message, true));
