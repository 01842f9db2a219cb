// The "How fast" panel: the last runs' TTFC, TTFA, total and speech length with each engine's
// medians, and how the in-browser model loaded.

import { records } from "./automation.js";
import { $ } from "./page-state.js";

function median(values) {
  const sorted = values.filter((v) => v !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function ms(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value)}`;
}

export function renderPanel() {
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
