// The page's controls and the engines behind them: which engines the page has (site.json), the
// engine selected (booting the in-browser one, its voices, whether it can clone), the voice list
// and upload, and the options every generation takes from the page (speed, normalization).

import { records } from "./automation.js";
import { $, state, status } from "./page-state.js";
import { stop } from "./playback.js";
import * as server from "./server-engine.js";
import { countText } from "./text-limit.js";
import { renderPanel } from "./timing-panel.js";

// The in-browser engine's module is imported by start() where the site has a model.
export const engines = { server, browser: null };
export const mode = () => $("mode").value;

// The options of every generation, from the page's controls.
export function pageOptions() {
  const options = { speed: Number($("speed").value), normalize: $("normalize").checked };
  if ($("loudness").value) options.loudness = Number($("loudness").value);
  return options;
}

// Whether a generation asks for its words: where the model times them and the box is ticked.
export const wordsWanted = () => state.words && $("show-words").checked;

// The words control: off, with why and the models that have them, where the model has no heads.
function offerWords(model, timed) {
  const box = $("show-words");
  box.disabled = !state.words;
  box.checked = state.words;
  const why = $("words-why");
  why.hidden = state.words;
  why.textContent = state.words
    ? ""
    : `${model} cannot time its words: it has no timestamp heads. ` +
      (timed.length ? `Models that have them: ${timed.join(", ")}.` : "");
}

export function showSpeed() {
  $("speed-value").textContent = `${Number($("speed").value).toFixed(2)}×`;
}

function fillVoices(list) {
  const select = $("voice");
  select.innerHTML = "";
  state.voiceless = !list.default;
  select.append(new Option(state.voiceless ? "none yet: upload a voice" : `default (${list.default})`, ""));
  for (const name of list.voices) select.append(new Option(name, name));
  for (const voice of list.uploaded || []) select.append(uploadedOption(voice.id, voice.name));
  offerDelete();
}

function uploadedOption(id, name) {
  const option = new Option(`uploaded: ${name}`, id);
  option.dataset.uploaded = name;
  return option;
}

// Delete is offered for an upload the server keeps (the in-browser engine keeps none).
export function offerDelete() {
  const chosen = $("voice").selectedOptions[0];
  $("delete-voice").hidden = !(mode() === "server" && chosen && chosen.dataset.uploaded);
}

export async function deleteVoice() {
  const chosen = $("voice").selectedOptions[0];
  if (!chosen || !chosen.dataset.uploaded) return;
  const name = chosen.dataset.uploaded;
  if (!window.confirm(`Delete the voice ${name} from the server? It cannot be used again unless uploaded again.`)) {
    return;
  }
  try {
    await engines.server.deleteVoice(chosen.value);
  } catch (error) {
    status(error.message, true);
    return;
  }
  chosen.remove();
  $("voice").value = "";
  offerDelete();
  status(`Voice ${name} deleted.`);
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

export async function useMode(name) {
  stop();
  $("generate").disabled = true;
  if (name === "server") {
    const health = await server.health();
    state.sampleRate = health.sample_rate;
    state.words = Boolean(health.word_timestamps);
    state.maxText = health.max_text;
    offerWords(health.model, health.timed_models);
    countText();
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
  state.maxText = state.site.model.max_text;
  offerWords(state.site.model.name, state.site.model.timed_models);
  countText();
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

export async function uploadVoice(event) {
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
    if (![...$("voice").options].some((option) => option.value === id)) {
      $("voice").append(uploadedOption(id, file.name));
    }
    $("voice").value = id;
    offerDelete();
    status(`Voice ${file.name} ready (${(ms / 1000).toFixed(1)} s).`);
  } catch (error) {
    status(error.message, true);
  }
}

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

export async function start() {
  // One file says which engines this page has: a static host's site.json (the in-browser engine),
  // or the server's (`server: true`, and the in-browser engine where it serves a built site).
  const site = await siteDescription();
  state.site = site && site.model ? site : null;
  if (state.site) engines.browser = await import("./browser/browser-engine.js");
  const select = $("mode");
  select.innerHTML = "";
  if (site && site.server) select.append(new Option(`${(await server.health()).model}, on the server`, "server"));
  if (state.site) select.append(new Option(`${state.site.model.name}, in this browser`, "browser"));
  if (!select.options.length) {
    throw new Error(
      "no engine: this page found neither a server nor a built site (site.json, from pocket-tts-numpy build-site)",
    );
  }
  await useMode(select.value);
  records.ready = true;
}
