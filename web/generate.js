// A Generate run: the engine asked for the text box's text, its audio played and drawn as it
// arrives, and once it has been heard, its record (pocketTTS.runs), the panel and the download link.

import { records } from "./automation.js";
import { engines, mode, pageOptions, wordsWanted } from "./controls.js";
import { runFailed } from "./failures.js";
import { $, state, status } from "./page-state.js";
import { offerDownload, player, showWaiting, stop, waveform } from "./playback.js";
import { Pace } from "./pace.js";
import { limitMessage, overLimit } from "./text-limit.js";
import { ms, renderPanel } from "./timing-panel.js";
import { showRun, showWord, wordRecords } from "./words.js";

export async function generate() {
  const text = $("text").value;
  if (!text.trim()) {
    status("Type something to say first.", true);
    return;
  }
  if (overLimit()) {
    status(limitMessage(), true);
    $("text").focus();
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
    pace: new Pace(text.length, pageOptions().speed, state.sampleRate),
    lead: 0, // samples the player waits for where its queue runs dry
    waiting: null, // the sample where it ran dry, while it waits
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
    words: wordsWanted(),
    onWord: (event) => showWord(run, event),
    onChunk: (chunk) => {
      if (run.ttfc === null) run.ttfc = performance.now() - run.t0;
      run.samples += chunk.length;
      if (state.run === run && records.current) records.current.samples = run.samples;
      run.chunks.push(chunk.slice());
      waveform.add(chunk);
      const lead = run.pace.lead(run.samples, performance.now());
      ready.then(() => {
        if (state.run !== run) return;
        player.push(chunk);
        if (lead === run.lead) return;
        player.lead((run.lead = lead));
        if (run.waiting !== null && run.end === null) showWaiting(run);
      });
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
    // What arrived stays, unless the player could not start: then there is nothing to play it.
    if (failed && state.run === run) runFailed(failed, playerFailure ? null : run);
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

// A run all received: its download link, and a Generate run's record once its first sample has
// been heard (a text stream's record is its own).
export function finish(run) {
  const audioMs = (1000 * run.samples) / run.sampleRate;
  offerDownload(run);
  if (run.record) return; // a text stream: its record is in pocketTTS.streams
  const record = () => {
    run.entry = {
      mode: run.mode,
      started_at_ms: run.t0,
      ttfc_ms: run.ttfc,
      ttfa_ms: run.ttfa,
      total_ms: run.end,
      audio_ms: audioMs,
      rtf: run.pace.rate, // seconds of making per second of audio (null: under a second made)
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
