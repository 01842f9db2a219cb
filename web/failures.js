// Failures as the page shows them: a run's (its error; the audio that had arrived stays, playing
// out, drawn and downloadable, and nothing of a run that had none) and the page's or its engine's
// (recorded in pocketTTS.failed for automation).

import { records } from "./automation.js";
import { status } from "./page-state.js";
import { offerDownload, player, stop } from "./playback.js";
import { clearRun } from "./words.js";

export function runFailed(error, run) {
  if (run && run.samples > 0) {
    run.end = performance.now() - run.t0; // Stop stays while what arrived plays out
    player.end();
    offerDownload(run);
    const seconds = (run.samples / run.sampleRate).toFixed(1);
    status(`${error.message} The ${seconds} s of audio that arrived play out and can be downloaded.`, true);
    return;
  }
  stop();
  clearRun();
  records.words = [];
  status(error.message, true);
}

// A run the user stopped: what had arrived stays downloadable.
export function runStopped(run) {
  stop();
  if (run && !run.record && run.samples > 0) offerDownload(run);
}

export function pageFailed(error) {
  records.failed = error.message;
  status(error.message, true);
}
