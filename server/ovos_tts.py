"""OpenVoiceOS and Neon speak with this package as a TTS plugin (and Mycroft's older hosts): the
entry points `opm.tts` and `mycroft.plugin.tts` name PocketTTSPlugin, which ovos-plugin-manager
loads (the 'ovos' extra brings it). Its config, under the keys that ecosystem uses:

    "tts": {"module": "ovos-tts-plugin-pocket-tts-numpy",
            "ovos-tts-plugin-pocket-tts-numpy": {"model": "english", "voice": "alba",
                                                 "preload_languages": ["fr-FR"], "sample_rate": 22050}}

`lang` (the host's) is spoken by `model` (default: the catalog's model of that language), and every
other language the catalog has a model for by that model, loaded on its first sentence, or at start
for `preload_languages`: one model a language, kept. `voice`: a predefined name, an audio file or a
voice state (default: the model's own); `sample_rate`: the WAV's (default: the model's, 24 kHz).

Each sentence is one generation of the Python API (the model's own limits: a text of at most
MAX_TEXT characters, REQUEST_SECONDS of audio). `get_tts` writes it whole to the host's file through
core/files.py (a link there is replaced, never written through). A host that streams (its config's
`enable_streaming`) plays `stream_tts`'s WAV stream as it is made: a header, then each chunk of
16-bit PCM as the model makes it, on a worker thread. Its refusals are PocketTTSErrors, one line
each, which the host logs.
"""

from __future__ import annotations

import threading
from typing import Any, AsyncIterator, Dict, Optional, Set, Tuple

from ovos_plugin_manager.templates.tts import TTS, StreamingTTS
from ovos_utils import classproperty

from core import PocketTTSError, TTSModel, VoiceState, audio_formats
from core.files import write_atomically
from core.portable.synthesis.options import MAX_TEXT, REQUEST_SECONDS
from core.portable.text import normalize
from core.portable.text.prepare import check_text
from core.portable.weights import catalog
from server.off_the_loop import each_on_a_thread

NAME = "ovos-tts-plugin-pocket-tts-numpy"


class PocketTTSPlugin(StreamingTTS):
    def __init__(self, config: Optional[Dict[str, Any]] = None, *args: Any, **kwargs: Any):
        super().__init__(config, *args, audio_ext="wav", **kwargs)
        self._lock = threading.Lock()
        self._models: Dict[str, TTSModel] = {}
        self._voices: Dict[Tuple[str, Optional[str]], VoiceState] = {}
        for lang in [self.lang, *self.config.get("preload_languages", [])]:
            self._model(lang)

    @classproperty
    def available_languages(cls) -> Set[str]:
        """The languages of the catalog's models, as language codes."""
        return {normalize.LANGUAGE_CODES[name] for name in normalize.LANGUAGE_CODES if catalog.is_model(name)}

    def init(self, bus: Any = None, playback: Any = None, callbacks: Any = None) -> None:
        """The host's start: a streaming host's callbacks need an audio player (ffplay, paplay or
        aplay), which a host that does not stream may lack, so only a streaming one gets them."""
        if callbacks is None and not self.config.get("enable_streaming"):
            TTS.init(self, bus, playback)
            return
        super().init(bus, playback, callbacks)

    def get_tts(self, sentence: str, wav_file: str, lang: Optional[str] = None, voice: Optional[str] = None) -> Any:
        """`sentence` spoken in `lang` (the host's by default) with `voice` (the config's by default),
        written to `wav_file`; (wav_file, None): no phonemes."""
        model, text, state = self._prepared(sentence, lang, voice)
        pcm = model.generate(text, state, max_seconds=REQUEST_SECONDS)
        whole = audio_formats.WholeFile("wav", model.sample_rate, self.config.get("sample_rate"))
        whole.add(pcm)
        write_atomically(wav_file, whole.end())
        return wav_file, None

    async def stream_tts(
        self, sentence: str, lang: Optional[str] = None, voice: Optional[str] = None
    ) -> AsyncIterator[bytes]:
        """`sentence` as a WAV stream at the config's rate: the header (its length unknown), then
        each chunk's 16-bit PCM as it is made."""
        model, text, state = self._prepared(sentence, lang, voice)
        out = audio_formats.Output("wav", model.sample_rate, self.config.get("sample_rate"))
        yield out.header()
        async for pcm in each_on_a_thread(model.stream(text, state, max_seconds=REQUEST_SECONDS)):
            yield out.chunk(pcm)
        yield out.end()

    def _prepared(self, sentence: str, lang: Optional[str], voice: Optional[str]) -> Tuple[TTSModel, str, VoiceState]:
        text = check_text(sentence)
        if len(text) > MAX_TEXT:
            raise PocketTTSError(f"the sentence is longer than {MAX_TEXT} characters")
        model = self._model(lang or self.lang)
        return model, text, self._voice(model, voice or self.config.get("voice"))

    def _model(self, lang: str) -> TTSModel:
        """The model of `lang`, loaded the first time it is asked for."""
        name = normalize.language_of_tag(lang)
        if name is None:
            raise PocketTTSError(
                f"{lang!r}: no model speaks it (languages: {', '.join(sorted(self.available_languages))})"
            )
        with self._lock:
            if name not in self._models:
                main = normalize.language_of_tag(self.lang) == name and self.config.get("model")
                source = main or (name if catalog.is_model(name) else None)
                if not source:
                    raise PocketTTSError(f"{lang!r}: the catalog has no {name} model: give one as `model`")
                self._models[name] = TTSModel.load(source)
            return self._models[name]

    def _voice(self, model: TTSModel, voice: Optional[str]) -> VoiceState:
        key = (model.name, voice)
        with self._lock:
            if key not in self._voices:
                self._voices[key] = model.voice_state(voice)
            return self._voices[key]
