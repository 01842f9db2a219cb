"""Models the tests make from the committed fixtures."""

from __future__ import annotations

from pathlib import Path

import yaml

from core import TTSModel
from tests.support.paths import TINY_DIR, TOKENIZERS


def timed_tiny(folder: Path, heads: object = ({"layer": 1, "head": 1}, {"layer": 0, "head": 0})) -> TTSModel:
    """The tiny LSD model with timestamp heads (its config written to `folder`)."""
    cfg = yaml.safe_load((TINY_DIR / "tiny_lsd" / "config.yaml").read_text())
    cfg["flow_lm"]["lookup_table"]["tokenizer_path"] = str(TOKENIZERS / "unigram4000.json")
    cfg["weights_path"] = str(TINY_DIR / "tiny_lsd" / "model.safetensors")
    cfg["timestamp_heads"] = list(heads)
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    return TTSModel.load(str(folder / "config.yaml"))
