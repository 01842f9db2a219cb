// The page's entry: its modules wired to its controls, the automation API exposed, and the engines
// started. Text, voice, speed, normalization, Generate/Stop, "speak as I type", playback as audio
// arrives with its waveform and the words and segment sounding, a download link, and the TTFA
// panel. Two engines with one contract (speak, textStream, uploadVoice): the server (POST /stream
// and the WebSocket /v1/audio/speech/stream; its voices from GET /voices) and the browser (Pyodide
// in workers, browser/browser-engine.js, loaded only where site.json says the site has a model; its
// voices from the model's info at boot). What the page records of its runs, and the calls
// automation drives it with, are window.pocketTTS (automation.js).
//
//   controls.js        the engines, the engine selected, its voices and upload, the page's options
//   generate.js        a Generate run
//   text-stream.js     text streams;  speak-as-typed.js: the text box spoken as it is typed in
//   playback.js        the player, the waveform, Stop
//   words.js           the words and segments lit as they are heard
//   timing-panel.js    the "How fast" panel
//   text-limit.js      the text box's count against the engine's limit
//   pace.js            a run's making against its playing: the wait where it falls behind
//   failures.js        failures, shown and recorded
//   page-state.js      what they share: the elements, the status line, the state

import { expose, records } from "./automation.js";
import { deleteVoice, engines, mode, offerDelete, showSpeed, start, uploadVoice, useMode } from "./controls.js";
import { pageFailed, runStopped } from "./failures.js";
import { generate } from "./generate.js";
import { $, state, status } from "./page-state.js";
import { finishLive, stopLive, switchLive, typed } from "./speak-as-typed.js";
import { textStream } from "./text-stream.js";
import { countText } from "./text-limit.js";
import { renderPanel } from "./timing-panel.js";

$("generate").addEventListener("click", generate);
$("stop").addEventListener("click", () => {
  runStopped(state.run);
  stopLive();
  status("Stopped.");
});
$("finish").addEventListener("click", finishLive);
$("text").addEventListener("input", (event) => {
  countText();
  typed(event);
});
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !$("generate").disabled) {
    event.preventDefault();
    generate();
  }
});
$("live").addEventListener("change", switchLive);
$("speed").addEventListener("input", showSpeed);
$("mode").addEventListener("change", () => {
  records.failed = null;
  useMode(mode()).catch(pageFailed);
});
$("voice-file").addEventListener("change", uploadVoice);
$("voice").addEventListener("change", offerDelete);
$("delete-voice").addEventListener("click", deleteVoice);

expose(engines, textStream);
renderPanel();
countText();
start().catch(pageFailed);
