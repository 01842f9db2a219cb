// Text streams, for automation (pocketTTS.textStream) and "speak as I type": played, drawn and
// recorded (pocketTTS.streams), or only collected.

import { records } from "./automation.js";
import { engines, mode, pageOptions, wordsWanted } from "./controls.js";
import { finish } from "./generate.js";
import { $, state } from "./page-state.js";
import { player, stop, waveform } from "./playback.js";
import { showRun, showSegment, showWord, wordRecords } from "./words.js";

// A text stream: text arriving in pieces (an LLM's reply, a user typing), spoken segment by segment
// as each is complete, with the same calls in both modes (the server's WebSocket, or the workers):
//   const s = pocketTTS.textStream({mode, voice, options, play, onSegment, onChunk});   // all optional
//   s.append("Hello wor"); s.append("ld. How are"); s.flush(); s.end(); await s.done;  // or s.cancel()
// mode: the page's engine by default (another must have been selected once: the browser's boots
// then); voice: the page's; options (any generation option: speed, normalize, seed, ...) on top of
// the page's controls (speed, normalize).
// With play (the default) the page plays it, draws it and shows the segment sounding; without, it
// only collects. onSegment({text, spoken, start_sample}) before each segment's first audio;
// onChunk(Float32Array) for each piece of audio. `done` resolves, once everything has been received
// (and played out, with play), with the stream's record, also appended to pocketTTS.streams:
// {mode, sample_rate, opened_at, appends: [{at, text}], segments: [{text, spoken, start_sample,
// received_at, heard_at, shown_at}], first_audio_at, ended_at, done_at, samples, played} where `*_at` are
// performance.now() times: when each piece was appended, when each segment's first audio arrived,
// left the speakers (audio clock) and was highlighted, when the first audible sample left the
// speakers, when end() was called and when the last audio arrived; played: {samples, audible,
// stalls, starved} from the worklet (stalls: the gaps where playback waited for audio; starved:
// the samples of silence they lasted). cancel() stops at once (barge-in); `done` then rejects
// with an AbortError, as it rejects with the engine's error. Playing needs a user gesture on the
// page before (browsers keep audio off until one).
export function textStream({
  mode: name = mode(),
  voice = $("voice").value,
  options,
  play = true,
  onSegment,
  onChunk,
} = {}) {
  const record = {
    mode: name,
    sample_rate: state.sampleRate,
    opened_at: performance.now(),
    appends: [],
    segments: [],
    first_audio_at: null,
    ended_at: null,
    done_at: null,
    samples: 0,
    played: null,
  };
  const run = { mode: name, sampleRate: state.sampleRate, record, chunks: [], samples: 0, stream: null, drained: null };
  const playedOut = new Promise((resolve) => {
    run.drained = resolve; // by the worklet's DRAINED: {samples, audible, stalls, starved}
  });
  if (play) {
    stop();
    state.run = run;
    showRun(run);
    $("stop").disabled = false;
  }
  // Audio may come before the AudioContext has resumed: it is queued behind that.
  const ready = play ? player.start(run.sampleRate) : Promise.resolve();
  const stream = engines[name].textStream({
    voice,
    options: { ...pageOptions(), ...options },
    words: wordsWanted(),
    onWord: (event) => {
      if (play) showWord(run, event);
    },
    onSegment: (event) => {
      const segment = { ...event, received_at: performance.now(), heard_at: null, shown_at: null };
      record.segments.push(segment);
      if (play) showSegment(run, segment);
      if (onSegment) onSegment(event);
    },
    onChunk: (chunk) => {
      run.samples += chunk.length;
      if (onChunk) onChunk(chunk);
      if (!play) return;
      run.chunks.push(chunk.slice());
      waveform.add(chunk);
      const copy = chunk.slice(); // the player takes its buffer
      ready.then(() => state.run === run && player.push(copy));
    },
  });
  const done = (async () => {
    await ready;
    try {
      await stream.done;
    } catch (error) {
      if (state.run === run) {
        state.run = null;
        $("stop").disabled = true;
      }
      throw error;
    }
    record.done_at = performance.now();
    record.samples = run.samples;
    if (play && state.run === run) {
      player.end();
      if (run.samples > 0) record.played = await playedOut;
      finish(run);
      $("stop").disabled = true;
    }
    record.words = wordRecords(run); // once played out: when each was heard
    records.streams.push(record);
    return record;
  })();
  done.catch(() => {}); // the caller's to handle; this only keeps the console quiet
  const handle = {
    append(text) {
      record.appends.push({ at: performance.now(), text });
      stream.append(text);
    },
    flush: () => stream.flush(),
    end() {
      if (record.ended_at === null) record.ended_at = performance.now();
      stream.end();
    },
    cancel() {
      stream.cancel();
      if (state.run === run) {
        state.run = null;
        player.stop();
        $("stop").disabled = true;
      }
    },
    done,
    record,
  };
  run.stream = handle;
  return handle;
}
