// The messages of the in-browser engine, named once. Every message is a plain object
// {type, ...fields}; `type` is one of the names below. Two channels:
//
// engine: the page (browser/browser-engine.js) and an engine worker (browser/worker.js). A worker has a
// role given at boot: "flow" (text -> latent frames, voice cloning), "decoder" (frames -> audio) or
// "both". Requests carry an `id` the page chose; the replies to it carry the same `id`.
//   page -> worker
//     BOOT     {site, role, cached, port?,   site: site.json; cached: a service worker already keeps
//               kernels?}                    what the worker fetches; port: (decoder) the MessagePort
//                                            the frames come through, transferred; kernels: "simd"
//                                            forces the WebAssembly SIMD build (else relaxed SIMD
//                                            where the browser validates it)
//     SPEAK    {id, text, voice, options,    (flow, both) voice: "" for the default; words: time
//               words}                       the words (WORD messages; models with timestamp heads)
//     STREAM   {id, voice, options, words}   (flow, both) a text stream: its text comes in pieces
//     TEXT     {id, text}                    (flow, both) a piece of stream `id` (any split)
//     FLUSH    {id}                          (flow, both) say the text buffered now
//     END      {id}                          (flow, both) no more text: say the rest, then DONE
//     NORMALIZE {id, text}                   (flow, both) what normalization makes of `text`
//     VOICE    {id, samples, sampleRate}     (flow, both) a recording to clone (Float32Array, mono,
//                                            transferred)
//     HANDOVER {port}                        (both) from the next request on, send the frames to the
//                                            decoder worker on `port` (transferred), as "flow" does
//     STOP     {id}                          (all) drop request `id`: nothing more comes for it
//                                            (a text stream's cancel)
//     CHECK    {id}                          (all) the kernels against NumPy (browser/kernel_check.py)
//     HEAP     {id}                          (all) the size of the WebAssembly heap
//     MODULES  {id}                          (all) how the modules compiled ahead of time served
//   worker -> page
//     PROGRESS {stage, loaded, total}        while booting (model bytes received of total)
//     PROGRESS {id, stage, loaded, total}    (flow, both) the first VOICE `id` fetches and loads the
//                                            voice-cloning part first (bytes of total); the last
//                                            one ("Cloning the voice") says the part is ready
//     READY    {info, timings}               booted: the model's info, and how long each stage took
//     SEGMENT  {id, text, spoken, start_sample}  (decoder, both) a generation's first audio is the
//                                            next CHUNK: its text (a segment of a stream, or the
//                                            whole text), the text it is read as (normalized), and
//                                            the samples of the request sent before it
//     CHUNK    {id, chunk}                   (decoder, both) audio: Float32Array, transferred
//     WORD     {id, word, index,             (decoder, both) a word begins, before the audio that
//               start_sample}                starts it
//     WORD_END {id, word, index,             (decoder, both) a word ends: both in samples of the
//               start_sample, end_sample}    request. The two are the word events of every wire
//                                            (docs/word-timestamps.md), with the request's `id`
//     DONE     {id}                          (decoder, both) the last chunk of `id` has been sent
//     VOICE    {id, voice}                   (flow, both) the cloned voice's name, for SPEAK
//     NORMALIZE {id, text}                   (flow, both) the normalized text
//     CHECK    {id, report}                  the kernel check's report
//     HEAP     {id, bytes}                   the heap's size (it only grows: the peak so far)
//     MODULES  {id, report}                  {shipped: .pyc files written at boot, used: modules
//                                            run from one, stale: from source (browser/site/compiled.py)}
//     ERROR    {id, message}                 any failure; no `id` when booting failed. The page
//                                            never waits on a silent worker.
//
// frames: the flow worker -> the decoder worker, through the MessagePort of BOOT and HANDOVER (two
// workers).
//     SEGMENT  {id, text, spoken, speed}     a generation of request `id` begins: its frames
//                                            follow (a new decoder at `speed`)
//     FRAME    {id, numbers, latent, scores,  one frame of request `id` (browser/engine.py
//               silence, first, end, units?} next_frame): `numbers` a Float32Array, transferred:
//                                            its `latent` floats (0 for silence and the END), then
//                                            its `scores` word scores (where its words are timed;
//                                            a chunk's first frame adds `units`, its words)
//     END      {id}                          request `id` has no more frames
//
// A classic script with no import or export, so that both kinds of scope can load it: the classic
// workers with importScripts("protocol.js"), the page's module with `import "./protocol.js"`. It
// sets globalThis.PocketProtocol.

"use strict";

globalThis.PocketProtocol = Object.freeze({
  engine: Object.freeze({
    BOOT: "boot",
    SPEAK: "speak",
    STREAM: "stream",
    TEXT: "text",
    FLUSH: "flush",
    END: "end",
    NORMALIZE: "normalize",
    VOICE: "voice",
    HANDOVER: "handover",
    STOP: "stop",
    CHECK: "check",
    HEAP: "heap",
    MODULES: "modules",
    PROGRESS: "progress",
    READY: "ready",
    SEGMENT: "segment",
    CHUNK: "chunk",
    WORD: "word",
    WORD_END: "word_end",
    DONE: "done",
    ERROR: "error",
  }),
  frames: Object.freeze({
    SEGMENT: "segment",
    FRAME: "frame",
    END: "end",
  }),
});
