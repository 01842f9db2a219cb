// The messages of the audio player, named once: every message is a plain object {type, ...fields},
// `type` one of the names below.
//
// The page (player.js) and the AudioWorklet processor (worklet.js):
//   page -> worklet
//     RESET    {}                            drop everything queued (Stop, or a new run)
//     CHUNK    {chunk}                       audio to queue: Float32Array, transferred
//     END      {}                            the run has no more audio
//     LEAD     {samples}                     where the queue runs dry before the end, wait until
//                                            this much is queued again before playing on (0: play
//                                            on at the next chunk); the page's pace.js sets it
//   worklet -> page
//     POSITION {rendered, time}              while playing, every few ms: the sample `rendered`
//                                            (of the run) plays at `time` (audio clock, s)
//     FIRST_AUDIO {time, sample}             the first non-zero sample is rendered (time: on the
//                                            audio clock, in seconds; sample: its index in the run)
//     STALLED  {rendered, lead}              the queue ran dry before the run's end: playback waits
//                                            until `lead` samples are queued (or the run ends)
//     DRAINED  {time, rendered, audible, stalls, starved}  an ended run has played out: samples
//                                            rendered, how many were not silent, how often the
//                                            queue ran dry before the end (each a gap the listener
//                                            heard) and the samples of silence those gaps lasted
//
// A classic script with no import or export, so that both kinds of module scope can load it with
// `import "./audio-protocol.js"`: the page's and the worklet's. It sets globalThis.PocketAudioProtocol
// (an AudioWorkletGlobalScope has no `self`).

"use strict";

globalThis.PocketAudioProtocol = Object.freeze({
  RESET: "reset",
  CHUNK: "chunk",
  END: "end",
  LEAD: "lead",
  STALLED: "stalled",
  FIRST_AUDIO: "first-audio",
  POSITION: "position",
  DRAINED: "drained",
});
