"""A generation as a state machine that makes one frame per step, so that many can step together.

It follows the official `TTSModel.generate_audio_stream`: the text is split into chunks (and
pauses); each chunk starts from the voice state, reads its text, then generates one latent per
80 ms frame until the EOS rule (or its length cap) ends it. `TTSModel.frames` steps one generation
alone; the server's scheduler steps all running generations together with `advance`, so that
their flow-LM steps share one pass through the transformer (its weights read once for all). A
newcomer's text is read in the same pass as its first frame.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import flow_lm, nn, transformer
from .text import prepare_text_prompt
from .voice import VoiceState

MIN_FRAMES_BEFORE_EOS = 6  # EOS is ignored before this frame: some voices cross the threshold early


class Frame(NamedTuple):
    """One step of the stream: a generated latent, or a stretch of silence (a pause)."""

    latent: Optional[np.ndarray]  # [latent_dim], denormalised; None for silence
    silence: int  # samples of silence when latent is None
    first: bool  # first frame of a text chunk: decoded by a fresh decoder, faded in


class Generation:
    """One generation's progress: what is left of its text and pauses, and the flow-LM state of the
    text chunk it is in. `budget` counts the frames left (None: each chunk's own length cap)."""

    def __init__(
        self,
        model: Any,
        plan: Sequence[Union[List[str], float]],
        voice: VoiceState,
        eos_threshold: float,
        frames_after_eos: Optional[int],
        budget: Optional[int],
        noise: Callable[[], np.ndarray],
        times: List[np.ndarray],
    ):
        self.model = model
        # The plan flattened: ("pause", seconds) and ("text", chunk) in order.
        self.items: List[Tuple[str, Any]] = [
            item
            for part in plan
            for item in ([("pause", part)] if isinstance(part, float) else [("text", c) for c in part])
        ]
        self.voice = voice
        self.eos_threshold = eos_threshold
        self.frames_after_eos = frames_after_eos
        self.budget = budget
        self.noise = noise
        self.times = times
        self.done = False
        self._next = 0  # index of the next plan item
        self._silence = 0  # samples of silence left in the current pause
        self._state: Optional[transformer.TransformerState] = None  # the current chunk's; None between chunks
        self._prompt: Optional[np.ndarray] = None  # text rows the next step reads first
        self._latent: Optional[np.ndarray] = None  # the previous frame's latent (normalised); None: BOS
        self._step = 0
        self._eos_step: Optional[int] = None
        self._after = 0
        self._length = 0

    def silence(self) -> Optional[Frame]:
        """The next frame if it is (part of) a pause, which needs no model work; None when the next
        frame needs a flow-LM step, or the generation is done."""
        self._prepare()
        if self._silence == 0:
            return None
        samples = min(self.model.frame_size, self._silence)
        self._silence -= samples
        return Frame(None, samples, False)

    def _prepare(self) -> None:
        """Move on to the next pause or text chunk when the current one is over."""
        while not self.done and self._silence == 0 and self._state is None:
            if self._next == len(self.items):
                self.done = True
                return
            kind, value = self.items[self._next]
            self._next += 1
            if kind == "pause":
                self._silence = int(round(value * self.model.sample_rate))
            elif self.budget == 0:
                self.done = True
            else:
                self._start(value)

    def _start(self, chunk: str) -> None:
        model = self.model
        prepared, guess = prepare_text_prompt(chunk, model.text_options)
        tokens = model.tokenizer.encode(prepared)
        self._length = model.estimate_max_frames(len(tokens)) if self.budget is None else self.budget
        self._after = self.frames_after_eos if self.frames_after_eos is not None else guess + 2
        state = self.voice.transformer.copy()
        transformer.reserve(state, state.offset + len(tokens) + self._length)
        self._state = state
        self._prompt = flow_lm.text_embeddings(model.params["flow_lm"], tokens)
        self._latent = None
        self._step = 0
        self._eos_step = None

    def _take(self, latent: np.ndarray, eos_logit: float) -> Optional[Frame]:
        """The result of this generation's flow-LM step -> its frame, or None where the EOS rule
        ended the text chunk at this step (the latent is then dropped)."""
        step = self._step
        self._step += 1
        if eos_logit > self.eos_threshold and self._eos_step is None and step >= MIN_FRAMES_BEFORE_EOS:
            self._eos_step = step
        if self._eos_step is not None and step >= self._eos_step + self._after:
            self._state = None
            return None
        self._latent = latent
        if self.budget is not None:
            self.budget -= 1
        if self._step == self._length:
            self._state = None
        p = self.model.params["flow_lm"]
        # Back from the normalised latent space, which the flow LM reads its own output in.
        return Frame(latent * p["emb_std"] + p["emb_mean"], 0, step == 0)


def advance(model: Any, generations: Sequence[Generation]) -> List[Optional[Frame]]:
    """One step of every generation: its next frame, or None where it just ended a text chunk or is
    done. Pauses need no model work; all the others take one flow-LM step together (one pass
    through the transformer; the flow head once per number of decode steps in use)."""
    frames: List[Optional[Frame]] = [None] * len(generations)
    stepping = []
    for i, generation in enumerate(generations):
        frames[i] = generation.silence()
        if frames[i] is None and not generation.done:
            stepping.append(i)
    if not stepping:
        return frames
    spec, p = model.flow_spec, model.params["flow_lm"]
    batch = [generations[i] for i in stepping]
    z = flow_lm.backbone(spec, p, [g._state for g in batch], [g._prompt for g in batch], [g._latent for g in batch])
    for generation in batch:
        generation._prompt = None
    eos_logits = nn.linear(p["out_eos"], z)[:, 0]  # [B]
    noise = np.stack([generation.noise() for generation in batch])  # [B, latent_dim]
    latents = np.empty_like(noise)
    for times in {id(g.times): g.times for g in batch}.values():
        rows = [j for j, g in enumerate(batch) if g.times is times]
        latents[rows] = flow_lm.flow_head(spec, p["flow_net"], z[rows], noise[rows], times)
    for j, i in enumerate(stepping):
        frames[i] = batch[j]._take(latents[j], float(eos_logits[j]))
    return frames
