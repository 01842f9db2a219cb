// What the page's modules share: its elements, its status line, and the state of the engine in use,
// of the run playing and of the "speak as I type" stream.

export const $ = (id) => document.getElementById(id);

// sampleRate: of the engine in use (its /health, or the in-browser model's info). run: what the
// player plays (a Generate run or a text stream); live: the "speak as I type" stream.
export const state = {
  controller: null,
  run: null,
  site: null,
  sampleRate: null,
  live: null,
  liveRun: null,
  liveText: "",
  livePause: null,
  words: false, // whether the engine's model times words (timestamp heads)
  maxText: null, // characters a generation may take, once the engine says
};

export function status(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}
