"""The official models and predefined voices, by name (data in catalog.json, made by
scripts/make_catalog.py from pocket-tts 4.0.1)."""

from __future__ import annotations

import json
import pkgutil
from typing import Any, Dict, List, Optional

from ..config import Config

_data: Optional[Dict[str, Any]] = None


def _catalog() -> Dict[str, Any]:
    global _data
    if _data is None:
        raw = pkgutil.get_data(__name__.rpartition(".")[0], "catalog.json")
        _data = json.loads(raw.decode("utf-8")) if raw else {}
    return _data


def model_names() -> List[str]:
    return sorted(_catalog()["models"])


def default_model() -> str:
    return str(_catalog()["default_model"])


def is_model(name: str) -> bool:
    return name in _catalog()["models"]


def config(name: str) -> Config:
    return Config.from_dict(_catalog()["models"][name], f"catalog model {name!r}")


def timed_models() -> List[str]:
    """The models with timestamp heads (word timestamps)."""
    return sorted(name for name, cfg in _catalog()["models"].items() if cfg.get("timestamp_heads"))


def voice_names() -> List[str]:
    return list(_catalog()["voices"])


def voice_url(model: str, voice: str) -> str:
    """Where the official state of a predefined voice for this model lives (hf://)."""
    return str(_catalog()["voice_embeddings"]).format(language=model, name=voice)


def voice_origin(voice: str) -> str:
    """The recording a predefined voice was made from (hf://), which any model can clone."""
    return str(_catalog()["voices"][voice])


def voice_language(voice: str) -> str:
    """The language a predefined voice was recorded in: the languages' default voices are theirs,
    the rest English recordings (VCTK, Expresso, EARS, voice donations). Every voice speaks every
    language's model."""
    for language, name in _catalog()["default_voice"].items():
        if name == voice:
            return str(language)
    return "english"


def default_voice(model: str) -> str:
    """The official default voice of a model: per language, else alba."""
    for language, voice in _catalog()["default_voice"].items():
        if language in model:
            return str(voice)
    return str(_catalog()["default_voice_fallback"])


def default_text(model: Optional[str]) -> str:
    """The official default text for a model's language (English otherwise)."""
    texts = _catalog()["default_text"]
    for language, text in texts.items():
        if model is not None and language in model:
            return str(text)
    return str(texts["english"])
