"""sentencepiece's ModelProto (the `.model` file), read from the protobuf wire format."""

from __future__ import annotations

import struct
from typing import Iterator, List, Tuple

from .errors import FormatError

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2  # TrainerSpec.ModelType


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise FormatError("not a SentencePiece model (truncated protobuf)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _proto_fields(buf: bytes) -> Iterator[Tuple[int, object]]:
    """(field number, value) of a protobuf message: an int for varints, bytes otherwise."""
    # A vocabulary is thousands of small messages read at every start (the page's too): keys and
    # lengths of one byte, nearly all of them, are read here rather than by _varint.
    pos, end = 0, len(buf)
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError("not a SentencePiece model (protobuf field 0)")
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, value
            continue
        if wire == 2:
            if pos < end and buf[pos] < 0x80:
                size = buf[pos]
                pos += 1
            else:
                size, pos = _varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise FormatError(f"not a SentencePiece model (protobuf wire type {wire})")
        if pos + size > end:
            raise FormatError("not a SentencePiece model (truncated protobuf)")
        yield number, buf[pos : pos + size]
        pos += size


def _as_int32(value: object) -> int:
    n = int(value)  # type: ignore[call-overload]
    return n - (1 << 64) if n >= 1 << 63 else n


def _as_str(value: object, what: str) -> str:
    if not isinstance(value, bytes):
        raise FormatError(f"not a SentencePiece model ({what} has the wrong wire type)")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"not a SentencePiece model ({what} is not UTF-8)") from None


class Piece:
    __slots__ = ("text", "score", "type")

    def __init__(self, text: str, score: float, type_: int):
        self.text = text
        self.score = score
        self.type = type_


class NormalizerSpec:
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


class ModelProto:
    """The parts of sentencepiece's ModelProto that encoding and decoding read."""

    def __init__(self, data: bytes):
        self.pieces: List[Piece] = []
        trainer, normalizer, denormalizer = b"", b"", b""
        # Repeated occurrences of a message field merge, which for these fields is concatenation.
        for number, value in _proto_fields(data):
            if not isinstance(value, bytes):
                if number in (1, 2, 3, 5):
                    raise FormatError("not a SentencePiece model (unexpected protobuf field)")
                continue
            if number == 1:
                self.pieces.append(self._piece(value))
            elif number == 2:
                trainer += value
            elif number == 3:
                normalizer += value
            elif number == 5:
                denormalizer += value
        self.model_type = UNIGRAM
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
        self.normalizer = NormalizerSpec(normalizer)
        self.denormalizer = NormalizerSpec(denormalizer) if denormalizer else None

    @staticmethod
    def _piece(buf: bytes) -> Piece:
        text, score, type_ = "", 0.0, NORMAL
        for number, value in _proto_fields(buf):
            if number == 1:
                text = _as_str(value, "a piece")
            elif number == 2:
                if not isinstance(value, bytes) or len(value) != 4:
                    raise FormatError("not a SentencePiece model (a score is not a float)")
                score = struct.unpack("<f", value)[0]
            elif number == 3:
                type_ = _as_int32(value)
        return Piece(text, score, type_)
