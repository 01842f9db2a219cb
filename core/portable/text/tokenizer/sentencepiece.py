"""A sentencepiece `.model`: normalizer.cc, then the unigram or BPE model, as SentencePieceProcessor."""

from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .charsmap import CharsMap, utf8_char_len
from .errors import FormatError
from .model_proto import (
    BPE,
    BYTE,
    CONTROL,
    NORMAL,
    UNIGRAM,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    ModelProto,
    NormalizerSpec,
    Piece,
)
from .unigram import FLT_MAX, FLT_MIN, PieceIndex, best_path, f32

SPACE_SYMBOL = "\u2581"  # sentencepiece writes a space as U+2581 LOWER ONE EIGHTH BLOCK


class _SpmNormalizer:
    """sentencepiece's Normalizer::Normalize on UTF-8 bytes."""

    def __init__(self, spec: NormalizerSpec, user_symbols: Sequence[str]):
        self.charsmap = CharsMap(spec.charsmap) if spec.charsmap else None
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
        size = utf8_char_len(data[pos])
        return data[pos : pos + size], size

    def normalize(self, text: str) -> str:
        return self.normalize_aligned(text, None)

    def normalize_aligned(self, text: str, origins: Optional[List[int]]) -> str:
        """The normalized text; `origins` (when given) gets, for each of its UTF-8 bytes, the byte
        of `text` where what it came from starts, and the end last (norm_to_orig)."""
        data = text.encode("utf-8")
        pos, end = 0, len(data)
        if self.remove_extra_whitespaces:  # leading whitespace, after normalization, goes
            while pos < end:
                replaced, size = self._prefix(data, pos)
                if replaced != b" ":
                    break
                pos += size
        if pos == end:
            if origins is not None:
                origins.append(pos)
            return ""
        space = SPACE_SYMBOL.encode("utf-8") if self.escape_whitespaces else b" "
        out = bytearray()
        if self.add_dummy_prefix:
            out += space
            if origins is not None:
                origins.extend([pos] * len(space))
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
            if is_prev_space:
                replaced = replaced.lstrip(b" ")
            if replaced:
                written = replaced.replace(b" ", space) if self.escape_whitespaces else replaced
                out += written
                if origins is not None:
                    origins.extend([pos] * len(written))
                is_prev_space = replaced.endswith(b" ")
            pos += size
            if not self.remove_extra_whitespaces:
                is_prev_space = False
        if self.remove_extra_whitespaces:
            while out.endswith(space):
                del out[-len(space) :]
                if origins is not None:
                    pos = origins[len(out)]
                    del origins[len(out) :]
        if origins is not None:
            origins.append(pos)
        return out.decode("utf-8")


def _byte_piece_value(text: str) -> int:
    """0..255 for "<0x00>".."<0xFF>" (upper-case hex, as sentencepiece writes them), else -1."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        digits = text[3:5]
        if all(c in "0123456789ABCDEF" for c in digits):
            return int(digits, 16)
    return -1


class SentencePiece:
    """A sentencepiece `.model`: SentencePieceProcessor's Encode(text, ids) and Decode(ids)."""

    def __init__(self, data: bytes):
        proto = ModelProto(data)
        if proto.model_type not in (UNIGRAM, BPE):
            raise FormatError(f"model type {proto.model_type} is not supported (only unigram and BPE)")
        if proto.treat_whitespace_as_suffix:
            raise FormatError("treat_whitespace_as_suffix models are not supported")
        self.pieces = proto.pieces
        self.byte_fallback = proto.byte_fallback
        self.unk_surface = proto.unk_surface
        self.is_unigram = proto.model_type == UNIGRAM
        self._check_pieces()
        # NORMAL, USER_DEFINED and UNUSED pieces are matched in text; the others only by id.
        self.piece_ids: Dict[str, int] = {}
        self.reserved_ids: Dict[str, int] = {}
        for i, p in enumerate(self.pieces):
            target = self.piece_ids if p.type in (NORMAL, USER_DEFINED, UNUSED) else self.reserved_ids
            target[p.text] = i
        self.unk_id = next(i for i, p in enumerate(self.pieces) if p.type == UNKNOWN)
        self.byte_ids = {_byte_piece_value(p.text): i for i, p in enumerate(self.pieces) if p.type == BYTE}
        user = [p.text for p in self.pieces if p.type == USER_DEFINED]
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
                raise FormatError("a piece is empty")
            if "\0" in p.text:
                raise FormatError("a piece holds a NUL character")
            if p.text in seen:
                raise FormatError(f"piece {p.text!r} is defined twice")
            seen.add(p.text)
            if p.type not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
                raise FormatError(f"piece {p.text!r} has an unknown type {p.type}")
            unknown += p.type == UNKNOWN
            if p.type == BYTE:
                if not self.byte_fallback:
                    raise FormatError(f"byte piece {p.text!r} found although byte_fallback is off")
                value = _byte_piece_value(p.text)
                if value < 0:
                    raise FormatError(f"byte piece {p.text!r} is invalid")
                bytes_found.add(value)
        if unknown != 1:
            raise FormatError("the model needs exactly one unknown piece")
        if self.byte_fallback and len(bytes_found) != 256:
            raise FormatError("byte_fallback is on but the 256 byte pieces are not all there")

    # --- unigram: Model::EncodeOptimized ---

    def _init_unigram(self) -> None:
        normal = [p.score for p in self.pieces if p.type == NORMAL]
        min_score = min([FLT_MAX] + normal)
        max_score = max([FLT_MIN] + normal)
        self.unk_score = f32(min_score - 10.0)  # kUnkPenalty, in float arithmetic
        # UNUSED pieces stay out of the lattice. A user-defined symbol scores
        # (byte length * max score - 0.1): a bonus that makes it win.
        self.lattice_scores: Dict[int, float] = {}
        lattice_pieces: Dict[str, int] = {}
        for i, p in enumerate(self.pieces):
            if p.type == NORMAL:
                self.lattice_scores[i] = p.score
            elif p.type == USER_DEFINED:
                self.lattice_scores[i] = f32(f32(len(p.text.encode("utf-8")) * max_score) - 0.1)
            else:
                continue
            lattice_pieces[p.text] = i
        self.index = PieceIndex(lattice_pieces)

    def _unigram(self, text: str) -> List[Tuple[str, int]]:
        """The best segmentation, as (piece, id). Scores add up in float32, as in the C++ (ties,
        frequent with repeated pieces, go to the path found first)."""
        starts, ids = best_path(text, self.index, self.lattice_scores, self.unk_score, self.unk_id, float32=True)
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
            if self.pieces[piece_id].type == UNUSED:
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
            if self.pieces[piece_id].type == UNUSED and piece in split_of:
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
        return [piece_id for piece_id, _, _ in self.encode_with_offsets(text, None)]

    def piece(self, piece_id: int) -> str:
        return self.pieces[piece_id].text

    def layout(self, text: str) -> List[Tuple[int, int, int]]:
        """(id, begin, end) of each piece, begin and end in UTF-8 bytes of `text`, as
        SentencePieceProcessor's offset_mapping gives them: a piece covers what its normalized
        bytes came from (spaces before it included); a byte piece of an unknown character covers
        nothing but the last, which covers the character."""
        origins: List[int] = []
        return self.encode_with_offsets(text, origins)

    def encode_with_offsets(self, text: str, origins: Optional[List[int]]) -> List[Tuple[int, int, int]]:
        """The pieces (id, begin, end); begin and end are 0 unless `origins` is a list to fill."""
        normalized = self.normalizer.normalize_aligned(text, origins)
        if not normalized:
            return []
        pieces = self._unigram(normalized) if self.is_unigram else self._bpe(normalized)
        out: List[Tuple[int, int, int]] = []
        prev_unknown = False
        at = 0  # bytes of `normalized` before the piece
        for piece, piece_id in pieces:
            data = piece.encode("utf-8")
            begin, end = (origins[at], origins[at + len(data)]) if origins is not None else (0, 0)
            at += len(data)
            unknown = self.pieces[piece_id].type == UNKNOWN
            if unknown and self.byte_fallback:
                out.extend((self.byte_ids[b], begin, begin) for b in data[:-1])
                out.append((self.byte_ids[data[-1]], begin, end))
            elif unknown and prev_unknown:  # a run of unknown pieces is one unknown
                out[-1] = (piece_id, out[-1][1], end)
            else:
                out.append((piece_id, begin, end))
            prev_unknown = unknown
        return out

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
            if piece.type == BYTE:
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

    def _decode_piece(self, piece: Piece, is_bos_ws: bool) -> Tuple[str, bool]:
        """(surface, whether a leading U+2581 was consumed) of one non-byte piece."""
        if piece.type == CONTROL:
            return "", False
        if piece.type == UNKNOWN:
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
        size = utf8_char_len(data[pos])
        try:
            out.append(bytes(data[pos : pos + size]).decode("utf-8"))
            pos += size
        except UnicodeDecodeError:
            out.append("\ufffd")
            pos += 1
    return "".join(out)
