"""Frames to audio: Mimi's decoder, the fade-in of each text chunk, and the speed change.

A generation's frames are decoded in order, one text chunk after another (each chunk, as in the
official package, on a fresh decoder state with a 5 ms fade-in against its start click), then
stretched to the generation's speed (core.portable.audio.tsm). The END frame gives out what the speed
change still holds. A frame's audio is None where there is none (the speed change gathering its
first few ms, or the END at speed 1): no caller ever sees an empty chunk. Where the frames carry
word scores, the decoder's `words` (core.portable.synthesis.timestamps.WordTimer) times their words as each
frame is decoded: `take_words` gives out what is known, before the audio that starts it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from ..audio import loudness, tsm
from ..network import mimi, ops
from ..text.words import ChunkWords, Word
from .generation import Frame
from .timestamps import WordAligner, WordEnd, WordEvent, WordStart, is_voiced

# The first decoded samples of a fresh Mimi decoder carry a small step, heard as a click.
FADE_IN_SECONDS = 1 / 200


class DecodingModel(Protocol):
    """What a decoder reads of its model (TTSModel is one, with its decoder loaded): Mimi's spec and
    parameters, the sample rate, and the backend its decoding runs on (its runtime's)."""

    mimi_spec: mimi.MimiSpec
    params: Dict[str, Any]  # the checkpoint's tensors by part; Mimi's under "mimi"
    runtime: Any

    @property
    def sample_rate(self) -> int: ...


class FrameDecoder:
    """Decodes one generation's frames to audio at its speed (`model`: a TTSModel with its decoder)."""

    def __init__(self, model: DecodingModel, speed: float = 1.0, gain_db: Optional[float] = None):
        """`gain_db`: where the generation asked for a loudness, the voice's gain to it (its audio then
        goes through a loudness.Leveler); None: the audio as Mimi makes it."""
        self.model = model
        self.leveler = None if gain_db is None else loudness.Leveler(gain_db)
        self.state: Optional[mimi.DecoderState] = None
        self.fade = np.linspace(0, 1, int(model.sample_rate * FADE_IN_SECONDS), dtype=np.float32)
        self.stretch = tsm.TimeStretch(speed, model.sample_rate)
        self.words = WordTimer(speed)

    def decode(self, frame: Frame) -> Optional[np.ndarray]:
        """The audio of the next frame (float32), or None where it has none to give yet."""
        if frame.latent is None:
            self.words.frame(frame, None)
            if frame.end:
                return self.leveled(_audio(self.stretch.finish()))
            return self.stretched(np.zeros(frame.silence, np.float32))
        return self.stretched(self.faded(self.mimi_step(frame), frame))

    def mimi_step(self, frame: Frame) -> np.ndarray:
        """The audio of a frame with a latent [frame_size], as Mimi decodes it (advancing `state`)."""
        model = self.model
        self.begin(frame)
        with ops.using(model.runtime.backend):
            return mimi.decode_step(model.mimi_spec, model.params["mimi"], frame.latent[None], self.state)

    def take_words(self) -> List[WordEvent]:
        """The word events of the frames decoded so far and not yet taken."""
        return self.words.take()

    def begin(self, frame: Frame) -> None:
        if frame.first or self.state is None:
            self.state = mimi.init_decoder_state(self.model.mimi_spec, self.model.params["mimi"])

    def faded(self, pcm: np.ndarray, frame: Frame) -> np.ndarray:
        """The frame's audio as it is heard, at speed 1 (its words timed on it)."""
        if frame.first:
            pcm[: self.fade.shape[0]] *= self.fade[: pcm.shape[0]]
        self.words.frame(frame, pcm)
        return pcm

    def stretched(self, pcm: np.ndarray) -> Optional[np.ndarray]:
        return self.leveled(_audio(self.stretch.push(pcm)))

    def leveled(self, pcm: Optional[np.ndarray]) -> Optional[np.ndarray]:
        return pcm if pcm is None or self.leveler is None else self.leveler(pcm)


class WordTimer:
    """The words of one generation's frames, as they are decoded: `frame` with each frame and its
    audio before the speed change (None for a pause or the END) feeds each chunk's aligner
    (core.portable.synthesis.timestamps); `take` gives out what is known, in samples of the generation's
    audio at `speed` (a frame at model sample s is heard at s / speed, to within the speed change's
    10 ms), the words as the user wrote them: a word the normalizer wrote as several ("$5.20",
    "five dollars and twenty cents") starts with the first of them and ends with the last."""

    def __init__(self, speed: float = 1.0):
        self.speed = speed
        self._at = 0  # model samples of the generation so far
        self._chunk: Optional[ChunkWords] = None
        self._aligner: Optional[WordAligner] = None
        self._events: List[WordEvent] = []
        self._user: Optional[Tuple[Word, int, int]] = None  # the user word open: it, its start, its spoken end
        self._ended: Optional[Tuple[Word, int, int]] = None  # one whose end waits: it may go on

    def frame(self, frame: Frame, pcm: Optional[np.ndarray]) -> None:
        words = frame.words
        if frame.end or frame.latent is None:  # the END, or a pause: no word goes on over it
            self._finish_chunk()
            self._flush()
            self._at += frame.silence
            return
        if words is not None and pcm is not None and frame.scores is not None:
            if frame.first or words is not self._chunk:
                self._finish_chunk()
                self._chunk, self._aligner = words, WordAligner(words.units)
            assert self._aligner is not None
            for event in self._aligner.frame(frame.scores, is_voiced(pcm), self._at):
                self._spoken(event)
        self._at += pcm.shape[0] if pcm is not None else 0

    def take(self) -> List[WordEvent]:
        events, self._events = self._events, []
        return events

    def _finish_chunk(self) -> None:
        if self._aligner is not None:
            for event in self._aligner.finish(self._at):
                self._spoken(event)
        self._chunk = self._aligner = None

    def _sample(self, at: int) -> int:
        return at if self.speed == 1.0 else int(round(at / self.speed))

    def _spoken(self, event: WordEvent) -> None:
        """A spoken word's event, as the event of the user's word it is part of."""
        assert self._chunk is not None
        user = self._chunk.users[event.index]
        if isinstance(event, WordStart):
            if self._ended is not None and self._ended[0].index == user.index:  # the same user word goes on
                self._user, self._ended = self._ended, None
                return
            self._flush()
            self._user = (user, event.sample, event.sample)
            self._events.append(WordStart(user.text, user.index, self._sample(event.sample)))
        elif isinstance(event, WordEnd) and self._user is not None:
            self._ended, self._user = (self._user[0], self._user[1], event.end), None

    def _flush(self) -> None:
        if self._ended is not None:
            user, start, end = self._ended
            self._events.append(WordEnd(user.text, user.index, self._sample(start), self._sample(end)))
            self._ended = None


def decode_together(decoders: Sequence[FrameDecoder], frames: Sequence[Frame]) -> List[Optional[np.ndarray]]:
    """Each decoder's next frame (the decoders of several streams of one model): the latents in one
    pass through Mimi's decoder for all of them, each stream on its own state; pauses and ENDs alone."""
    pcm: List[Optional[np.ndarray]] = [None] * len(frames)
    speaking = [i for i, frame in enumerate(frames) if frame.latent is not None]
    if speaking:
        model = decoders[speaking[0]].model
        for i in speaking:
            decoders[i].begin(frames[i])
        latents = np.stack([frames[i].latent for i in speaking])[:, None]  # [B, 1, latent_dim]
        states = [decoders[i].state for i in speaking]
        with ops.using(model.runtime.backend):
            audio = mimi.decode_streams(model.mimi_spec, model.params["mimi"], latents, states)  # [B, frame_size]
        for j, i in enumerate(speaking):
            pcm[i] = decoders[i].stretched(decoders[i].faded(audio[j], frames[i]))
    for i, frame in enumerate(frames):
        if frame.latent is None:
            pcm[i] = decoders[i].decode(frame)
    return pcm


def decoded(decoder: FrameDecoder, frames: Iterable[Frame]) -> Iterator[Spoken]:
    """The audio of a generation's frames, chunk by chunk (none empty), its held-back end with its
    END; where its words are timed, each word event before the audio that follows it."""
    for frame in frames:
        pcm = decoder.decode(frame)
        yield from decoder.take_words()
        if pcm is not None:
            yield pcm


# What a generation gives out: audio chunks, and word events where its words are timed.
Spoken = Union[np.ndarray, WordEvent]


def _audio(pcm: np.ndarray) -> Optional[np.ndarray]:
    return pcm if pcm.shape[0] else None
