"""A model's files: safetensors read and written, the checkpoint's layout per config (params), the
bundle format, the official models and voices by name (catalog, catalog.json), and where a model's
files come from (sources). It imports the network (for the layout of its parameters), config and
errors: never text, voices or generation."""

from __future__ import annotations
