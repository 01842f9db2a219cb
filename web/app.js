// The page: text, voice, Generate/Stop, playback as audio arrives, a download link, and the TTFA
// panel. Every finished run is appended to window.pocketTTS.runs as
// {mode, ttfc_ms, ttfa_ms, total_ms, audio_ms}, and every run that played out to
// window.pocketTTS.played as {samples, audible} (samples the worklet rendered, how many not
// silent). Automation reads both (tests/test_web_ui.py, e2e/).

import { Player, wavBlob } from "./player.js";
import * as server from "./server-engine.js";

const $ = (id) => document.getElementById(id);
const engines = { server };
const player = new Player(server.sampleRate);
const state = { controller: null, run: null };
window.pocketTTS = { runs: [], played: [], ready: false };

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
}

async function loadVoices() {
  const list = await server.voices();
  const select = $("voice");
  select.innerHTML = "";
  const add = (value, label) => select.append(new Option(label, value));
  add("", `default (${list.default})`);
  for (const name of list.voices) add(name, name);
}

async function generate() {
  const text = $("text").value;
  if (!text.trim()) {
    status("Type something to say first.", true);
    return;
  }
  stop();
  const mode = $("mode").value;
  const controller = new AbortController();
  const run = { mode, t0: performance.now(), ttfc: null, ttfa: null, end: null, chunks: [], samples: 0 };
  state.controller = controller;
  state.run = run;
  $("generate").disabled = true;
  $("stop").disabled = false;
  $("download").hidden = true;
  status("Generating…");
  try {
    await player.start();
    await engines[mode].speak({
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
  const audioMs = (1000 * run.samples) / server.sampleRate;
  const blob = wavBlob(run.chunks, server.sampleRate);
  $("download").href = URL.createObjectURL(blob);
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

player.on("first-audio", ({ time }) => {
  const run = state.run;
  if (!run || run.ttfa !== null) return;
  run.ttfa = player.toPerformanceTime(time) - run.t0;
  if (run.onFirstAudio) run.onFirstAudio();
});

player.on("drained", ({ rendered, audible }) => {
  window.pocketTTS.played.push({ samples: rendered, audible });
});

$("generate").addEventListener("click", generate);
$("stop").addEventListener("click", () => {
  stop();
  status("Stopped.");
});
$("voice-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  status(`Uploading ${file.name}…`);
  try {
    const id = await server.uploadVoice(file);
    $("voice").append(new Option(`uploaded: ${file.name}`, id));
    $("voice").value = id;
    status(`Voice ${file.name} ready.`);
  } catch (error) {
    status(error.message, true);
  }
});

loadVoices()
  .then(() => {
    window.pocketTTS.ready = true;
    status("Ready.");
  })
  .catch((error) => status(`Cannot reach the server: ${error.message}`, true));
renderPanel();
