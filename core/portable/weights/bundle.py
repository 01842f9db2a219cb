"""The bundle format: a self-contained model folder that `TTSModel.load(folder)` loads, here or in
the browser (`python -m core.cli export` writes one: core/export.py).

    bundle.json        FORMAT, VERSION, name, file names, voices, default voice (`manifest`)
    config.json        the official config schema as JSON (its weights are named in bundle.json)
    flow_lm.safetensors, decoder.safetensors, voice_cloning.safetensors
                       the checkpoint's parts (params.PARTS), int8 (`weights_metadata`) or float32,
                       official key names; a part apart is what one browser worker loads
    tokenizer.json / tokenizer.model
    voices/<name>.safetensors   voice states in the official format

This module is the one place that knows the layout: `manifest` writes it, `read` reads it back.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, NamedTuple, Optional, Sequence

from ..errors import ConfigError
from ..network import quantize
from . import params

FORMAT = "pocket-tts-numpy-bundle"
VERSION = 2  # 2: a weights file per part of the checkpoint; 1: one model.safetensors
READABLE_VERSIONS = (1, 2)
MANIFEST = "bundle.json"
CONFIG = "config.json"
VOICES = "voices"  # the folder of the voice states


class Contents(NamedTuple):
    """A bundle's files (local paths) and what its manifest says of them."""

    config: str
    weights: Dict[str, str]  # part (params.PARTS) -> file; parts the bundle leaves out have none
    tokenizer: str
    name: str
    voices: Dict[str, str]  # predefined voice -> its state file
    default_voice: Optional[str]
    voice_cloning: bool


def weights_file(part: str) -> str:
    return f"{part}.safetensors"


def voice_file(name: str) -> str:
    return f"{VOICES}/{name}.safetensors"


def weights_metadata(int8: bool) -> Dict[str, str]:
    """The metadata of a bundle's weights files: int8 ones carry quantize's tag, which tells its
    reader to dequantize them."""
    return {"format": quantize.FORMAT, "version": quantize.VERSION} if int8 else {}


def manifest(
    name: str,
    parts: Sequence[str],
    tokenizer: str,
    int8: bool,
    voice_cloning: bool,
    voices: List[str],
    sample_rate: int,
) -> Dict[str, object]:
    """bundle.json of a bundle holding `parts`, the tokenizer file `tokenizer` and `voices` (the first
    is the default)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "config": CONFIG,
        "weights": {part: weights_file(part) for part in parts},
        "tokenizer": tokenizer,
        "quantization": "int8" if int8 else "float32",
        "voice_cloning": voice_cloning,
        "voices": {voice: voice_file(voice) for voice in voices},
        "default_voice": voices[0] if voices else None,
        "sample_rate": sample_rate,
    }


def is_bundle(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, MANIFEST))


def read(directory: str) -> Contents:
    """The files of the bundle in `directory`; a ConfigError for anything but a bundle this reads."""
    manifest_path = os.path.join(directory, MANIFEST)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError:
        raise ConfigError(f"{directory} is not a model bundle (no {MANIFEST})") from None
    except ValueError as e:
        raise ConfigError(f"{manifest_path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") not in READABLE_VERSIONS:
        found = data if isinstance(data, dict) else {}
        raise ConfigError(
            f"{manifest_path}: unsupported bundle format {found.get('format')!r} version "
            f"{found.get('version')!r} (expected {FORMAT!r} version {VERSION})"
        )

    def member(name: Optional[str], field: str) -> str:
        path = os.path.join(directory, str(name or ""))
        if not name or not os.path.isfile(path):
            raise ConfigError(f"{manifest_path}: {field} file missing: {name!r}")
        return path

    weights = data.get("weights")
    if isinstance(weights, dict):  # version 2: a file per part (parts a bundle leaves out have none)
        if set(weights) - set(params.PARTS) or not all(isinstance(name, str) and name for name in weights.values()):
            raise ConfigError(f"{manifest_path}: weights must map parts ({', '.join(params.PARTS)}) to file names")
        # Checked when read: a browser worker holds only the files of the parts it loads.
        files = {part: os.path.join(directory, name) for part, name in weights.items()}
    else:
        path = member(weights, "weights")
        files = {part: path for part in params.PARTS}
    return Contents(
        member(data.get("config"), "config"),
        files,
        member(data.get("tokenizer"), "tokenizer"),
        str(data.get("name") or directory),
        {name: os.path.join(directory, path) for name, path in data.get("voices", {}).items()},
        data.get("default_voice"),
        bool(data.get("voice_cloning", True)),
    )
