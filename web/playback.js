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
    status(
      `${$("status").textContent} Playback waited for audio ${stalls === 1 ? "once" : `${stalls} times`} ` +
        "(generation slower than real time).",
      $("status").classList.contains("error"),
    );
  }
});
