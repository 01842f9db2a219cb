"""A generation as a state machine that makes one frame per step, so that many can step together.

It follows the official `TTSModel.generate_audio_stream`: the text is split into chunks (and
pauses); each chunk starts from the voice state, reads its text, then generates one latent per
80 ms frame until the EOS rule (or its length cap) ends it. `TTSModel.frames` steps one generation
alone; the server's scheduler steps all running generations together with `advance`, so that
their flow-LM steps share one pass through the transformer (its weights read once for all). A
newcomer's text is read in the same pass as its first frame.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from ..network import flow_lm, ops, transformer
from ..text.words import ChunkWords
from ..voices.state import VoiceState
from . import timestamps
from .budget import Budget

MIN_FRAMES_BEFORE_EOS = 6  # EOS is ignored before this frame: some voices cross the threshold early


class Chunk(NamedTuple):
    """A text chunk as the flow LM reads it."""

    tokens: List[int]  # of the prepared chunk
    estimate: int  # the official length cap of the chunk, in frames
    frames_after_eos_guess: int  # the official guess from its words (3 for up to four words, else 1)
    words: Optional[ChunkWords] = None  # its units, for word timestamps


# A generation's plan: text chunks and pauses (samples of silence), in order.
Plan = List[Union[Chunk, int]]


def word_count(plan: Plan) -> int:
    """How many of the user's words a plan's chunks time."""
    return len(
        {user.index for item in plan if isinstance(item, Chunk) and item.words for user in item.words.users.values()}
    )


def planned_frames(plan: Plan, frame_size: int) -> Tuple[int, int]:
    """The most frames a plan can make (every chunk's length cap, and its pauses), and how many of
    them are pauses, which it makes whatever the model does."""
    silent = sum(-(-item // frame_size) for item in plan if not isinstance(item, Chunk))
    return silent + sum(item.estimate for item in plan if isinstance(item, Chunk)), silent


class StepModel(Protocol):
    """What a generation reads of its model (TTSModel is one): the flow LM, the frame size, and the
    backend its steps run on (its runtime's: core.portable.model.Runtime)."""

    flow_spec: flow_lm.FlowLMSpec
    params: Dict[str, Any]  # the checkpoint's tensors by part; the flow LM's under "flow_lm"
    runtime: Any

    @property
    def frame_size(self) -> int: ...


class Frame(NamedTuple):
    """One step of the stream: a generated latent, a stretch of silence (a pause), or the end."""

    latent: Optional[np.ndarray]  # [latent_dim], denormalised; None for silence and the end
    silence: int  # samples of silence when latent is None
    first: bool  # first frame of a text chunk: decoded by a fresh decoder, faded in
    # The generation's last step, which makes nothing: its decoder gives out what it still holds.
    end: bool = False
    # Word timestamps: the chunk's units, and this frame's score of each (core.portable.synthesis.timestamps).
    words: Optional[ChunkWords] = None
    scores: Optional[np.ndarray] = None


END = Frame(None, 0, False, True)


class Generation:
    """One generation's progress: what is left of its plan, and the flow-LM state of the text chunk
    it is in. It makes at most `frames` frames (its own cap: max_frames, or what its plan can make),
    silent ones included, each drawn from its session's `budget` (shared by the generations of a
    text stream): it ends when either runs out. With `fixed_length` (the caller's max_frames), a
    chunk may use all that is left, as the official max_frames replaces its length estimate;
    otherwise each chunk keeps to its own. Its last step is the END frame."""

    def __init__(
        self,
        model: StepModel,
        plan: Plan,
        voice: VoiceState,
        eos_threshold: float,
        frames_after_eos: Optional[int],
        frames: int,
        budget: Budget,
        fixed_length: bool,
        noise: Callable[[], np.ndarray],
        times: List[np.ndarray],
        speed: float = 1.0,
        heads: Optional[List[Tuple[int, int]]] = None,
        gain_db: Optional[float] = None,
    ):
        self.model = model
        self.gain_db = gain_db  # to its loudness, where one was asked for: its decoder's (audio.loudness)
        self.heads = heads  # (layer, head) read for word timestamps, where its chunks have words
        self.plan = plan
        self.voice = voice
        self.eos_threshold = eos_threshold
        self.frames_after_eos = frames_after_eos
        self.budget = budget
        self.fixed_length = fixed_length
        self.noise = noise
        self.times = times
        self.speed = speed  # of its audio: the frames are made at 1, the decoder stretches them
        self.done = False  # nothing more to make: only its END frame (if not yet given) is left
        # It ended because its session's budget ran out while it still had something to say.
        self.cut = False
        self._own = frames
        self._ended = False  # its END frame was given (or it was stopped: none is owed)
        self._interrupted = False  # the last chunk or pause was ended by the frames left, not by itself
        self._next = 0  # index of the next plan item
        self._silence = 0  # samples of silence left in the current pause
        self._state: Optional[transformer.TransformerState] = None  # the current chunk's; None between chunks
        self._words: Optional[ChunkWords] = None  # the current chunk's units, when its words are timed
        self._text = (0, 0)  # the current chunk's text positions in its state
        self._prompt: Optional[np.ndarray] = None  # text rows the next step reads first
        self._latent: Optional[np.ndarray] = None  # the previous frame's latent (normalised); None: BOS
        self._step = 0
        self._eos_step: Optional[int] = None
        self._after = 0
        self._length = 0

    @property
    def frames_left(self) -> int:
        """Frames it may still make: its own cap, and what its session's budget has left."""
        return min(self._own, self.budget.left)

    @property
    def finished(self) -> bool:
        """Whether nothing more comes out of it: its END frame was given, or it was stopped."""
        return self._ended

    def stop(self) -> None:
        """Make nothing more, not even the END frame (a stream cancelled: its audio is not wanted).
        Safe from another thread than the one stepping it: a step already under way may make one
        more frame, which the caller drops."""
        self.done = True
        self._ended = True

    def _spend(self) -> None:
        self._own -= 1
        self.budget.spend()

    def silence(self) -> Optional[Frame]:
        """The next frame if it is (part of) a pause, which needs no model work; None when the next
        frame needs a flow-LM step, or the generation is done."""
        self._prepare()
        if self._silence == 0:
            return None
        samples = min(self.model.frame_size, self._silence)
        self._silence -= samples
        self._spend()
        if self.frames_left <= 0 and self._silence:
            self._silence = 0
            self._interrupted = True
        return Frame(None, samples, False)

    def ending(self) -> Optional[Frame]:
        """END, once, when the generation has just run out of things to make; None otherwise."""
        self._prepare()
        if not self.done or self._ended:
            return None
        self._ended = True
        return END

    def _prepare(self) -> None:
        """Move on to the next pause or text chunk when the current one is over."""
        while not self.done and self._silence == 0 and self._state is None:
            if self._next == len(self.plan) or self.frames_left <= 0:
                self.done = True
                self.cut = self.budget.exhausted and (self._interrupted or self._next < len(self.plan))
                return
            item = self.plan[self._next]
            self._next += 1
            self._interrupted = False
            if isinstance(item, Chunk):
                self._start(item)
            else:
                self._silence = item

    def _start(self, chunk: Chunk) -> None:
        self._length = self.frames_left if self.fixed_length else min(chunk.estimate, self.frames_left)
        guess = chunk.frames_after_eos_guess
        self._after = self.frames_after_eos if self.frames_after_eos is not None else guess + 2
        voice = self.voice.transformer
        state = transformer.with_capacity(voice, voice.offset + len(chunk.tokens) + self._length)
        self._state = state
        self._words = chunk.words if self.heads is not None else None
        self._text = (state.offset, state.offset + len(chunk.tokens))
        self._prompt = flow_lm.text_embeddings(self.model.params["flow_lm"], chunk.tokens)
        self._latent = None
        self._step = 0
        self._eos_step = None

    def read_text(self, rows: Optional[int]) -> Optional[np.ndarray]:
        """The rows of its text this generation reads at this step, at most `rows` (None: all that
        is left); None when it has read it all."""
        prompt = self._prompt
        if prompt is not None and rows is not None and prompt.shape[0] > rows:
            self._prompt = prompt[rows:]
            return prompt[:rows]
        self._prompt = None
        return prompt

    @property
    def makes_frame(self) -> bool:
        """Whether this step makes a frame: the text is read (it reads its previous latent then)."""
        return self._prompt is None

    @property
    def previous_latent(self) -> Optional[np.ndarray]:
        """The latent this step reads (normalised), None for the text chunk's first (BOS)."""
        return self._latent

    @property
    def state(self) -> Optional[transformer.TransformerState]:
        """The flow LM's state of the current text chunk (None between chunks)."""
        return self._state

    def tap(self) -> Optional[transformer.QueryTap]:
        """What this step keeps of the attention, where it makes a frame whose words are timed."""
        if self._words is None or not self.makes_frame or self.heads is None:
            return None
        return transformer.QueryTap([layer for layer, _ in self.heads])

    def scores(self, tap: Optional[transformer.QueryTap]) -> Optional[np.ndarray]:
        """The frame's score per unit of its chunk, from what `tap` kept."""
        if tap is None or self._words is None or self._state is None or self.heads is None:
            return None
        heads = self.model.flow_spec.transformer.num_heads
        return timestamps.unit_scores(self.heads, tap, self._state, self._text, self._words.token_to_unit, heads)

    def take(self, latent: np.ndarray, eos_logit: float, scores: Optional[np.ndarray] = None) -> Optional[Frame]:
        """The result of this generation's flow-LM step (and its frame's word scores) -> its
        frame, or None where the EOS rule ended the text chunk at this step (the latent is then
        dropped)."""
        step = self._step
        self._step += 1
        if eos_logit > self.eos_threshold and self._eos_step is None and step >= MIN_FRAMES_BEFORE_EOS:
            self._eos_step = step
        if self._eos_step is not None and step >= self._eos_step + self._after:
            self._state = None
            return None
        self._latent = latent
        self._spend()
        if self._step == self._length:
            self._state = None
            self._interrupted = self.frames_left <= 0
        p = self.model.params["flow_lm"]
        # Back from the normalised latent space, which the flow LM reads its own output in.
        return Frame(latent * p["emb_std"] + p["emb_mean"], 0, step == 0, False, self._words, scores)


def advance(
    model: StepModel, generations: Sequence[Generation], prompt_rows: Optional[int] = None
) -> List[Optional[Frame]]:
    """One step of every generation: its next frame, END where it has just ended, or None where it
    ended a text chunk but not its plan, is still reading its text, or is finished. Pauses need no
    model work; all the others take one flow-LM step together (one pass through the transformer;
    the flow head once per number of decode steps in use). A generation reads at most
    `prompt_rows` rows of its text per step (None: all at once), so that a newcomer's long text
    does not hold up the others' frames for long."""
    frames = [generation.silence() for generation in generations]
    stepping = [i for i, generation in enumerate(generations) if frames[i] is None and not generation.done]
    if stepping:
        with ops.using(model.runtime.backend):
            _step_flow_lm(model, [generations[i] for i in stepping], prompt_rows, frames, stepping)
    return [frame if frame is not None else generation.ending() for generation, frame in zip(generations, frames)]


def alone(model: StepModel, generation: Generation) -> Iterator[Frame]:
    """The frames of a generation stepped by itself, END last."""
    while not generation.finished:
        frame = advance(model, [generation])[0]
        if frame is not None:
            yield frame


def _step_flow_lm(
    model: StepModel,
    batch: List[Generation],
    prompt_rows: Optional[int],
    frames: List[Optional[Frame]],
    stepping: List[int],
) -> None:
    """One flow-LM step of `batch` together; each one's frame goes to frames[stepping[j]]."""
    spec, p = model.flow_spec, model.params["flow_lm"]
    texts = [generation.read_text(prompt_rows) for generation in batch]
    making = [j for j, generation in enumerate(batch) if generation.makes_frame]
    # Those done with their text read their previous latent after it (one product for all of them).
    latent_rows = flow_lm.input_rows(p, [batch[j].previous_latent for j in making]) if making else None  # [M, d]
    latent_of = {j: latent_rows[k : k + 1] for k, j in enumerate(making)}
    xs = [_joined(texts[j], latent_of.get(j)) for j in range(len(batch))]
    taps = [generation.tap() for generation in batch]
    states = [generation.state for generation in batch]
    z = flow_lm.backbone(spec, p, states, xs, taps if any(tap is not None for tap in taps) else None)  # [B, z]
    if not making:
        return
    noise = np.stack([batch[j].noise() for j in making])  # [M, latent_dim]
    latents, eos_logits = flow_lm.outputs(spec, p, z[making], noise, [batch[j].times for j in making])
    for k, j in enumerate(making):
        frames[stepping[j]] = batch[j].take(latents[k], float(eos_logits[k]), batch[j].scores(taps[j]))


def _joined(text: Optional[np.ndarray], latent: Optional[np.ndarray]) -> np.ndarray:
    """A stream's rows of this step: text rows, its latent's row, or the text then the latent."""
    if text is None or latent is None:
        return latent if text is None else text
    return np.concatenate([text, latent])
