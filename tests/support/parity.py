"""The parity models: the tiny architectures committed under tests/fixtures/models and, where
scripts/test.sh has written them, the full-size fixtures under build/reference; each loaded with
its official reference (reference.npz)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from core import TTSModel
from tests.support.paths import TINY_DIR


def tiny_models() -> List[str]:
    return sorted(p.name for p in TINY_DIR.iterdir() if (p / "reference.npz").exists())


def model_dir(reference_dir: Path, name: str) -> Path:
    """A parity model's folder: a tiny one's under the fixtures, else under `reference_dir`."""
    tiny = TINY_DIR / name
    return tiny if tiny.exists() else reference_dir / name


class Loaded:
    """A parity model loaded, with its official reference."""

    def __init__(self, name: str, directory: Path):
        self.name = name
        self.dir = directory
        self.model = TTSModel.load(str(directory / "config.yaml"))
        self.ref = dict(np.load(directory / "reference.npz"))
        self.is_tiny = directory.parent == TINY_DIR

    def official_voice(self):
        return self.model.voice_state(str(self.dir / "voice_state.safetensors"))
