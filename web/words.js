// The words and segments of the run playing: listed as they arrive, lit as each is heard (by the
// worklet's audio clock), and recorded for the automation API (pocketTTS.words, a run's words, a
// text stream's segments).

import "./audio-protocol.js";
import { records } from "./automation.js";
import { $, state } from "./page-state.js";
import { later, player, waveform } from "./playback.js";

const AudioMessage = globalThis.PocketAudioProtocol;

// Nothing of a run left on the page: its waveform, segments, words and download link.
export function clearRun() {
  waveform.reset();
  $("segments").replaceChildren();
  $("words").replaceChildren();
  $("download").hidden = true;
}

// The waveform, the segment list and the words start over for a run that plays.
export function showRun(run) {
  clearRun();
  run.items = [];
  run.words = [];
  records.words = run.words;
}

// A word event (models with timestamp heads; the shape of every wire, docs/word-timestamps.md): a
// word begins (shown now, lit when it sounds), or ends. In samples of the run.
export function showWord(run, event) {
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
export function wordRecords(run) {
  return (run.words || []).map(({ item, ...word }) => word);
}

// A segment whose audio begins: listed now, highlighted when it sounds.
export function showSegment(run, segment) {
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

// Played out: every word and segment said, and a Generate run's words recorded again, now with
// when each was heard.
player.on(AudioMessage.DRAINED, () => {
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
  } else if (run && run.entry) {
    run.entry.words = wordRecords(run);
  }
});
