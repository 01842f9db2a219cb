"""Extended grapheme clusters (UAX #29), as the `unicode-segmentation` crate of `tokenizers` splits
them (for its Precompiled normalizer)."""

from __future__ import annotations

import bisect
import re
from typing import Dict, List, Tuple

# Grapheme_Cluster_Break of Unicode 17.0 (the version of the `unicode-segmentation` crate in
# `tokenizers`), as runs: <hex distance from the previous run start><class>. Classes: K Control,
# X Extend, Z ZWJ, S SpacingMark, P Prepend, Q Extended_Pictographic, L/V/T Hangul jamo, "." any
# other. CR, LF, Hangul syllables (LV/LVT) and regional indicators are recognized by code point.
# Made from the `regex` module's Unicode 18 tables, less the characters Unicode 17 did not have;
# tests/core/test_tokenizer.py checks every BMP character against `tokenizers` itself.
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


def graphemes(text: str) -> List[str]:
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
