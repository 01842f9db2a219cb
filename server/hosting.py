"""The model the server hosts, as its clients see it: its public name (never the path it was loaded
from), its rate and frame size, whether it times words, the language it speaks, and what a listing
says of it. Facts fixed at load, read by every front (the health and model listings, Wyoming's
`info`, MCP's `list_models`)."""

from __future__ import annotations

import os
import time
from typing import Dict

from core import TTSModel
from core.portable.text import normalize
from core.portable.weights import params


class HostedModel:
    def __init__(self, model: TTSModel):
        self.model = model
        self.loaded_at = int(time.time())
        # A catalog name, or a config file's or bundle's own name.
        self.name = public_name(model.name)
        self.sample_rate: int = model.sample_rate
        self.frame_size: int = model.frame_size  # samples per generated frame
        self.word_timestamps = model.config.timestamp_heads is not None  # its config names timestamp heads
        # The language it speaks as clients name it ("en", "fr", ...).
        self.language_code = normalize.LANGUAGE_CODES[normalize.language_of(self.name)]
        # What a listing says of it: its language, its parameters, whether it times words.
        self.description: Dict[str, object] = {
            "language": normalize.language_of(self.name),
            "parameters": params.parameter_count(model.config),
            "word_timestamps": self.word_timestamps,
        }


def public_name(name: str) -> str:
    """A model's or voice's name without the folders it was loaded from (a file's own name)."""
    if os.sep in name or (os.altsep and os.altsep in name) or os.path.exists(name):
        stem = os.path.splitext(os.path.basename(os.path.normpath(name)))[0]
        if stem in ("config", "model") and os.path.dirname(os.path.normpath(name)):
            return os.path.basename(os.path.dirname(os.path.normpath(name)))
        return stem
    return name
