"""A text-to-speech model for FastRTC (Gradio's real-time audio): PocketTTSModel has the three
methods of fastrtc's TTSModel protocol over TTSModel.stream, so a FastRTC app speaks with Pocket TTS
where it would call `get_tts_model()`:

    from server.fastrtc_tts import PocketTTSModel, PocketTTSOptions
    tts = PocketTTSModel("english", voice="alba")
    for sample_rate, chunk in tts.stream_tts_sync("Hello there.", PocketTTSOptions(speed=1.2)):
        yield sample_rate, chunk          # a ReplyOnPause handler's answer, 80 ms at a time

Each chunk is float32 at the model's rate (24 kHz) as it is made; `tts` gives the whole. The
'fastrtc' extra brings fastrtc itself (this module does not import it).
"""

from __future__ import annotations

import dataclasses
from typing import AsyncIterator, Iterator, Optional, Tuple

import numpy as np

from core import TTSModel
from core.portable.synthesis.options import MAX_TEXT, REQUEST_SECONDS
from server.off_the_loop import each_on_a_thread


@dataclasses.dataclass(frozen=True)
class PocketTTSOptions:
    """A call's voice (a predefined name, an audio file or a voice state; None: the model's
    default), speed (0.25-4), and the sampling's temperature and seed (None: the config's, and fresh
    randomness)."""

    voice: Optional[str] = None
    speed: float = 1.0
    temperature: Optional[float] = None
    seed: Optional[int] = None


class PocketTTSModel:
    def __init__(self, model: str = "english", voice: Optional[str] = None):
        """`model`: a catalog name, a config, a bundle or a checkpoint (TTSModel.load); `voice`:
        the voice of calls whose options name none."""
        self.model = TTSModel.load(model)
        self.voice = voice

    def tts(self, text: str, options: Optional[PocketTTSOptions] = None) -> Tuple[int, np.ndarray]:
        chunks = [chunk for _, chunk in self.stream_tts_sync(text, options)]
        return self.model.sample_rate, np.concatenate(chunks) if chunks else np.zeros(0, np.float32)

    def stream_tts_sync(
        self, text: str, options: Optional[PocketTTSOptions] = None
    ) -> Iterator[Tuple[int, np.ndarray]]:
        chosen = options or PocketTTSOptions()
        if isinstance(text, str) and len(text) > MAX_TEXT:
            raise ValueError(f"the text is longer than {MAX_TEXT} characters")
        overrides = {"temperature": chosen.temperature, "seed": chosen.seed}
        chunks = self.model.stream(
            text,
            chosen.voice or self.voice,
            speed=chosen.speed,
            max_seconds=REQUEST_SECONDS,
            **{name: value for name, value in overrides.items() if value is not None},
        )
        for chunk in chunks:
            yield self.model.sample_rate, chunk

    async def stream_tts(
        self, text: str, options: Optional[PocketTTSOptions] = None
    ) -> AsyncIterator[Tuple[int, np.ndarray]]:
        """`stream_tts_sync`'s chunks, each made on a worker thread: the event loop never waits on
        the model."""
        async for item in each_on_a_thread(self.stream_tts_sync(text, options)):
            yield item
