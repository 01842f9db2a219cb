// Failures as the page shows them: a run's (its error, and nothing of it left as if it were a
// result), and the page's or its engine's (recorded in pocketTTS.failed for automation).

import { records } from "./automation.js";
import { status } from "./page-state.js";
import { stop } from "./playback.js";
import { clearRun } from "./words.js";

export function runFailed(error) {
  stop();
  clearRun();
  records.words = [];
  status(error.message, true);
}

export function pageFailed(error) {
  records.failed = error.message;
  status(error.message, true);
}
