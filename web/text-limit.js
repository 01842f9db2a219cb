// The text box against the engine's limit (its /health's max_text, or site.json's): a live count
// beside it, and the box marked invalid while it is over (a Generate then explains instead of
// sending it).

import { $, state } from "./page-state.js";

export const overLimit = () => state.maxText !== null && $("text").value.length > state.maxText;

export function countText() {
  const length = $("text").value.length;
  const count = $("count");
  count.textContent =
    state.maxText === null
      ? `${length.toLocaleString("en")} characters`
      : `${length.toLocaleString("en")} / ${state.maxText.toLocaleString("en")}`;
  count.classList.toggle("over", overLimit());
  $("text").setAttribute("aria-invalid", String(overLimit()));
}

export function limitMessage() {
  const length = $("text").value.length;
  return (
    `The text has ${length.toLocaleString("en")} characters; one generation takes at most ` +
    `${state.maxText.toLocaleString("en")}. Shorten it, or split it into several.`
  );
}
