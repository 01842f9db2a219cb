"""Text -> token ids with the model's tokenizer file (SentencePiece `.model` or HF `tokenizer.json`).

For now this wraps the `sentencepiece` / `tokenizers` libraries, so it runs on CPython only.
"""

from __future__ import annotations

import os
from typing import Any, List

from .errors import ConfigError


class Tokenizer:
    """`Tokenizer.from_file(path)`, then `encode(text) -> ids`, `decode(ids) -> text`, `vocab_size`."""

    def __init__(self, backend: Any, kind: str, path: str):
        self._backend = backend
        self.kind = kind
        self.path = path

    @classmethod
    def from_file(cls, path: str) -> Tokenizer:
        if not os.path.isfile(path):
            raise ConfigError(f"tokenizer file not found: {path}")
        if path.endswith(".json"):
            import tokenizers

            try:
                return cls(tokenizers.Tokenizer.from_file(path), "tokenizers", path)
            except Exception as e:  # the Rust library reports every parse failure as Exception
                raise ConfigError(f"cannot load tokenizer {path}: {e}") from None
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.load(path)
        except (OSError, RuntimeError) as e:
            raise ConfigError(f"cannot load tokenizer {path}: {e}") from None
        return cls(processor, "sentencepiece", path)

    @property
    def vocab_size(self) -> int:
        if self.kind == "tokenizers":
            return int(self._backend.get_vocab_size())
        return int(self._backend.vocab_size())

    def encode(self, text: str) -> List[int]:
        if self.kind == "tokenizers":
            return list(self._backend.encode(text).ids)
        return list(self._backend.encode(text, out_type=int))

    def decode(self, ids: List[int]) -> str:
        return str(self._backend.decode(list(ids)))
