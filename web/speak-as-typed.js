// "Speak as I type": the text box spoken as it is typed in, as one text stream.

import { $, state, status } from "./page-state.js";
import { textStream } from "./text-stream.js";

// After this long without typing, "speak as I type" says what it holds (an unfinished sentence).
const TYPING_PAUSE_MS = 1500;

// "Speak as I type": one text stream while the box is being typed in. Words are sent as they are
// finished (a word ends with whitespace, so one being corrected is not sent yet), each sentence is
// spoken once it is complete, a pause in the typing says what is left (flush), and Finish (or
// switching the mode off) sends the rest and ends the stream. state.liveText is the text of the
// box up to where it has been sent (or was there before); text edited there is sent again from the
// first change.
export function typed() {
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

export function finishLive() {
  clearTimeout(state.livePause);
  $("live").checked = false;
  $("finish").disabled = true;
  if (!state.live) return;
  sendTyped($("text").value, $("text").value.length);
  state.live.end();
  state.live = null;
}

// The "Speak as I type" box ticked: only what is typed from now on is spoken; unticked: the rest.
export function switchLive() {
  if (!$("live").checked) return finishLive();
  state.liveText = $("text").value;
  $("text").focus();
  status("Type: each sentence is spoken as soon as you finish it.");
}

// After a Stop, what was typed so far is not said.
export function stopLive() {
  state.liveText = $("text").value;
}
