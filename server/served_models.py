"""The models one server speaks with: several languages in one process. The first --model is the
default (loaded at start and kept: uploads and saved voices are its voices); each --also-model is
loaded on its first request (or at start with --preload) and kept while a memory budget
(--memory-budget) allows: past it, the model used least recently is let go (a request still
speaking with it keeps it until it ends). A request picks one by name, or by language (a code,
"fr" or "fr-FR", or a name, "french": the first served model that speaks it), every front alike
(server/session.py); none picked is the default.

What models share is shared: a model whose Mimi codec is the same as a loaded one's (the same
configuration and every array equal: checked, not assumed from the name) uses that one's arrays,
so three languages hold one decoder. Every served model speaks at the default's sample rate and
frame size (the fronts' formats and budgets are set by them): one that does not is refused when
it loads.

Loading blocks (a download, reading weights): call `get` in a worker thread, never on the event
loop. One thread loads a model; the others asking for it wait for it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence

import numpy as np

from core import PocketTTSError, TTSModel
from core.portable.network.quantize import Int8Matrix, LowRank
from core.portable.text import normalize
from server import errors
from server.engine_voices import EngineVoices
from server.errors import ServiceError
from server.hosting import HostedModel


class Served(NamedTuple):
    """A loaded model as the server serves it: the model, as clients see it, and its voices."""

    hosted: HostedModel
    voices: EngineVoices

    @property
    def model(self) -> TTSModel:
        return self.hosted.model


class Listed(NamedTuple):
    """A served model as /health and /v1/models list it: its name, language, whether it is loaded
    now, and whether it is the default."""

    name: str
    language: str
    loaded: bool
    default: bool


def _leaves(tree: Any, path: str = "") -> Iterator[tuple]:
    """(path, array or None) of nested params (dicts, lists, int8 matrices, adapted weights: each
    by its arrays), in a fixed order."""
    if isinstance(tree, dict):
        for key in sorted(tree):
            yield from _leaves(tree[key], f"{path}/{key}")
    elif isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            yield from _leaves(item, f"{path}/{i}")
    elif isinstance(tree, Int8Matrix):
        yield from _leaves({"values": tree.values, "scales": tree.scales}, path)
    elif isinstance(tree, LowRank):
        yield from _leaves({"base": tree.base, "down": tree.down, "up": tree.up}, path)
    else:
        yield path, tree


def codec_digest(model: TTSModel) -> str:
    """A digest of the model's Mimi codec: its configuration and every array as prepared."""
    digest = hashlib.sha256(repr(model.config.mimi).encode())
    for path, leaf in _leaves(model.params["mimi"]):
        digest.update(path.encode())
        if isinstance(leaf, np.ndarray):
            digest.update(f"{leaf.dtype}{leaf.shape}".encode())
            digest.update(np.ascontiguousarray(leaf).view(np.uint8).reshape(-1))
    return digest.hexdigest()


def held_bytes(models: Sequence[TTSModel]) -> int:
    """The bytes of the arrays `models` hold, each array once (shared ones are counted once)."""
    seen: Dict[int, int] = {}
    for model in models:
        for _, leaf in _leaves(model.params):
            if isinstance(leaf, np.ndarray):
                seen[id(leaf)] = leaf.nbytes
    return sum(seen.values())


class Other(NamedTuple):
    """A model served beside the default: the language it speaks, and what loads it."""

    language: str
    load: Callable[[], Served]


class ServedModels:
    def __init__(self, default: Served, others: Dict[str, Other], budget_bytes: Optional[int] = None):
        """`default`: loaded; `others`: every other model by name; `budget_bytes`: what the loaded
        models may hold together (None: no bound; the default and the model a request needs are
        always held)."""
        self.default = default
        self.default_name = default.hosted.name
        self._sources = {name: other for name, other in others.items() if name != self.default_name}
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._loading: Dict[str, threading.Lock] = {name: threading.Lock() for name in self._sources}
        self._loaded: Dict[str, Served] = {}
        self._used: Dict[str, float] = {}
        self._codecs: Dict[str, str] = {}  # a loaded model's name -> its codec's digest, once another loads

    @property
    def names(self) -> List[str]:
        """Every served model's name, the default first."""
        return [self.default_name, *self._sources]

    def language_of(self, name: str) -> str:
        """The language a served model speaks."""
        other = self._sources.get(name)
        return other.language if other is not None else str(self.default.hosted.description["language"])

    def loaded(self, name: str) -> Optional[Served]:
        """The served model `name` if it is loaded now (None: not, or no such model), unmarked."""
        if name == self.default_name:
            return self.default
        with self._lock:
            return self._loaded.get(name)

    def listed(self) -> List[Listed]:
        with self._lock:
            loaded = set(self._loaded)
        return [
            Listed(
                name,
                self.language_of(name),
                name == self.default_name or name in loaded,
                name == self.default_name,
            )
            for name in self.names
        ]

    def pick(self, selector: Optional[str]) -> str:
        """The served model `selector` names: none, the default; a model's name; else a language
        (the first served model that speaks it). A ServiceError (unknown_model) for any other."""
        if not selector:
            return self.default_name
        if selector in self.names:
            return selector
        speaking = self.speaking(selector)
        if speaking is not None:
            return speaking
        spoken = ", ".join(sorted({self.language_of(name) for name in self.names}))
        served = ", ".join(self.names)
        raise ServiceError(
            errors.UNKNOWN_MODEL,
            f"no model here is or speaks {selector[:40]!r}: models {served}; languages {spoken}",
            "model",
        )

    def speaking(self, tag: str) -> Optional[str]:
        """The first served model that speaks the language `tag` names ("fr", "fr-FR", "french"),
        None for none."""
        language = normalize.language_of_tag(tag)
        return next((name for name in self.names if language is not None and self.language_of(name) == language), None)

    def language_codes(self) -> List[str]:
        """The languages of the served models, as codes ("en", "fr"), each once, the default's first."""
        codes = [normalize.LANGUAGE_CODES[self.language_of(name)] for name in self.names]
        return list(dict.fromkeys(codes))

    def get(self, selector: Optional[str] = None) -> Served:
        """The served model `selector` picks, loaded now if it is not (blocking), and marked used."""
        name = self.pick(selector)
        if name == self.default_name:
            return self.default
        with self._loading[name]:
            with self._lock:
                served = self._loaded.get(name)
            if served is None:
                served = self._loaded_now(name)
            with self._lock:
                self._used[name] = time.monotonic()
        return served

    def preload(self) -> None:
        for name in self._sources:
            self.get(name)

    def _loaded_now(self, name: str) -> Served:
        try:
            served = self._sources[name].load()
        except PocketTTSError as e:
            raise ServiceError(errors.MODEL_UNAVAILABLE, f"the model {name} could not load: {e}", "model") from None
        default = self.default.hosted
        if (served.hosted.sample_rate, served.hosted.frame_size) != (default.sample_rate, default.frame_size):
            raise ServiceError(
                errors.MODEL_UNAVAILABLE,
                f"the model {name} speaks at {served.hosted.sample_rate} Hz, this server at {default.sample_rate}",
                "model",
            )
        self._share_codec(name, served.model)
        with self._lock:
            self._loaded[name] = served
            self._used[name] = time.monotonic()
            self._within_budget(keep=name)
        return served

    def _share_codec(self, name: str, model: TTSModel) -> None:
        """`model` takes a loaded model's Mimi arrays where its own are the same (an adapter's
        model shares its base's already)."""
        with self._lock:
            holders = [self.default, *self._loaded.values()]
        if any(served.model.params["mimi"] is model.params["mimi"] for served in holders):
            return
        digest = codec_digest(model)
        if self.default_name not in self._codecs:  # the default's too, now that a second model is here
            self._codecs[self.default_name] = codec_digest(self.default.model)
        with self._lock:
            holders = {self.default_name: self.default, **self._loaded}
            for other, served in holders.items():
                if (
                    self._codecs.get(other) == digest
                    and served.model.params["mimi"].keys() == model.params["mimi"].keys()
                ):
                    model.params["mimi"] = served.model.params["mimi"]
                    break
            self._codecs[name] = digest

    def _within_budget(self, keep: str) -> None:
        """Let go of the models used least recently (never the default nor `keep`) while the loaded
        ones hold more than the budget. Called under the lock."""
        if self.budget_bytes is None:
            return
        while True:
            held = held_bytes([self.default.model, *(served.model for served in self._loaded.values())])
            spare = sorted((used, name) for name, used in self._used.items() if name != keep and name in self._loaded)
            if held <= self.budget_bytes or not spare:
                return
            name = spare[0][1]
            del self._loaded[name]
            del self._used[name]
            self._codecs.pop(name, None)

    def held_bytes(self) -> int:
        with self._lock:
            return held_bytes([self.default.model, *(served.model for served in self._loaded.values())])
