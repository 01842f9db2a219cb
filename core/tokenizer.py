"""Text <-> token ids in pure Python, for SentencePiece `.model` files and HF `tokenizer.json` files.

The official package tokenizes with the `sentencepiece` library (a `.model` protobuf) or the
`tokenizers` library (a `tokenizer.json`). Neither runs in Pyodide, so this module re-implements
both, each loader reproducing its own library id for id:

- `.model`: the protobuf is read here; normalization follows sentencepiece's normalizer.cc (the
  precompiled charsmap, a darts-clone double-array trie, matched longest-first; dummy prefix,
  extra-whitespace removal, whitespace escaping, user-defined symbols), then the unigram model
  (the single-pass Viterbi of unigram_model.cc, scores rounded to float32 where the C++ does) or
  BPE (bpe_model.cc), unknown runs merged or split into byte pieces as sentencepiece_processor.cc.
- `tokenizer.json`: the `tokenizers` pipeline: added tokens, normalizers (Precompiled, Replace,
  Strip, Prepend, Nmt, NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Sequence), pre-tokenizers
  (Metaspace, WhitespaceSplit, Split, Digits, Sequence), Unigram or BPE models, the
  TemplateProcessing/Bert/Roberta post-processors and the Metaspace, ByteFallback, Fuse, Strip,
  Replace and Sequence decoders.

The two libraries disagree on a few inputs for "the same" tokenizer (control pieces typed as
text, trailing spaces, a combining mark after a character the charsmap rewrites: the Precompiled
normalizer of `tokenizers` works on grapheme clusters and keeps only the first rule that matches in
a short cluster); each loader follows its own library there.

Known limits (tests/test_tokenizer.py holds both loaders to their libraries on every fixture):
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

import base64
import bisect
import heapq
import json
import re
import struct
import unicodedata
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .errors import ConfigError, TextError

SPACE_SYMBOL = "\u2581"  # sentencepiece writes a space as U+2581 LOWER ONE EIGHTH BLOCK
KINDS = ("sentencepiece", "tokenizers")


class _FormatError(Exception):
    """A tokenizer file that cannot be used; the facade adds the file name."""


class Tokenizer:
    """`Tokenizer.from_file(path)`, then `encode(text) -> ids`, `decode(ids) -> text`, `vocab_size`."""

    def __init__(self, backend: _SentencePiece | _HFTokenizer, kind: str, path: str):
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
            backend = _SentencePiece(bytes(data)) if kind == "sentencepiece" else _HFTokenizer(bytes(data))
        except _FormatError as e:
            raise ConfigError(f"cannot load tokenizer {name}: {e}") from None
        return cls(backend, kind, name)

    @property
    def vocab_size(self) -> int:
        return self._backend.vocab_size

    def encode(self, text: str) -> List[int]:
        return self._backend.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._backend.decode([int(i) for i in ids])


# ---------------------------------------------------------------------------------------------
# Shared pieces: float32 rounding, the darts-clone double array, the precompiled charsmap
# ---------------------------------------------------------------------------------------------

_FLOAT32 = struct.Struct("<f")
_FLT_MAX = 3.4028234663852886e38
_FLT_MIN = 1.1754943508222875e-38  # smallest normal float32: sentencepiece's initial max score


def _f32(x: float) -> float:
    """x rounded to the nearest float32, as a C++ `float` variable stores it."""
    return _FLOAT32.unpack(_FLOAT32.pack(x))[0]


def _utf8_char_len(lead: int) -> int:
    if lead < 0x80:
        return 1
    if lead >> 5 == 0x6:
        return 2
    if lead >> 4 == 0xE:
        return 3
    if lead >> 3 == 0x1E:
        return 4
    return 1


def _unit_offset(unit: int) -> int:
    return (unit >> 10) << ((unit & 0x200) >> 6)


class _CharsMap:
    """sentencepiece's precompiled charsmap: <u32 trie size><darts-clone double array><NUL-separated
    replacement strings>. The trie maps UTF-8 byte strings to offsets in the replacement pool."""

    def __init__(self, blob: bytes):
        if len(blob) <= 4:
            raise _FormatError("the normalization charsmap is broken (too short)")
        trie_size = struct.unpack_from("<I", blob)[0]
        if trie_size >= len(blob) or trie_size % 4:
            raise _FormatError("the normalization charsmap is broken (bad trie size)")
        self._units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        pool = blob[4 + trie_size :]
        try:
            pool.decode("utf-8")
        except UnicodeDecodeError:
            raise _FormatError("the normalization charsmap holds invalid UTF-8") from None
        self._pool = pool
        self._replacements: Dict[int, bytes] = {}
        self._root = _unit_offset(self._units[0]) if self._units else 0
        self.first_bytes = {b for b in range(256) if self._child(self._root, b) >= 0}
        # For an ASCII first byte: (is it a key alone, the second bytes a longer key can have).
        # Most ASCII characters start no rule but some longer key (a letter + a combining mark),
        # so this tells, without walking, that no rule applies.
        self._ascii_rules: Dict[int, Tuple[bool, Set[int]]] = {}
        for b in self.first_bytes:
            if b < 0x80:
                unit = self._units[self._root ^ b]
                node = self._root ^ b ^ _unit_offset(unit)
                self._ascii_rules[b] = (bool(unit & 0x100), {c for c in range(256) if self._child(node, c) >= 0})

    def _child(self, node: int, byte: int) -> int:
        """The node reached from `node` by `byte` (after the xor with its offset), or -1."""
        child = node ^ byte
        if child >= len(self._units) or self._units[child] & 0x800000FF != byte:
            return -1
        return child

    def matches(self, key: bytes, start: int, stop_at_nul: bool) -> List[Tuple[int, int]]:
        """(end, value) of every key in the trie that is a prefix of key[start:], shortest first.

        darts' commonPrefixSearch: sentencepiece passes the length (a NUL byte is walked like any
        other), the Rust port in `tokenizers` stops at a NUL."""
        units, size = self._units, len(self._units)
        found = []
        node = self._root
        for i in range(start, len(key)):
            byte = key[i]
            if byte == 0 and stop_at_nul:
                break
            node ^= byte
            if node >= size:
                break
            unit = units[node]
            if unit & 0x800000FF != byte:  # the label: bit 31 (leaf value) or the child's byte
                break
            node ^= (unit >> 10) << ((unit & 0x200) >> 6)
            if unit & 0x100 and node < size:  # has a leaf: the value sits at the child
                found.append((i + 1, units[node] & 0x7FFFFFFF))
        return found

    def no_ascii_rule_at(self, key: bytes, start: int) -> bool:
        """Whether key[start] is an ASCII byte that no rule starts with (no walk needed)."""
        rules = self._ascii_rules.get(key[start])
        if rules is None:
            return key[start] < 0x80
        alone, second_bytes = rules
        return not alone and (start + 1 == len(key) or key[start + 1] not in second_bytes)

    def longest(self, key: bytes, start: int) -> Optional[Tuple[int, int]]:
        """The longest of `matches(key, start, stop_at_nul=False)`, or None."""
        if key[start] not in self.first_bytes:
            return None
        found = self.matches(key, start, stop_at_nul=False)
        return found[-1] if found else None

    def replacement(self, value: int) -> bytes:
        cached = self._replacements.get(value)
        if cached is None:
            end = self._pool.find(b"\0", value)
            cached = self._pool[value : end if end >= 0 else len(self._pool)]
            self._replacements[value] = cached
        return cached


# ---------------------------------------------------------------------------------------------
# SentencePiece: the ModelProto
# ---------------------------------------------------------------------------------------------

# ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_UNIGRAM, _BPE = 1, 2  # TrainerSpec.ModelType


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _FormatError("not a SentencePiece model (truncated protobuf)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _proto_fields(buf: bytes) -> Iterator[Tuple[int, object]]:
    """(field number, value) of a protobuf message: an int for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, pos = _varint(buf, pos)
            else:
                size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise _FormatError("not a SentencePiece model (truncated protobuf)")
            value = buf[pos : pos + size]
            pos += size
        else:
            raise _FormatError(f"not a SentencePiece model (protobuf wire type {wire})")
        if number == 0:
            raise _FormatError("not a SentencePiece model (protobuf field 0)")
        yield number, value


def _as_int32(value: object) -> int:
    n = int(value)  # type: ignore[call-overload]
    return n - (1 << 64) if n >= 1 << 63 else n


def _as_str(value: object, what: str) -> str:
    if not isinstance(value, bytes):
        raise _FormatError(f"not a SentencePiece model ({what} has the wrong wire type)")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _FormatError(f"not a SentencePiece model ({what} is not UTF-8)") from None


class _Piece:
    __slots__ = ("text", "score", "type")

    def __init__(self, text: str, score: float, type_: int):
        self.text = text
        self.score = score
        self.type = type_


class _NormalizerSpec:
    """NormalizerSpec: the charsmap and the three whitespace switches (proto2 defaults: all on)."""

    def __init__(self, buf: bytes):
        self.charsmap = b""
        self.add_dummy_prefix = True
        self.remove_extra_whitespaces = True
        self.escape_whitespaces = True
        for number, value in _proto_fields(buf):
            if number == 2 and isinstance(value, bytes):
                self.charsmap = value
            elif number == 3:
                self.add_dummy_prefix = bool(value)
            elif number == 4:
                self.remove_extra_whitespaces = bool(value)
            elif number == 5:
                self.escape_whitespaces = bool(value)


class _ModelProto:
    """The parts of sentencepiece's ModelProto that encoding and decoding read."""

    def __init__(self, data: bytes):
        self.pieces: List[_Piece] = []
        trainer, normalizer, denormalizer = b"", b"", b""
        # Repeated occurrences of a message field merge, which for these fields is concatenation.
        for number, value in _proto_fields(data):
            if not isinstance(value, bytes):
                if number in (1, 2, 3, 5):
                    raise _FormatError("not a SentencePiece model (unexpected protobuf field)")
                continue
            if number == 1:
                self.pieces.append(self._piece(value))
            elif number == 2:
                trainer += value
            elif number == 3:
                normalizer += value
            elif number == 5:
                denormalizer += value
        self.model_type = _UNIGRAM
        self.byte_fallback = False
        self.treat_whitespace_as_suffix = False
        self.unk_surface = " \u2047 "
        for number, value in _proto_fields(trainer):
            if number == 3:
                self.model_type = _as_int32(value)
            elif number == 35:
                self.byte_fallback = bool(value)
            elif number == 24:
                self.treat_whitespace_as_suffix = bool(value)
            elif number == 44:
                self.unk_surface = _as_str(value, "unk_surface")
        self.normalizer = _NormalizerSpec(normalizer)
        self.denormalizer = _NormalizerSpec(denormalizer) if denormalizer else None

    @staticmethod
    def _piece(buf: bytes) -> _Piece:
        text, score, type_ = "", 0.0, _NORMAL
        for number, value in _proto_fields(buf):
            if number == 1:
                text = _as_str(value, "a piece")
            elif number == 2:
                if not isinstance(value, bytes) or len(value) != 4:
                    raise _FormatError("not a SentencePiece model (a score is not a float)")
                score = _FLOAT32.unpack(value)[0]
            elif number == 3:
                type_ = _as_int32(value)
        return _Piece(text, score, type_)


# ---------------------------------------------------------------------------------------------
# SentencePiece: normalizer.cc
# ---------------------------------------------------------------------------------------------


class _SpmNormalizer:
    """sentencepiece's Normalizer::Normalize on UTF-8 bytes."""

    def __init__(self, spec: _NormalizerSpec, user_symbols: Sequence[str]):
        self.charsmap = _CharsMap(spec.charsmap) if spec.charsmap else None
        self.add_dummy_prefix = spec.add_dummy_prefix
        self.remove_extra_whitespaces = spec.remove_extra_whitespaces
        self.escape_whitespaces = spec.escape_whitespaces
        # User-defined symbols are copied as they are, the longest first (PrefixMatcher).
        self.user_symbols = sorted({s.encode("utf-8") for s in user_symbols}, key=len, reverse=True)
        self.user_first_bytes = {s[0] for s in self.user_symbols}

    def _prefix(self, data: bytes, pos: int) -> Tuple[bytes, int]:
        """NormalizePrefix: (replacement, bytes consumed) at data[pos:]."""
        if data[pos] in self.user_first_bytes:
            for symbol in self.user_symbols:
                if data.startswith(symbol, pos):
                    return symbol, len(symbol)
        if self.charsmap is not None:
            found = self.charsmap.longest(data, pos)  # the longest rule wins
            if found is not None:
                return self.charsmap.replacement(found[1]), found[0] - pos
        size = _utf8_char_len(data[pos])
        return data[pos : pos + size], size

    def normalize(self, text: str) -> str:
        data = text.encode("utf-8")
        pos, end = 0, len(data)
        if self.remove_extra_whitespaces:  # leading whitespace, after normalization, goes
            while pos < end:
                replaced, size = self._prefix(data, pos)
                if replaced != b" ":
                    break
                pos += size
        if pos == end:
            return ""
        space = SPACE_SYMBOL.encode("utf-8") if self.escape_whitespaces else b" "
        out = bytearray()
        if self.add_dummy_prefix:
            out += space
        is_prev_space = self.remove_extra_whitespaces
        charsmap, user_first_bytes = self.charsmap, self.user_first_bytes
        while pos < end:
            lead = data[pos]
            if (
                lead < 0x80
                and lead not in user_first_bytes
                and (charsmap is None or charsmap.no_ascii_rule_at(data, pos))
            ):
                replaced, size = data[pos : pos + 1], 1  # the common case, made fast
            else:
                replaced, size = self._prefix(data, pos)
            pos += size
            if is_prev_space:
                replaced = replaced.lstrip(b" ")
            if replaced:
                out += replaced.replace(b" ", space) if self.escape_whitespaces else replaced
                is_prev_space = replaced.endswith(b" ")
            if not self.remove_extra_whitespaces:
                is_prev_space = False
        if self.remove_extra_whitespaces:
            while out.endswith(space):
                del out[-len(space) :]
        return out.decode("utf-8")


# ---------------------------------------------------------------------------------------------
# SentencePiece: the models and the processor
# ---------------------------------------------------------------------------------------------


class _PieceIndex:
    """The pieces of a vocabulary and all their proper prefixes: walking a string from a position,
    the pieces that start there come shortest first, and the walk stops as soon as no longer piece
    can match (what the libraries' tries do)."""

    def __init__(self, pieces: Dict[str, int]):
        self.ids = pieces
        self.prefixes: Set[str] = set()
        for piece in pieces:
            for k in range(1, len(piece)):
                self.prefixes.add(piece[:k])


def _best_path(
    text: str, index: _PieceIndex, scores: Sequence[float], unk_score: float, unk_id: Optional[int], float32: bool
) -> Tuple[List[int], List[int]]:
    """The single-pass unigram Viterbi of both libraries (EncodeOptimized): for each end position,
    the start and id of the last piece of the best path ending there (start -1: unreachable).

    Candidates come by start position, then length; only a strictly better one replaces the best,
    so ties go to the path found first. A character no single piece covers gets an unknown piece
    scored unk_score. sentencepiece adds in float32, `tokenizers` in float64."""
    n = len(text)
    best_score = [0.0] * (n + 1)
    best_start = [-1] * (n + 1)
    best_id = [0] * (n + 1)
    pieces, prefixes = index.ids, index.prefixes
    pack, unpack = _FLOAT32.pack, _FLOAT32.unpack  # _f32, inlined: this is the hot loop
    for start in range(n):
        so_far = best_score[start]
        has_single = False
        end = start
        while end < n:  # the pieces starting here, shortest first
            end += 1
            piece = text[start:end]
            piece_id = pieces.get(piece)
            if piece_id is not None:
                candidate = scores[piece_id] + so_far
                if float32:
                    candidate = unpack(pack(candidate))[0]
                if best_start[end] == -1 or candidate > best_score[end]:
                    best_score[end] = candidate
                    best_start[end] = start
                    best_id[end] = piece_id
                has_single = has_single or end == start + 1
            if piece not in prefixes:
                break
        if not has_single and unk_id is not None:
            candidate = unk_score + so_far
            if float32:
                candidate = unpack(pack(candidate))[0]
            if best_start[start + 1] == -1 or candidate > best_score[start + 1]:
                best_score[start + 1] = candidate
                best_start[start + 1] = start
                best_id[start + 1] = unk_id
    return best_start, best_id


def _byte_piece_value(text: str) -> int:
    """0..255 for "<0x00>".."<0xFF>" (upper-case hex, as sentencepiece writes them), else -1."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        digits = text[3:5]
        if all(c in "0123456789ABCDEF" for c in digits):
            return int(digits, 16)
    return -1


class _SentencePiece:
    """A sentencepiece `.model`: SentencePieceProcessor's Encode(text, ids) and Decode(ids)."""

    def __init__(self, data: bytes):
        proto = _ModelProto(data)
        if proto.model_type not in (_UNIGRAM, _BPE):
            raise _FormatError(f"model type {proto.model_type} is not supported (only unigram and BPE)")
        if proto.treat_whitespace_as_suffix:
            raise _FormatError("treat_whitespace_as_suffix models are not supported")
        self.pieces = proto.pieces
        self.byte_fallback = proto.byte_fallback
        self.unk_surface = proto.unk_surface
        self.is_unigram = proto.model_type == _UNIGRAM
        self._check_pieces()
        # NORMAL, USER_DEFINED and UNUSED pieces are matched in text; the others only by id.
        self.piece_ids: Dict[str, int] = {}
        self.reserved_ids: Dict[str, int] = {}
        for i, p in enumerate(self.pieces):
            target = self.piece_ids if p.type in (_NORMAL, _USER_DEFINED, _UNUSED) else self.reserved_ids
            target[p.text] = i
        self.unk_id = next(i for i, p in enumerate(self.pieces) if p.type == _UNKNOWN)
        self.byte_ids = {_byte_piece_value(p.text): i for i, p in enumerate(self.pieces) if p.type == _BYTE}
        user = [p.text for p in self.pieces if p.type == _USER_DEFINED]
        self.normalizer = _SpmNormalizer(proto.normalizer, user)
        self.denormalizer = None
        if proto.denormalizer is not None and proto.denormalizer.charsmap:
            self.denormalizer = _SpmNormalizer(proto.denormalizer, ())
        self.add_dummy_prefix = proto.normalizer.add_dummy_prefix
        self.remove_extra_whitespaces = proto.normalizer.remove_extra_whitespaces
        self.user_symbols = set(user)
        if self.is_unigram:
            self._init_unigram()

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def _check_pieces(self) -> None:
        """The checks of ModelInterface::InitializePieces, so that a file sentencepiece rejects is
        rejected here too."""
        seen: Set[str] = set()
        unknown = 0
        bytes_found: Set[int] = set()
        for p in self.pieces:
            if not p.text:
                raise _FormatError("a piece is empty")
            if "\0" in p.text:
                raise _FormatError("a piece holds a NUL character")
            if p.text in seen:
                raise _FormatError(f"piece {p.text!r} is defined twice")
            seen.add(p.text)
            if p.type not in (_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE):
                raise _FormatError(f"piece {p.text!r} has an unknown type {p.type}")
            unknown += p.type == _UNKNOWN
            if p.type == _BYTE:
                if not self.byte_fallback:
                    raise _FormatError(f"byte piece {p.text!r} found although byte_fallback is off")
                value = _byte_piece_value(p.text)
                if value < 0:
                    raise _FormatError(f"byte piece {p.text!r} is invalid")
                bytes_found.add(value)
        if unknown != 1:
            raise _FormatError("the model needs exactly one unknown piece")
        if self.byte_fallback and len(bytes_found) != 256:
            raise _FormatError("byte_fallback is on but the 256 byte pieces are not all there")

    # --- unigram: Model::EncodeOptimized ---

    def _init_unigram(self) -> None:
        normal = [p.score for p in self.pieces if p.type == _NORMAL]
        min_score = min([_FLT_MAX] + normal)
        max_score = max([_FLT_MIN] + normal)
        self.unk_score = _f32(min_score - 10.0)  # kUnkPenalty, in float arithmetic
        # UNUSED pieces stay out of the lattice. A user-defined symbol scores
        # (byte length * max score - 0.1): a bonus that makes it win.
        self.lattice_scores: Dict[int, float] = {}
        lattice_pieces: Dict[str, int] = {}
        for i, p in enumerate(self.pieces):
            if p.type == _NORMAL:
                self.lattice_scores[i] = p.score
            elif p.type == _USER_DEFINED:
                self.lattice_scores[i] = _f32(_f32(len(p.text.encode("utf-8")) * max_score) - 0.1)
            else:
                continue
            lattice_pieces[p.text] = i
        self.index = _PieceIndex(lattice_pieces)

    def _unigram(self, text: str) -> List[Tuple[str, int]]:
        """The best segmentation, as (piece, id). Scores add up in float32, as in the C++ (ties,
        frequent with repeated pieces, go to the path found first)."""
        starts, ids = _best_path(text, self.index, self.lattice_scores, self.unk_score, self.unk_id, float32=True)
        result = []
        end = len(text)
        while end > 0:
            result.append((text[starts[end] : end], ids[end]))
            end = starts[end]
        result.reverse()
        return result

    # --- BPE: bpe::Model::SampleEncode without dropout ---

    def _bpe(self, text: str) -> List[Tuple[str, int]]:
        symbols = self._bpe_symbols(text)
        frozen = [s in self.user_symbols for s in symbols]
        n = len(symbols)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        agenda: List[Tuple[float, int, int, int]] = []  # (-score, left, right, length)
        split_of: Dict[str, Tuple[str, str]] = {}  # how an UNUSED piece was built

        def add_pair(left: int, right: int) -> None:
            if left == -1 or right == -1 or frozen[left] or frozen[right]:
                return
            merged = symbols[left] + symbols[right]
            piece_id = self.piece_ids.get(merged)
            if piece_id is None:
                return
            heapq.heappush(agenda, (-self.pieces[piece_id].score, left, right, len(merged)))
            if self.pieces[piece_id].type == _UNUSED:
                split_of[merged] = (symbols[left], symbols[right])

        for i in range(1, n):
            add_pair(i - 1, i)
        # Highest score first, then the leftmost pair; stale entries no longer fit their size.
        while agenda:
            _, left, right, length = heapq.heappop(agenda)
            if not symbols[left] or not symbols[right] or len(symbols[left]) + len(symbols[right]) != length:
                continue
            symbols[left] += symbols[right]
            symbols[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            add_pair(prev[left], left)
            add_pair(left, nxt[left])

        result: List[Tuple[str, int]] = []

        def resegment(piece: str) -> None:
            piece_id = self._piece_to_id(piece)
            if self.pieces[piece_id].type == _UNUSED and piece in split_of:
                left, right = split_of[piece]
                resegment(left)
                resegment(right)
            else:
                result.append((piece, piece_id))

        i = 0
        while i != -1:
            resegment(symbols[i])
            i = nxt[i]
        return result

    def _bpe_symbols(self, text: str) -> List[str]:
        """Characters, except that user-defined symbols (longest first) stay whole."""
        if not self.user_symbols:
            return list(text)
        symbols = []
        by_length = sorted(self.user_symbols, key=len, reverse=True)
        i = 0
        while i < len(text):
            symbol = next((s for s in by_length if text.startswith(s, i)), text[i])
            symbols.append(symbol)
            i += len(symbol)
        return symbols

    def _piece_to_id(self, piece: str) -> int:
        piece_id = self.reserved_ids.get(piece)
        if piece_id is None:
            piece_id = self.piece_ids.get(piece, self.unk_id)
        return piece_id

    # --- SentencePieceProcessor ---

    def encode(self, text: str) -> List[int]:
        normalized = self.normalizer.normalize(text)
        if not normalized:
            return []
        pieces = self._unigram(normalized) if self.is_unigram else self._bpe(normalized)
        ids: List[int] = []
        prev_unknown = False
        for piece, piece_id in pieces:
            unknown = self.pieces[piece_id].type == _UNKNOWN
            if unknown and self.byte_fallback:
                ids.extend(self.byte_ids[b] for b in piece.encode("utf-8"))
            elif not (unknown and prev_unknown):  # a run of unknown pieces is one unknown
                ids.append(piece_id)
            prev_unknown = unknown
        return ids

    def decode(self, ids: List[int]) -> str:
        for i in ids:
            if not 0 <= i < len(self.pieces):
                raise IndexError(f"piece id is out of range: {i}")
        parts: List[str] = []
        pending = bytearray()  # a run of byte pieces, decoded together
        is_bos_ws, bos_ws_seen = True, False  # still at the start, where a U+2581 is dropped
        text_started = False
        for i in ids:
            piece = self.pieces[i]
            if piece.type == _BYTE:
                pending.append(_byte_piece_value(piece.text))
                continue
            if pending:
                parts.append(_decode_bytes_spm(pending))
                pending = bytearray()
                text_started = True
            if bos_ws_seen or text_started:
                is_bos_ws = False
            decoded, bos_ws_seen = self._decode_piece(piece, is_bos_ws)
            parts.append(decoded)
            text_started = text_started or bool(decoded)
        if pending:
            parts.append(_decode_bytes_spm(pending))
        text = "".join(parts)
        if self.denormalizer is not None:
            text = self.denormalizer.normalize(text)
        return text

    def _decode_piece(self, piece: _Piece, is_bos_ws: bool) -> Tuple[str, bool]:
        """(surface, whether a leading U+2581 was consumed) of one non-byte piece."""
        if piece.type == _CONTROL:
            return "", False
        if piece.type == _UNKNOWN:
            return self.unk_surface, False
        text = piece.text
        consumed = False
        if is_bos_ws and (self.add_dummy_prefix or self.remove_extra_whitespaces):
            # The space the normalizer put in front of the text is not part of it; with
            # remove_extra_whitespaces every leading space piece goes.
            if text.startswith(SPACE_SYMBOL):
                text = text[1:]
                consumed = not self.remove_extra_whitespaces
        return text.replace(SPACE_SYMBOL, " "), consumed


def _decode_bytes_spm(data: bytearray) -> str:
    """UTF-8 with one U+FFFD per byte that does not start a valid character (sentencepiece)."""
    out = []
    pos = 0
    while pos < len(data):
        size = _utf8_char_len(data[pos])
        try:
            out.append(bytes(data[pos : pos + size]).decode("utf-8"))
            pos += size
        except UnicodeDecodeError:
            out.append("\ufffd")
            pos += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# tokenizers: grapheme clusters (for the Precompiled normalizer)
# ---------------------------------------------------------------------------------------------

# Grapheme_Cluster_Break of Unicode 17.0 (the version of the `unicode-segmentation` crate in
# `tokenizers`), as runs: <hex distance from the previous run start><class>. Classes: K Control,
# X Extend, Z ZWJ, S SpacingMark, P Prepend, Q Extended_Pictographic, L/V/T Hangul jamo, "." any
# other. CR, LF, Hangul syllables (LV/LVT) and regional indicators are recognized by code point.
# Made from the `regex` module's Unicode 18 tables, less the characters Unicode 17 did not have;
# tests/test_tokenizer.py checks every BMP character against `tokenizers` itself.
_GRAPHEME_RUNS = (
    "0Ka.1K2.1K12.5fK21.9Q1.3K1Q1.251X70.113X7.107X2d.1X1.1X2.1X2.1X1.38P6.aXb.1K1.2eX15.10X1.65X7P1."
    "1X6.2X2.1X4.21P1.1X1.1eX1b.5bXb.3aX9.9X1.18X4.1X9.1X3.1X5.2bX3.34P2.5X9.2aX18P1X20S1.36X1S1X1.1S"
    "3X8S4X1S2.1X7.aX2.1dX1S2.38X1.1X1S2X4.2S2.2S2X1.9X1.aX2.1aX1.2X2S1.38X1.1S3X2.4X2.2X3.3X1.1eX2.3"
    "X1.bX2S1.38X1.1S3X5.1X2S1.1S2X1.14X2.16X6.1X1S2.38X1.1X2S1X4.2S2.2S2X1.7X3.aX2.1eX1.3bX1S1X1S2.3"
    "S3.1S3X1.9X1.28X1S3X1.37X1.1X3S4.1X3.1X4.7X2.bX2.1dX1S2.38X1.1S1X2S1X1S2.1X3.1X4.7X2.bX2.fS1.cX2"
    "S2.37X2.1X1S2X4.1S3.1S3X1P1.8X1.aX2.1dX1S2.46X1.4X1S2X3.1X1.1S7X1.12S2.3dX1.1S1X7.cX8.62X1.1S1X9"
    ".bX7.49X2.1bX1.1X1.1X1.4S2.31XeS1X5.1X2.5Xb.1X24.9X1.66X4S1X6.1X2S2X2.17S2X2.4X3.10X4.dX1.1S1X2."
    "6X1.fX1.62L60V48T58.15dX3.3b2X4.1cX3.1dX2.1eX2.40X2S1X7S8X1S2Xb.9X1.2dX3K1X1.75X2.22X1.76X3S4X2S"
    "3.4S2X1S6X3.dbX2S2X1.39S1X1S1X7.1X1.1X1.2X8S6Xa.2X1.30X2e.2Xc.14X4S1.2fXaS4X3.26X9.cX2S1.1eS1X4S"
    "2X6.38X1S1X2S3X1S1X5.30S8X8S2X2.98X3.1XdS1X7.4X1.6X1.2S1X2.c6X40.20bK1X1Z1K2.18K7.dQ1.cQ1.16K10."
    "60X21.31Q1.16Q1.5aQ6.fQ2.16fQ2.cQ1.a6Q1.19Qb.4Q3.c7Q1.e7Q2.aQ1.9Q1.3aQ4.1Q5.9Q1.2Q1.2Q2.2Q1.4Q1."
    "2Q1.1Q2.2Q1.3Q1.3Q2.8Q3.5Q1.1Q1.5Qc.bQ2.2Q1.1Q2.1Q1.12Q1.2Q2.12Q6.1Q1.1Q2.3Q2.5Q1.2Q2.4Q2.bQ2.5Q"
    "2.2Q1.5Q2.1Q1.1Q2.14Q2.5Q6.1Q4.2Q1.4Q1.2Q1.2Q6.1Q1.2Q1.1Q1.1Q1.6Q1.3Q1.6Q1.aQ2.fQ1.2Q1.4Q1.1Q1.4"
    "Q3.1Q1.bQ2.30Q3.9Q1.eQ1.eQ1.174Q2.1cfQ3.13Q2.33Q1.4Q1.199X3.8dX1.60X20.22aX6Q1.cQ1.5bX2.1fcQ1.1Q"
    "1.73d5X4.1Xa.20X2.50X2.110X1.3X1.4X1.17S2X2S1.4X1.53S2.32S10X2.1aX12.dX1.26X8.19XbS1X1.cL1d.3X3S"
    "1.2fX1S2X4S2X2S2X1.24X1.43X6S2X2S2X2.cX1.8X1S1.2eX1.33X1.1X3.2X2.5X2.1X1.29S1X2S2.5S1X1.ecS2X1S2"
    "X1S2.1S1X1.2bc2V17.4T31.2322X1.2e1X10.10X10.cfK1.9eX2.50Kc.201X1.e2X1.95X5.686X3.1X2.5X4.28X3.4X"
    "1.a5X2.23dX4.41X5.13dX2.4dX6.46Xb.31X4.7aS1X1S1.35Xf.29X1.2X2.aX3S1.2dS3X4S2X2.2P1.4X1.aP1.32X3."
    "24X5S1X8.10S2.2cX1.cX2S1.30S3X9S1X1.1P2.5X4.1S1X1.5cS3X3S2X4.6X1.2X1.9dX1S3X8.15X2S2.37X2.1X1S1X"
    "1S4.2S2.2S2X1.9X1.aS2.2X7.3X5.43X1S2X6.1X1.2X1.1X3S1.1S2X3P1X1.eX2.52S3X8S2X3S1X1.17X1.51X1S2X6S"
    "1X1S2X1S1X2S1X2.ebX1S2X4.2S4X2S1X2.1bX2.52S3X8S2X1S1X2.6aX1S1X1S2X8.65X1S1X1.2X4S1X5.100S3X9S1X2"
    ".f5X1S5.1S2.2X4P1S1P1S1X1.8dS3X4.2X2S4X1.3S1.1cXa.28X6S1.1X4.8X1.9X6S2X3.28P6XdS1X2.c6X1S1X3S1X1"
    "S1.c7S1X7.1X6S1X1.52X16.1S1X7S1X2S1X2.7aX6.3X1.1X2.1X7P1X1.42S5.1X2.1S2X1S1X1.15bX2S2.9X2P1S1.30"
    "S2X5.3S2X3.17X1.14d5K10X1.6Xf.2cc8XcS3X3.9c0X5.3bX7.22cV1.3V4.1e4X1.1S37.7X4.51X1.bX2.4cabX2.1K4"
    ".125cX2e.2X17.21eX5.3X6K8X8.2X7.1eX4.94X3.7bbX37.4X32.8X1.eX1.16X5.1Xf.550X7.1X11.2X7.1X2.1X5.64"
    "X1.a0X7.177X1.3dX4.1fcX4.feX2.f3X1.2X1.7X2.5X1.1daX7.6dX7.6b9Q1.27Q4.64Qc.fQ2.fQ1.eQ2.25Qa.70Q2."
    "cQ2.eQ1.2Qa.14Q37.1bQf.aQ1.14Q1.2Q9.1Q4.9Q17.6Qbc.2Q70.2Q2.1Q3.2Q53.2Q3.1Q4X5Qfe.1Q3f.bQ6.1Q18.7"
    "Q2.2Q8.cQ1.2Q4.2Q1.4Q2.dQ2.2Q1.8Q2.9Q1.5Q3.cQ3.8Q3.2Q1.1Q1.4Q1.6Q1.3Q1.6Q56.30Q46.5Q8.2Q11.3Q1.1"
    "Q6.2Qd.dcQ15.1bQ4.38Q8.aQ6.28Q8.1eQ2.cQ4.2Qe.9Q27.cQ2f.1Qa.1Qb9.58Q8.eQ92.100Q3fe.c0002K20X60K80"
    "Xf0Ke10."
)

_GB_OTHER, _GB_CONTROL, _GB_EXTEND, _GB_ZWJ, _GB_SPACING, _GB_PREPEND, _GB_PICT = range(7)
_GB_CR, _GB_LF, _GB_RI, _GB_L, _GB_V, _GB_T, _GB_LV, _GB_LVT = range(7, 15)
_GB_CODES = {
    ".": _GB_OTHER,
    "K": _GB_CONTROL,
    "X": _GB_EXTEND,
    "Z": _GB_ZWJ,
    "S": _GB_SPACING,
    "P": _GB_PREPEND,
    "Q": _GB_PICT,
    "L": _GB_L,
    "V": _GB_V,
    "T": _GB_T,
}


def _parse_grapheme_runs(encoded: str) -> Tuple[List[int], List[int]]:
    starts: List[int] = []
    classes: List[int] = []
    position = 0
    for delta, code in re.findall(r"([0-9a-f]+)([^0-9a-f])", encoded):
        position += int(delta, 16)
        starts.append(position)
        classes.append(_GB_CODES[code])
    return starts, classes


_GB_STARTS, _GB_CLASSES = _parse_grapheme_runs(_GRAPHEME_RUNS)
_GB_CACHE: Dict[str, int] = {}


def _grapheme_class(ch: str) -> int:
    cls = _GB_CACHE.get(ch)
    if cls is None:
        cp = ord(ch)
        if cp == 0x0D:
            cls = _GB_CR
        elif cp == 0x0A:
            cls = _GB_LF
        elif 0xAC00 <= cp <= 0xD7A3:
            cls = _GB_LV if (cp - 0xAC00) % 28 == 0 else _GB_LVT
        elif 0x1F1E6 <= cp <= 0x1F1FF:
            cls = _GB_RI
        else:
            cls = _GB_CLASSES[bisect.bisect_right(_GB_STARTS, cp) - 1]
        _GB_CACHE[ch] = cls
    return cls


_GB_BREAKERS = (_GB_CONTROL, _GB_CR, _GB_LF)
_GB_JOINERS = (_GB_EXTEND, _GB_ZWJ, _GB_SPACING)


def _graphemes(text: str) -> List[str]:
    """Extended grapheme clusters (UAX #29), as the `unicode-segmentation` crate splits them.

    GB9c (Indic conjuncts) is left out: such a cluster is at least three 3-byte characters, and the
    Precompiled normalizer treats every cluster of 6 bytes or more character by character, so
    where it falls cannot change the output."""
    clusters: List[str] = []
    start = 0
    prev = -1
    emoji_zwj = False  # prev is a ZWJ that ends ExtPict Extend* ZWJ (GB11)
    in_emoji = False  # the text so far ends with ExtPict Extend*
    regional = 0  # regional indicators just before this character (GB12, GB13)
    for i, ch in enumerate(text):
        cls = _grapheme_class(ch)
        if i and _is_grapheme_break(prev, cls, emoji_zwj, regional):
            clusters.append(text[start:i])
            start = i
        emoji_zwj = cls == _GB_ZWJ and in_emoji
        in_emoji = cls == _GB_PICT or (cls == _GB_EXTEND and in_emoji)
        regional = regional + 1 if cls == _GB_RI else 0
        prev = cls
    if text:
        clusters.append(text[start:])
    return clusters


def _is_grapheme_break(prev: int, cls: int, emoji_zwj: bool, regional: int) -> bool:
    if prev == _GB_CR and cls == _GB_LF:  # GB3
        return False
    if prev in _GB_BREAKERS or cls in _GB_BREAKERS:  # GB4, GB5
        return True
    if prev == _GB_L and cls in (_GB_L, _GB_V, _GB_LV, _GB_LVT):  # GB6
        return False
    if prev in (_GB_LV, _GB_V) and cls in (_GB_V, _GB_T):  # GB7
        return False
    if prev in (_GB_LVT, _GB_T) and cls == _GB_T:  # GB8
        return False
    if cls in _GB_JOINERS or prev == _GB_PREPEND:  # GB9, GB9a, GB9b
        return False
    if cls == _GB_PICT and emoji_zwj:  # GB11
        return False
    if prev == _GB_RI and cls == _GB_RI and regional % 2 == 1:  # GB12, GB13
        return False
    return True


# ---------------------------------------------------------------------------------------------
# tokenizers: normalizers
# ---------------------------------------------------------------------------------------------

Normalizer = Callable[[str], str]

# Rust's char::is_whitespace (Unicode White_Space), which differs from str.isspace.
_RUST_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)


def _rust_strip(text: str, left: bool, right: bool) -> str:
    start, end = 0, len(text)
    while left and start < end and text[start] in _RUST_WHITESPACE:
        start += 1
    while right and end > start and text[end - 1] in _RUST_WHITESPACE:
        end -= 1
    return text[start:end]


class _PrecompiledNormalizer:
    """The Precompiled normalizer of `tokenizers`: per grapheme cluster shorter than 6 bytes, the
    shortest charsmap rule matching its start replaces the whole cluster; other clusters, and
    short ones no rule starts, are rewritten character by character."""

    def __init__(self, charsmap: _CharsMap):
        self.charsmap = charsmap
        self._chars: Dict[str, str] = {}
        self._ascii = {c: self._char(chr(c)) for c in range(128)}

    def _rewrite(self, chunk: str) -> Optional[str]:
        found = self.charsmap.matches(chunk.encode("utf-8"), 0, stop_at_nul=True)
        if not found:
            return None
        return self.charsmap.replacement(found[0][1]).decode("utf-8")

    def _char(self, ch: str) -> str:
        out = self._chars.get(ch)
        if out is None:
            rewritten = self._rewrite(ch)
            out = ch if rewritten is None else rewritten
            self._chars[ch] = out
        return out

    def _cluster(self, cluster: str) -> str:
        if len(cluster) > 1 and len(cluster.encode("utf-8")) < 6:
            rewritten = self._rewrite(cluster)
            if rewritten is not None:
                return rewritten
        return "".join(self._char(ch) for ch in cluster)

    def __call__(self, text: str) -> str:
        if text.isascii():  # ASCII characters never join a cluster, except CR LF
            return self._cluster("\r\n").join(part.translate(self._ascii) for part in text.split("\r\n"))
        return "".join(self._cluster(cluster) for cluster in _graphemes(text))


def _nmt(text: str) -> str:
    """The Nmt normalizer: drops ASCII controls, turns a few other code points into spaces."""
    out = []
    for ch in text:
        cp = ord(ch)
        if 0x01 <= cp <= 0x08 or cp == 0x0B or 0x0E <= cp <= 0x1F or cp in (0x7F, 0x8F, 0x9F):
            continue
        if cp in (0x09, 0x0A, 0x0C, 0x0D, 0x1680, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD) or 0x200B <= cp <= 0x200F:
            ch = " "
        out.append(ch)
    return "".join(out)


def _pattern_regex(spec: object, what: str) -> re.Pattern[str]:
    """A `{"String": s}` or `{"Regex": r}` pattern (Oniguruma syntax, read by Python's `re`)."""
    if isinstance(spec, dict) and len(spec) == 1:
        ((key, value),) = spec.items()
        if key == "String" and isinstance(value, str):
            return re.compile(re.escape(value))
        if key == "Regex" and isinstance(value, str):
            try:
                return re.compile(value)
            except re.error as e:
                raise _FormatError(f"{what}: regex {value!r} is not supported ({e})") from None
    raise _FormatError(f"{what}: a pattern must be {{'String': ...}} or {{'Regex': ...}}")


def _find_matches(regex: re.Pattern[str], text: str) -> List[Tuple[int, int]]:
    """Match spans as Oniguruma / Rust report them: unlike Python's `re` (3.7+), no empty match
    right where the previous match ended."""
    spans: List[Tuple[int, int]] = []
    for m in regex.finditer(text):
        start, end = m.span()
        if start == end and spans and spans[-1][1] == start and spans[-1][0] < start:
            continue
        spans.append((start, end))
    return spans


def _replacer(cfg: dict, what: str) -> Callable[[str], str]:
    """Replace: every match becomes the content, taken literally (no `$1` expansion)."""
    regex = _pattern_regex(cfg.get("pattern"), what)
    content = _get(cfg, "content", str, what)

    def replace(text: str) -> str:
        out = []
        done = 0
        for start, end in _find_matches(regex, text):
            out.append(text[done:start])
            out.append(content)
            done = end
        out.append(text[done:])
        return "".join(out)

    return replace


def _get(cfg: dict, key: str, kind: type, what: str, default: object = None) -> object:
    value = cfg.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _FormatError(f"{what}: {key!r} must be a {kind.__name__}")
    return value


def _build_normalizer(cfg: Optional[dict]) -> Optional[Normalizer]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "normalizer")
    what = f"normalizer {kind}"
    if kind == "Sequence":
        steps = [_build_normalizer(c) for c in _get(cfg, "normalizers", list, what)]
        chain = [s for s in steps if s is not None]

        def sequence(text: str) -> str:
            for step in chain:
                text = step(text)
            return text

        return sequence
    if kind == "Precompiled":
        blob = cfg.get("precompiled_charsmap")
        try:
            data = base64.b64decode(blob, validate=True) if isinstance(blob, str) else b""
        except ValueError:
            raise _FormatError("normalizer Precompiled: precompiled_charsmap is not base64") from None
        return _PrecompiledNormalizer(_CharsMap(data))
    if kind == "Replace":
        return _replacer(cfg, what)
    if kind == "Strip":
        left = bool(cfg.get("strip_left", True))
        right = bool(cfg.get("strip_right", True))
        return lambda text: _rust_strip(text, left, right)
    if kind == "Prepend":
        prefix = _get(cfg, "prepend", str, what)
        return lambda text: prefix + text if text else text
    if kind == "Nmt":
        return _nmt
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda text: unicodedata.normalize(kind, text)
    if kind == "Lowercase":
        return lambda text: text.lower()
    if kind == "StripAccents":
        return lambda text: "".join(c for c in text if not unicodedata.category(c).startswith("M"))
    raise _FormatError(f"normalizer type {kind!r} is not supported")


def _type_of(cfg: object, what: str) -> str:
    if not isinstance(cfg, dict) or not isinstance(cfg.get("type"), str):
        raise _FormatError(f"a {what} must be an object with a 'type'")
    return cfg["type"]


# ---------------------------------------------------------------------------------------------
# tokenizers: pre-tokenizers
# ---------------------------------------------------------------------------------------------

PreTokenizer = Callable[[str, bool], List[str]]  # (text, starts the input) -> words


def _char_segments(text: str, is_delimiter: Callable[[str], bool]) -> List[Tuple[int, int, bool]]:
    """(start, end, is_match) covering text, each delimiter character a match of its own."""
    segments = []
    last = 0
    for i, ch in enumerate(text):
        if is_delimiter(ch):
            if last < i:
                segments.append((last, i, False))
            segments.append((i, i + 1, True))
            last = i + 1
    if last < len(text):
        segments.append((last, len(text), False))
    return segments


def _regex_segments(text: str, regex: re.Pattern[str], invert: bool) -> List[Tuple[int, int, bool]]:
    segments = []
    last = 0
    for start, end in _find_matches(regex, text):
        if last < start:
            segments.append((last, start, invert))
        segments.append((start, end, not invert))
        last = end
    if last < len(text):
        segments.append((last, len(text), invert))
    return segments


def _split_segments(text: str, segments: List[Tuple[int, int, bool]], behavior: str) -> List[str]:
    """NormalizedString::split: how delimiters (is_match) join the pieces around them."""
    if behavior == "Removed":
        spans = [(s, e) for s, e, is_match in segments if not is_match]
    elif behavior == "Isolated":
        spans = [(s, e) for s, e, _ in segments]
    elif behavior == "MergedWithPrevious":
        spans = []
        previous_match = False
        for s, e, is_match in segments:
            if is_match and not previous_match and spans:
                spans[-1] = (spans[-1][0], e)
            else:
                spans.append((s, e))
            previous_match = is_match
    elif behavior == "MergedWithNext":
        spans = []
        previous_match = False
        for s, e, is_match in reversed(segments):
            if is_match and not previous_match and spans:
                spans[-1] = (s, spans[-1][1])
            else:
                spans.append((s, e))
            previous_match = is_match
        spans.reverse()
    elif behavior == "Contiguous":
        spans = []
        previous_match = False
        for s, e, is_match in segments:
            if is_match == previous_match and spans:
                spans[-1] = (spans[-1][0], e)
            else:
                spans.append((s, e))
            previous_match = is_match
    else:
        raise _FormatError(f"split behavior {behavior!r} is not supported")
    return [text[s:e] for s, e in spans if e > s]


def _metaspace_scheme(cfg: dict, what: str) -> str:
    if "prepend_scheme" in cfg:
        scheme = cfg["prepend_scheme"]
        if scheme not in ("always", "first", "never"):
            raise _FormatError(f"{what}: prepend_scheme {scheme!r} is not supported")
        return scheme
    return "always" if cfg.get("add_prefix_space", True) else "never"  # the older spelling


def _build_pre_tokenizer(cfg: Optional[dict]) -> Optional[PreTokenizer]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "pre_tokenizer")
    what = f"pre_tokenizer {kind}"
    if kind == "Sequence":
        steps = [_build_pre_tokenizer(c) for c in _get(cfg, "pretokenizers", list, what)]
        chain = [s for s in steps if s is not None]

        def sequence(text: str, at_start: bool) -> List[str]:
            words = [text]
            for step in chain:
                # Only the first word of the input still starts it (Metaspace's "first" scheme).
                words = [w for k, word in enumerate(words) for w in step(word, at_start and k == 0)]
            return words

        return sequence
    if kind == "Metaspace":
        replacement = _get(cfg, "replacement", str, what)
        if len(replacement) != 1:
            raise _FormatError(f"{what}: the replacement must be one character")
        scheme = _metaspace_scheme(cfg, what)
        split = bool(cfg.get("split", True))

        def metaspace(text: str, at_start: bool) -> List[str]:
            text = text.replace(" ", replacement)
            prepend = scheme == "always" or (scheme == "first" and at_start)
            if prepend and text and not text.startswith(replacement):
                text = replacement + text
            if not split:
                return [text] if text else []
            return _split_segments(text, _char_segments(text, lambda c: c == replacement), "MergedWithNext")

        return metaspace
    if kind == "WhitespaceSplit":
        return lambda text, _: _split_segments(text, _char_segments(text, _RUST_WHITESPACE.__contains__), "Removed")
    if kind == "Digits":
        behavior = "Isolated" if cfg.get("individual_digits", False) else "Contiguous"

        def is_numeric(c: str) -> bool:  # Rust's char::is_numeric
            return unicodedata.category(c) in ("Nd", "Nl", "No")

        return lambda text, _: _split_segments(text, _char_segments(text, is_numeric), behavior)
    if kind == "Split":
        regex = _pattern_regex(cfg.get("pattern"), what)
        behavior = _get(cfg, "behavior", str, what)
        invert = bool(cfg.get("invert", False))
        _split_segments("", [], behavior)  # reject an unknown behavior now
        return lambda text, _: _split_segments(text, _regex_segments(text, regex, invert), behavior)
    raise _FormatError(f"pre_tokenizer type {kind!r} is not supported")


# ---------------------------------------------------------------------------------------------
# tokenizers: models
# ---------------------------------------------------------------------------------------------


def _byte_token(byte: int) -> str:
    return f"<0x{byte:02X}>"


class _HFUnigram:
    """models::unigram::Unigram: the single-pass Viterbi in float64, unknown runs fused into one
    token, then byte fallback for tokens the vocabulary lacks."""

    def __init__(self, cfg: dict):
        vocab = _get(cfg, "vocab", list, "model Unigram")
        self.tokens: List[str] = []
        self.scores: List[float] = []
        for entry in vocab:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                raise _FormatError("model Unigram: each vocab entry must be [token, score]")
            self.tokens.append(entry[0])
            self.scores.append(float(entry[1]))
        self.token_to_id = {token: i for i, token in enumerate(self.tokens)}  # the last one wins
        unk_id = cfg.get("unk_id")
        if unk_id is not None and not (isinstance(unk_id, int) and 0 <= unk_id < len(self.tokens)):
            raise _FormatError("model Unigram: unk_id is not in the vocabulary")
        self.unk_id: Optional[int] = unk_id
        self.byte_fallback = bool(cfg.get("byte_fallback", False))
        self.unk_score = min(self.scores, default=float("inf")) - 10.0
        self.index = _PieceIndex({t: self.token_to_id[t] for t in self.tokens if t})

    @property
    def vocab(self) -> Set[str]:
        return set(self.token_to_id)

    def id_to_token(self, token_id: int) -> Optional[str]:
        return self.tokens[token_id] if 0 <= token_id < len(self.tokens) else None

    def _segment(self, text: str) -> List[str]:
        """The best path's pieces, each run of unknown pieces fused into one."""
        best_start, best_id = _best_path(text, self.index, self.scores, self.unk_score, self.unk_id, float32=False)
        n = len(text)
        pieces: List[str] = []
        unknown_run: List[str] = []
        end = n
        while end > 0:
            start = best_start[end]
            if start < 0:
                raise TextError("the tokenizer met an unknown character but has no unk_id")
            if best_id[end] == self.unk_id:
                unknown_run.append(text[start:end])
            else:
                if unknown_run:
                    pieces.append("".join(reversed(unknown_run)))
                    unknown_run = []
                pieces.append(text[start:end])
            end = start
        if unknown_run:
            pieces.append("".join(reversed(unknown_run)))
        pieces.reverse()
        return pieces

    def tokenize(self, word: str) -> List[int]:
        ids: List[int] = []
        for piece in self._segment(word):
            token_id = self.token_to_id.get(piece)
            if token_id is None and self.byte_fallback:
                byte_ids = [self.token_to_id.get(_byte_token(b)) for b in piece.encode("utf-8")]
                if all(i is not None for i in byte_ids):
                    ids.extend(byte_ids)  # type: ignore[arg-type]
                    continue
            if token_id is None:
                if self.unk_id is None:
                    raise TextError("the tokenizer met an unknown token but has no unk_id")
                token_id = self.unk_id
            ids.append(token_id)
        return ids


class _HFBpe:
    """models::bpe::BPE: characters (or byte tokens, or a fused unknown), then the merges applied
    lowest rank first, leftmost first among equals."""

    def __init__(self, cfg: dict):
        what = "model BPE"
        vocab = _get(cfg, "vocab", dict, what)
        if not all(isinstance(i, int) for i in vocab.values()):
            raise _FormatError(f"{what}: vocab ids must be integers")
        self.vocab: Dict[str, int] = dict(vocab)
        self.vocab_r = {i: token for token, i in self.vocab.items()}
        dropout = cfg.get("dropout")
        if dropout not in (None, 0, 0.0):
            raise _FormatError(f"{what}: dropout makes encoding random and is not supported")
        self.unk_token = cfg.get("unk_token")
        self.prefix = cfg.get("continuing_subword_prefix") or ""
        self.suffix = cfg.get("end_of_word_suffix") or ""
        self.fuse_unk = bool(cfg.get("fuse_unk", False))
        self.byte_fallback = bool(cfg.get("byte_fallback", False))
        self.ignore_merges = bool(cfg.get("ignore_merges", False))
        self.merges: Dict[Tuple[int, int], Tuple[int, int]] = {}
        for rank, merge in enumerate(_get(cfg, "merges", list, what, [])):
            if isinstance(merge, str):
                parts = merge.split(" ")
            elif isinstance(merge, list):
                parts = merge
            else:
                parts = []
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                raise _FormatError(f"{what}: merge {rank + 1} is not a pair of tokens")
            left, right = parts
            merged = left + right[len(self.prefix) :]
            for token in (left, right, merged):
                if token not in self.vocab:
                    raise _FormatError(f"{what}: merge token {token!r} is not in the vocabulary")
            self.merges[(self.vocab[left], self.vocab[right])] = (rank, self.vocab[merged])

    def id_to_token(self, token_id: int) -> Optional[str]:
        return self.vocab_r.get(token_id)

    def _unk_id(self) -> int:
        if self.unk_token not in self.vocab:
            raise TextError(f"the tokenizer's unknown token {self.unk_token!r} is not in its vocabulary")
        return self.vocab[self.unk_token]

    def _symbols(self, word: str) -> List[int]:
        """BPE::merge_word before merging."""
        ids: List[int] = []
        unk: Optional[int] = None  # a pending unknown token, fused with the next if fuse_unk
        last = len(word) - 1
        for i, ch in enumerate(word):
            token = (self.prefix if i else "") + ch + (self.suffix if i == last else "")
            token_id = self.vocab.get(token)
            if token_id is not None:
                if unk is not None:
                    ids.append(unk)
                    unk = None
                ids.append(token_id)
                continue
            if self.byte_fallback:
                byte_ids = [self.vocab.get(_byte_token(b)) for b in token.encode("utf-8")]
                if all(b is not None for b in byte_ids):
                    ids.extend(byte_ids)  # type: ignore[arg-type]
                    continue  # (a pending unknown stays pending, as in the Rust)
            if self.unk_token is not None:
                if unk is not None and not self.fuse_unk:
                    ids.append(unk)
                    unk = None
                if unk is None:
                    unk = self._unk_id()
        if unk is not None:
            ids.append(unk)
        return ids

    def tokenize(self, word: str) -> List[int]:
        if not word:
            return []
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        ids = self._symbols(word)
        n = len(ids)
        nxt = list(range(1, n + 1))
        if n:
            nxt[-1] = -1
        prev = list(range(-1, n - 1))
        alive = [True] * n
        merges = self.merges
        queue = []  # (rank, position, new id)
        for i in range(n - 1):
            m = merges.get((ids[i], ids[i + 1]))
            if m is not None:
                queue.append((m[0], i, m[1]))
        heapq.heapify(queue)
        while queue:
            _, pos, new_id = heapq.heappop(queue)
            right = nxt[pos]
            if not alive[pos] or right == -1:
                continue
            m = merges.get((ids[pos], ids[right]))
            if m is None or m[1] != new_id:  # an expired entry
                continue
            ids[pos] = new_id
            alive[right] = False
            nxt[pos] = nxt[right]
            if nxt[right] != -1:
                prev[nxt[right]] = pos
            if prev[pos] >= 0:
                m = merges.get((ids[prev[pos]], new_id))
                if m is not None:
                    heapq.heappush(queue, (m[0], prev[pos], m[1]))
            if nxt[pos] != -1:
                m = merges.get((new_id, ids[nxt[pos]]))
                if m is not None:
                    heapq.heappush(queue, (m[0], pos, m[1]))
        return [token_id for token_id, keep in zip(ids, alive) if keep]


# ---------------------------------------------------------------------------------------------
# tokenizers: post-processors and decoders
# ---------------------------------------------------------------------------------------------


def _build_post_processor(cfg: Optional[dict]) -> Callable[[List[int]], List[int]]:
    """What `encode(text)` (add_special_tokens=True) adds around the ids of one sequence."""
    if cfg is None:
        return lambda ids: ids
    kind = _type_of(cfg, "post_processor")
    what = f"post_processor {kind}"
    if kind == "ByteLevel":
        return lambda ids: ids  # offsets only
    if kind == "Sequence":
        steps = [_build_post_processor(c) for c in _get(cfg, "processors", list, what)]

        def sequence(ids: List[int]) -> List[int]:
            for step in steps:
                ids = step(ids)
            return ids

        return sequence
    if kind in ("BertProcessing", "RobertaProcessing"):
        cls_id, sep_id = (_get(cfg, key, list, what)[1] for key in ("cls", "sep"))
        return lambda ids: [cls_id] + ids + [sep_id]
    if kind == "TemplateProcessing":
        special = _get(cfg, "special_tokens", dict, what, {})
        before: List[int] = []
        after: List[int] = []
        seen_sequence = False
        for item in _get(cfg, "single", list, what):
            if isinstance(item, dict) and "Sequence" in item:
                seen_sequence = True
            elif isinstance(item, dict) and "SpecialToken" in item:
                name = item["SpecialToken"].get("id")
                if name not in special:
                    raise _FormatError(f"{what}: special token {name!r} is not defined")
                (after if seen_sequence else before).extend(special[name]["ids"])
            else:
                raise _FormatError(f"{what}: unexpected template item {item!r}")
        return lambda ids: before + ids + after
    raise _FormatError(f"post_processor type {kind!r} is not supported")


Decoder = Callable[[List[str]], List[str]]  # decode_chain


def _decode_byte_fallback(tokens: List[str]) -> List[str]:
    """<0xNN> runs become text; a run that is not valid UTF-8 becomes one U+FFFD per byte."""
    out: List[str] = []
    run = bytearray()

    def flush() -> None:
        if run:
            try:
                out.append(bytes(run).decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" for _ in run)
            run.clear()

    for token in tokens:
        value = -1
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            digits = token[3:5]  # u8::from_str_radix, which takes a "+" sign too
            if all(c in "0123456789abcdefABCDEF" for c in digits.lstrip("+")) and digits != "++":
                value = int(digits, 16)
        if value >= 0:
            run.append(value)
        else:
            flush()
            out.append(token)
    flush()
    return out


def _strip_decoder(content: str, start: int, stop: int) -> Decoder:
    def strip(tokens: List[str]) -> List[str]:
        out = []
        for token in tokens:
            begin = 0
            while begin < min(start, len(token)) and token[begin] == content:
                begin += 1
            end = len(token)
            for _ in range(min(stop, len(token) - begin)):
                if token[end - 1] != content:
                    break
                end -= 1
            out.append(token[begin:end])
        return out

    return strip


def _build_decoder(cfg: Optional[dict]) -> Optional[Decoder]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "decoder")
    what = f"decoder {kind}"
    if kind == "Sequence":
        steps = [_build_decoder(c) for c in _get(cfg, "decoders", list, what)]
        chain = [s for s in steps if s is not None]

        def sequence(tokens: List[str]) -> List[str]:
            for step in chain:
                tokens = step(tokens)
            return tokens

        return sequence
    if kind == "Metaspace":
        replacement = _get(cfg, "replacement", str, what)
        drop_first = _metaspace_scheme(cfg, what) != "never"

        def metaspace(tokens: List[str]) -> List[str]:
            # Every replacement character of the first token goes, not only a leading one.
            return [t.replace(replacement, "" if i == 0 and drop_first else " ") for i, t in enumerate(tokens)]

        return metaspace
    if kind == "ByteFallback":
        return _decode_byte_fallback
    if kind == "Fuse":
        return lambda tokens: ["".join(tokens)]
    if kind == "Strip":
        content = _get(cfg, "content", str, what)
        if len(content) != 1:
            raise _FormatError(f"{what}: content must be one character")
        return _strip_decoder(content, int(_get(cfg, "start", int, what)), int(_get(cfg, "stop", int, what)))
    if kind == "Replace":
        replace = _replacer(cfg, what)
        return lambda tokens: [replace(t) for t in tokens]
    raise _FormatError(f"decoder type {kind!r} is not supported")


# ---------------------------------------------------------------------------------------------
# tokenizers: added tokens and the Tokenizer
# ---------------------------------------------------------------------------------------------


class _AddedToken:
    __slots__ = ("content", "id", "single_word", "lstrip", "rstrip", "normalized", "special")

    def __init__(self, cfg: dict, token_id: int):
        self.content: str = cfg["content"]
        self.id = token_id
        self.single_word = bool(cfg.get("single_word", False))
        self.lstrip = bool(cfg.get("lstrip", False))
        self.rstrip = bool(cfg.get("rstrip", False))
        self.normalized = bool(cfg.get("normalized", not cfg.get("special", False)))
        self.special = bool(cfg.get("special", False))


class _AddedMatcher:
    """Leftmost-longest search for added tokens (the aho-corasick automaton of AddedVocabulary),
    with the single_word / lstrip / rstrip rules of `find_matches`."""

    def __init__(self, tokens: List[Tuple[str, _AddedToken]]):
        self.tokens: Dict[str, _AddedToken] = {}
        for pattern, token in tokens:
            if pattern:
                self.tokens.setdefault(pattern, token)
        # Longest first: at one position, Python's alternation then takes the longest.
        alternatives = sorted(self.tokens, key=len, reverse=True)
        self.regex = re.compile("|".join(re.escape(p) for p in alternatives)) if alternatives else None

    def split(self, text: str) -> List[Tuple[str, Optional[int]]]:
        """The text cut into (piece, None) and (matched token text, token id)."""
        if self.regex is None or not text:
            return [(text, None)]
        out: List[Tuple[str, Optional[int]]] = []
        done = 0
        for m in self.regex.finditer(text):
            token = self.tokens[m.group()]
            start, stop = m.start(), m.end()
            if token.single_word:
                before_ok = start == 0 or not _ends_with_word(text[:start])
                after_ok = stop == len(text) or not _starts_with_word(text[stop:])
                if not (before_ok and after_ok):
                    continue
            if token.lstrip:
                while start > done and text[start - 1] in _RUST_WHITESPACE:
                    start -= 1
            if token.rstrip:
                while stop < len(text) and text[stop] in _RUST_WHITESPACE:
                    stop += 1
            if done < start:
                out.append((text[done:start], None))
            out.append((text[start:stop], token.id))
            done = stop
        if done < len(text):
            out.append((text[done:], None))
        return out


def _is_word_char(ch: str) -> bool:
    """Rust regex's Unicode \\w: Alphabetic, marks, decimal digits, connectors, joiners."""
    category = unicodedata.category(ch)
    if category[0] in "LM" or category in ("Nd", "Nl", "Pc") or ch in "\u200c\u200d":
        return True
    cp = ord(ch)  # symbols that are Other_Alphabetic: circled and squared Latin letters
    return 0x24B6 <= cp <= 0x24E9 or 0x1F130 <= cp <= 0x1F149 or 0x1F150 <= cp <= 0x1F169 or 0x1F170 <= cp <= 0x1F189


def _ends_with_word(text: str) -> bool:
    return bool(text) and _is_word_char(text[-1])


def _starts_with_word(text: str) -> bool:
    return bool(text) and _is_word_char(text[0])


class _HFTokenizer:
    """A `tokenizer.json`: Tokenizer::encode(text, add_special_tokens=True).ids and
    Tokenizer::decode(ids, skip_special_tokens=True)."""

    def __init__(self, data: bytes):
        try:
            cfg = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise _FormatError(f"not a tokenizer.json ({e})") from None
        if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
            raise _FormatError("not a tokenizer.json (no 'model' object)")
        if cfg.get("truncation") is not None:
            raise _FormatError("truncation is not supported")
        padding = cfg.get("padding")
        if padding is not None and not (isinstance(padding, dict) and padding.get("strategy") == "BatchLongest"):
            raise _FormatError("fixed-length padding is not supported")
        model_cfg = cfg["model"]
        kind = model_cfg.get("type") or ("Unigram" if isinstance(model_cfg.get("vocab"), list) else "BPE")
        if kind == "Unigram":
            self.model: _HFUnigram | _HFBpe = _HFUnigram(model_cfg)
            model_vocab = self.model.vocab
        elif kind == "BPE":
            self.model = _HFBpe(model_cfg)
            model_vocab = set(self.model.vocab)
        else:
            raise _FormatError(f"model type {kind!r} is not supported (only Unigram and BPE)")
        self.normalizer = _build_normalizer(cfg.get("normalizer"))
        self.pre_tokenizer = _build_pre_tokenizer(cfg.get("pre_tokenizer"))
        self.decoder = _build_decoder(cfg.get("decoder"))
        self._init_added_tokens(cfg.get("added_tokens") or [], model_vocab)
        self.post_process = _build_post_processor(cfg.get("post_processor"))
        self.vocab_size = len(model_vocab | set(self.added_ids))

    def _init_added_tokens(self, entries: list, model_vocab: Set[str]) -> None:
        self.added_ids: Dict[str, int] = {}
        self.added_by_id: Dict[int, str] = {}
        self.special: Set[str] = set()
        tokens: List[_AddedToken] = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
                raise _FormatError("added_tokens: each entry needs a 'content'")
            content = entry["content"]
            if not content:
                continue
            model_id = self._model_id(content) if content in model_vocab else None
            token_id = model_id if model_id is not None else entry.get("id")
            if not isinstance(token_id, int):
                raise _FormatError(f"added_tokens: {content!r} has no id")
            token = _AddedToken(entry, token_id)
            tokens.append(token)
            self.added_ids[content] = token_id
            self.added_by_id[token_id] = content
            if token.special:
                self.special.add(content)
        # Special tokens are matched before the others (refresh_added_tokens).
        ordered = [t for t in tokens if t.special] + [t for t in tokens if not t.special]
        self.raw_matcher = _AddedMatcher([(t.content, t) for t in ordered if not t.normalized])
        normalize = self.normalizer or (lambda text: text)
        self.normalized_matcher = _AddedMatcher([(normalize(t.content), t) for t in ordered if t.normalized])

    def _model_id(self, token: str) -> Optional[int]:
        if isinstance(self.model, _HFBpe):
            return self.model.vocab.get(token)
        return self.model.token_to_id.get(token)

    def _splits(self, text: str) -> Iterator[Tuple[str, Optional[int], bool]]:
        """(normalized piece, added token id or None, whether it starts the input)."""
        offset = 0
        for piece, token_id in self.raw_matcher.split(text):
            at_start = offset == 0
            offset += len(piece)
            if token_id is not None:
                yield piece, token_id, at_start
                continue
            normalized = self.normalizer(piece) if self.normalizer is not None else piece
            for k, (part, part_id) in enumerate(self.normalized_matcher.split(normalized)):
                if part:
                    yield part, part_id, at_start and k == 0

    def encode(self, text: str) -> List[int]:
        ids: List[int] = []
        for piece, token_id, at_start in self._splits(text):
            if token_id is not None:
                ids.append(token_id)
                continue
            words = self.pre_tokenizer(piece, at_start) if self.pre_tokenizer is not None else [piece]
            for word in words:
                if word:
                    ids.extend(self.model.tokenize(word))
        return self.post_process(ids)

    def decode(self, ids: List[int]) -> str:
        tokens = []
        for token_id in ids:
            token = self.added_by_id.get(token_id)
            if token is None:
                token = self.model.id_to_token(token_id)
            if token is None or token in self.special:  # unknown ids are skipped, as are specials
                continue
            tokens.append(token)
        if self.decoder is None:
            return " ".join(tokens)
        return "".join(self.decoder(tokens))
