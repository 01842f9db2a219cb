"""The loaders' one error."""

from __future__ import annotations


class FormatError(Exception):
    """A tokenizer file that cannot be used; Tokenizer adds the file name and raises a ConfigError."""
