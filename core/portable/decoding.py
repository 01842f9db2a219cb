"""Frames to audio: Mimi's decoder, the fade-in of each text chunk, and the speed change.

A generation's frames are decoded in order, one text chunk after another (each chunk, as in the
official package, on a fresh decoder state with a 5 ms fade-in against its start click), then
stretched to the generation's speed (core.portable.tsm). The END frame gives out what the speed
change still holds. A frame's audio is None where there is none (the speed change gathering its
first few ms, or the END at speed 1): no caller ever sees an empty chunk.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence

import numpy as np

from . import mimi, tsm
from .generation import Frame

# The first decoded samples of a fresh Mimi decoder carry a small step, heard as a click.
FADE_IN_SECONDS = 1 / 200


class FrameDecoder:
    """Decodes one generation's frames to audio at its speed (`model`: a TTSModel with its decoder)."""

    def __init__(self, model: object, speed: float = 1.0):
        self.model = model
        self.state: Optional[mimi.DecoderState] = None
        self.fade = np.linspace(0, 1, int(model.sample_rate * FADE_IN_SECONDS), dtype=np.float32)
        self.stretch = tsm.TimeStretch(speed, model.sample_rate)

    def decode(self, frame: Frame) -> Optional[np.ndarray]:
        """The audio of the next frame (float32), or None where it has none to give yet."""
        if frame.end:
            return _audio(self.stretch.finish())
        if frame.latent is None:
            return self.stretched(np.zeros(frame.silence, np.float32))
        model = self.model
        self.begin(frame)
        pcm = mimi.decode_step(model.mimi_spec, model.params["mimi"], frame.latent[None], self.state)  # [frame_size]
        return self.stretched(self.faded(pcm, frame))

    def begin(self, frame: Frame) -> None:
        if frame.first or self.state is None:
            self.state = mimi.init_decoder_state(self.model.mimi_spec, self.model.params["mimi"])

    def faded(self, pcm: np.ndarray, frame: Frame) -> np.ndarray:
        if frame.first:
            pcm[: self.fade.shape[0]] *= self.fade[: pcm.shape[0]]
        return pcm

    def stretched(self, pcm: np.ndarray) -> Optional[np.ndarray]:
        return _audio(self.stretch.push(pcm))


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
        audio = mimi.decode_streams(model.mimi_spec, model.params["mimi"], latents, states)  # [B, frame_size]
        for j, i in enumerate(speaking):
            pcm[i] = decoders[i].stretched(decoders[i].faded(audio[j], frames[i]))
    for i, frame in enumerate(frames):
        if frame.latent is None:
            pcm[i] = decoders[i].decode(frame)
    return pcm


def decoded(decoder: FrameDecoder, frames: Iterable[Frame]) -> Iterator[np.ndarray]:
    """The audio of a generation's frames, chunk by chunk (none empty), its held-back end with its END."""
    for frame in frames:
        pcm = decoder.decode(frame)
        if pcm is not None:
            yield pcm


def _audio(pcm: np.ndarray) -> Optional[np.ndarray]:
    return pcm if pcm.shape[0] else None
