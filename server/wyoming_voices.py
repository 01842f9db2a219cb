"""The voices of Home Assistant's Wyoming protocol: those a caller may ask for, the engine's name
for the one a synthesis asks for, and the `info` event that lists them (`describe`'s answer: one
TTS program, which streams). A voice is asked for by name (a predefined voice, an uploaded one
still kept that the caller may use, or a recording in the voices folder) or by language (the
model's: its default voice).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import anyio
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.tts import SynthesizeVoice

from core.portable.text import normalize
from server import errors
from server.access import Caller
from server.engine import ServerEngine

PROGRAM = "pocket-tts-numpy"
VERSION = "0.1.0"
KYUTAI = Attribution(name="Kyutai (Pocket TTS)", url="https://github.com/kyutai-labs/pocket-tts")
PROJECT = Attribution(name="Pocket TTS in NumPy", url="https://github.com/kyutai-labs/pocket-tts")


class Voices:
    """The voices Wyoming offers: the engine's, for a caller (the voices folder's among them), by
    name; the language of the model; and the `info` answer that lists them."""

    DESCRIPTIONS = {
        "default": "the server's default voice",
        "predefined": "a predefined voice of the model",
        "folder": "a recording in the voices folder",
        "uploaded": "an uploaded voice",
    }

    def __init__(self, engine: ServerEngine):
        self.engine = engine

    def names(self, caller: Caller) -> List[Tuple[str, str]]:
        """(name, description) of every voice `caller` may use, the default first (blocking: the
        engine's lock, the folder)."""
        seen: Dict[str, str] = {}
        for voice in self.engine.voices.listed(caller):
            if voice.kind in self.DESCRIPTIONS:
                name = voice.voice if voice.kind == "default" else voice.id
                seen.setdefault(str(name), self.DESCRIPTIONS[voice.kind])
        return list(seen.items())

    def key(self, voice: Optional[SynthesizeVoice]) -> Tuple[Optional[str], Optional[str]]:
        """The engine's names for a requested voice: (the voice, None: its model's default; the
        served model, None: the default), which the engine resolves for the session's caller. Another
        served model's voice is that model's name (its default voice), or the voice's language; a
        language no model speaks is an unknown_voice ServiceError."""
        if voice is None:
            return None, None
        models = self.engine.models
        if voice.name is not None and voice.name != models.default_name and voice.name in models.names:
            return None, voice.name
        model = None
        if voice.language is not None and not normalize.same_language(voice.language, self.language):
            model = self.engine.model_speaking(voice.language, errors.UNKNOWN_VOICE)
        if voice.name is None or voice.name == self.engine.voices.default_name:
            return None, model
        return voice.name, model

    @property
    def language(self) -> str:
        return self.engine.hosted.language_code

    async def info(self, caller: Caller) -> Info:
        """The answer to `describe`: the program, and the voices `caller` may use."""
        named = await anyio.to_thread.run_sync(self.names, caller)  # the engine's lock, the folder
        language = self.language
        voices = [
            TtsVoice(
                name=name,
                description=description,
                attribution=KYUTAI,
                installed=True,
                version=None,
                languages=[language],
            )
            for name, description in named
        ]
        voices += [  # every other served model, by its default voice
            TtsVoice(
                name=listed.name,
                description=f"the voice of the model {listed.name}",
                attribution=KYUTAI,
                installed=True,
                version=None,
                languages=[normalize.LANGUAGE_CODES[listed.language]],
            )
            for listed in self.engine.models.listed()[1:]
        ]
        program = TtsProgram(
            name=PROGRAM,
            description=f"Kyutai's Pocket TTS ({self.engine.hosted.name}) in NumPy: streaming speech on a CPU",
            attribution=PROJECT,
            installed=True,
            version=VERSION,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])
