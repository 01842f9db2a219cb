// Playback: the player and the waveform of the run playing, Stop, and what the player tells of a
// run: when its first sample was heard (TTFA), where playback is, and that it has played out.

import "./audio-protocol.js";
import { records } from "./automation.js";
import { $, state, status } from "./page-state.js";
import { createPlayer, wavBlob } from "./player.js";
import { Waveform } from "./waveform.js";

const AudioMessage = globalThis.PocketAudioProtocol;

export const player = createPlayer();
export const waveform = new Waveform($("wave"));

export function stop() {
  records.current = null;
  if (state.controller) state.controller.abort();
  if (state.run && state.run.stream) state.run.stream.cancel();
  state.controller = null;
  state.run = null;
  state.live = null;
  clearTimeout(state.livePause);
  player.stop();
  $("generate").disabled = false;
  $("stop").disabled = true;
  $("finish").disabled = true;
}

// A run's audio so far as a WAV behind the download link (a run received whole, or what arrived
// of one that failed or was stopped).
export function offerDownload(run) {
  $("download").href = URL.createObjectURL(wavBlob(run.chunks, run.sampleRate));
  $("download").hidden = false;
}

// Calls `work` at the performance.now() time `at` (at once where that has passed).
export function later(at, work) {
  setTimeout(work, Math.max(0, at - performance.now()));
}

player.on(AudioMessage.POSITION, ({ rendered, time }) => {
  const run = state.run;
  if (run && run.waiting !== null && run.waiting !== undefined && rendered > run.waiting) run.waiting = null;
  if (run) later(player.toPerformanceTime(time), () => state.run === run && waveform.position(rendered));
});

player.on(AudioMessage.FIRST_AUDIO, ({ time, sample }) => {
  const run = state.run;
  if (!run) return;
  if (run.record) {
    if (run.record.first_audio_at === null) run.record.first_audio_at = player.heardAt(time, sample);
    return;
  }
  if (run.ttfa !== null) return;
  run.ttfa = player.heardAt(time, sample) - run.t0;
  if (run.onFirstAudio) run.onFirstAudio();
});

player.on(AudioMessage.DRAINED, ({ rendered, audible, stalls, starved }) => {
  const run = state.run;
  if (run && run.record) {
    run.drained({ samples: rendered, audible, stalls, starved });
    return;
  }
  if (run && !state.controller) $("stop").disabled = true; // it has played out
  records.played.push({ samples: rendered, audible, stalls });
  if (stalls > 0) {
    // Said after what the status says (an error stays one: the audio of a failed run played out).
    const rate = run && run.pace && run.pace.rate > 1 ? ` (${slowness(run.pace.rate)})` : "";
    status(
      `${$("status").textContent} Playback waited for audio ${stalls === 1 ? "once" : `${stalls} times`}${rate}.`,
      $("status").classList.contains("error"),
    );
  }
});

// How much slower than real time the engine makes a run's audio.
const slowness = (rate) => `each second of audio takes ${rate.toFixed(1)} s to make here`;

// The queue ran dry before a Generate run's end: the player waits for the run's lead (pace.js), and
// the page says so, why, and what would keep up, again as the lead grows while it waits.
player.on(AudioMessage.STALLED, ({ rendered }) => {
  const run = state.run;
  if (!run || run.record || !run.pace || run.end !== null) return;
  run.waiting = rendered;
  showWaiting(run);
});

export function showWaiting(run) {
  const ahead = (run.lead / run.sampleRate).toFixed(1);
  if (!(run.pace.rate > 1)) {
    status(`Waiting for audio: it came late, so it plays on once ${ahead} s are ready.`);
    return;
  }
  // In this browser, what would keep up: the server where the page has one, else a smaller model.
  const server = $("mode").querySelector("option[value=server]");
  const advice =
    run.mode !== "browser"
      ? ""
      : server
        ? " The server keeps up: choose it under Model."
        : " A site built with a smaller model (english_2m_2026-10) keeps up on slower devices.";
  status(
    `Waiting for audio: ${slowness(run.pace.rate)}, so it plays on once ${ahead} s are ready, without a ` +
      `break after that.${advice}`,
  );
}
