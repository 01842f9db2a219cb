"""Text <-> token ids in pure Python, for SentencePiece `.model` files and HF `tokenizer.json` files.

The official package tokenizes with the `sentencepiece` library (a `.model` protobuf) or the
`tokenizers` library (a `tokenizer.json`). Neither runs in Pyodide, so this package re-implements
both, each loader reproducing its own library id for id:

- `.model` (sentencepiece.py): the protobuf is read by model_proto.py; normalization follows
  sentencepiece's normalizer.cc (the precompiled charsmap of charsmap.py, a darts-clone
  double-array trie, matched longest-first; dummy prefix, extra-whitespace removal, whitespace
  escaping, user-defined symbols), then the unigram model (the single-pass Viterbi of
  unigram_model.cc, in unigram.py, scores rounded to float32 where the C++ does) or BPE
  (bpe_model.cc), unknown runs merged or split into byte pieces as sentencepiece_processor.cc.
- `tokenizer.json` (hf_tokenizer.py): the `tokenizers` pipeline: added tokens, normalizers
  (hf_stages.py: Precompiled, Replace, Strip, Prepend, Nmt, NFC/NFD/NFKC/NFKD, Lowercase,
  StripAccents, Sequence), pre-tokenizers (Metaspace, WhitespaceSplit, Split, Digits, Sequence),
  Unigram or BPE models (hf_models.py), the TemplateProcessing/Bert/Roberta post-processors and
  the Metaspace, ByteFallback, Fuse, Strip, Replace and Sequence decoders.

The two libraries disagree on a few inputs for "the same" tokenizer (control pieces typed as
text, trailing spaces, a combining mark after a character the charsmap rewrites: the Precompiled
normalizer of `tokenizers` works on grapheme clusters (graphemes.py) and keeps only the first rule
that matches in a short cluster); each loader follows its own library there.

Known limits (tests/core/test_tokenizer.py holds both loaders to their libraries on every fixture):
- `.model`: unigram and BPE only (not WORD/CHAR), no treat_whitespace_as_suffix.
- `tokenizer.json`: NFC/NFD/NFKC/NFKD, Lowercase and StripAccents use Python's `unicodedata`, whose
  Unicode version (12.1 in Pyodide 0.17) is not the Rust crates'; Replace/Split regexes are read by
  Python's `re`, not Oniguruma. Metaspace's prepend_scheme "first" prepends to the first word of
  the input; `tokenizers` decides from character alignments, which differ when a normalizer that
  tracks them deletes leading characters (Strip, Nmt) or a pre-tokenizer before Metaspace splits
  one character's expansion ("½" -> "1", "⁄", "2"). WordPiece, WordLevel, byte-level and
  BERT-style components, truncation and fixed padding are refused with a ConfigError.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from ...errors import ConfigError
from .errors import FormatError
from .hf_tokenizer import HFTokenizer
from .sentencepiece import SentencePiece

KINDS = ("sentencepiece", "tokenizers")


class Tokenizer:
    """`Tokenizer.from_file(path)`, then `encode(text) -> ids`, `decode(ids) -> text`, `vocab_size`."""

    def __init__(self, backend: SentencePiece | HFTokenizer, kind: str, path: str):
        self._backend = backend
        self.kind = kind
        self.path = path

    @classmethod
    def from_file(cls, path: str) -> Tokenizer:
        """A SentencePiece `.model` or a `tokenizer.json` (told apart by the suffix, else the content)."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConfigError(f"tokenizer file not found or unreadable: {path} ({e.strerror})") from None
        looks_like_json = data.lstrip()[:1] == b"{"
        kind = "tokenizers" if str(path).endswith(".json") or looks_like_json else "sentencepiece"
        return cls.from_bytes(data, kind, name=str(path))

    @classmethod
    def from_bytes(cls, data: bytes, kind: str, name: str = "<bytes>") -> Tokenizer:
        """The same from file contents (e.g. handed over by a browser); `kind` is
        "sentencepiece" (a `.model`) or "tokenizers" (a `tokenizer.json`)."""
        if kind not in KINDS:
            raise ConfigError(f"tokenizer {name}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        try:
            backend = SentencePiece(bytes(data)) if kind == "sentencepiece" else HFTokenizer(bytes(data))
        except FormatError as e:
            raise ConfigError(f"cannot load tokenizer {name}: {e}") from None
        return cls(backend, kind, name)

    @property
    def vocab_size(self) -> int:
        return self._backend.vocab_size

    def encode(self, text: str) -> List[int]:
        return self._backend.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._backend.decode([int(i) for i in ids])

    def piece(self, token_id: int) -> str:
        """The text of a token id in the vocabulary ("<0xE2>" for a byte piece)."""
        return self._backend.piece(int(token_id))

    @property
    def offset_unit(self) -> str:
        """What `layout`'s offsets count: "byte" (UTF-8 bytes, as sentencepiece) or "codepoint"
        (characters, as `tokenizers`)."""
        return "byte" if self.kind == "sentencepiece" else "codepoint"

    def layout(self, text: str) -> List[Tuple[int, int, int]]:
        """(id, begin, end) of each token of `text`: the ids of `encode`, and the span of the text
        each comes from, in `offset_unit`s, as the library of its format reports it."""
        return self._backend.layout(text)
