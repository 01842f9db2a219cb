"""The unigram model's Viterbi, shared by both libraries (scores in float32 for sentencepiece)."""

from __future__ import annotations

import itertools
import operator
import struct
from typing import Dict, List, Optional, Sequence, Set, Tuple

FLOAT32 = struct.Struct("<f")
FLT_MAX = 3.4028234663852886e38
FLT_MIN = 1.1754943508222875e-38  # smallest normal float32: sentencepiece's initial max score


def f32(x: float) -> float:
    """x rounded to the nearest float32, as a C++ `float` variable stores it."""
    return FLOAT32.unpack(FLOAT32.pack(x))[0]


class PieceIndex:
    """The pieces of a vocabulary and all their proper prefixes: walking a string from a position,
    the pieces that start there come shortest first, and the walk stops as soon as no longer piece
    can match (what the libraries' tries do)."""

    def __init__(self, pieces: Dict[str, int]):
        self.ids = pieces
        # Each piece's proper prefixes: the running concatenations of all but its last character,
        # made by C loops (english's 4,000 pieces have ~20,000: 3-4 ms of Python 3.8 here, a
        # comprehension 3-6 ms, and a browser worker makes them at every load).
        without_last = map(operator.itemgetter(slice(None, -1)), pieces)
        self.prefixes: Set[str] = set(itertools.chain.from_iterable(map(itertools.accumulate, without_last)))


def best_path(
    text: str, index: PieceIndex, scores: Sequence[float], unk_score: float, unk_id: Optional[int], float32: bool
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
    pack, unpack = FLOAT32.pack, FLOAT32.unpack  # f32, inlined: this is the hot loop
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
