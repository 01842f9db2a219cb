"""sentencepiece's precompiled charsmap (a darts-clone double-array trie of UTF-8 keys), which
both sentencepiece's normalizer and the Precompiled normalizer of `tokenizers` read."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Set, Tuple

from .errors import FormatError


def utf8_char_len(lead: int) -> int:
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


class CharsMap:
    """sentencepiece's precompiled charsmap: <u32 trie size><darts-clone double array><NUL-separated
    replacement strings>. The trie maps UTF-8 byte strings to offsets in the replacement pool."""

    def __init__(self, blob: bytes):
        if len(blob) <= 4:
            raise FormatError("the normalization charsmap is broken (too short)")
        trie_size = struct.unpack_from("<I", blob)[0]
        if trie_size >= len(blob) or trie_size % 4:
            raise FormatError("the normalization charsmap is broken (bad trie size)")
        self._units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        pool = blob[4 + trie_size :]
        try:
            pool.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("the normalization charsmap holds invalid UTF-8") from None
        self._pool = pool
        self._replacements: Dict[int, bytes] = {}
        self._root = _unit_offset(self._units[0]) if self._units else 0
        self.first_bytes = self._children(self._root)
        self._ascii_rules: Optional[Dict[int, Tuple[bool, Set[int]]]] = None  # made at the first no_ascii_rule_at

    def _made_ascii_rules(self) -> Dict[int, Tuple[bool, Set[int]]]:
        """For an ASCII first byte: (is it a key alone, the second bytes a longer key can have).
        Most ASCII characters start no rule but some longer key (a letter + a combining mark), so
        this tells, without walking, that no rule applies. Only sentencepiece's normalizer asks, so
        `tokenizers`' never makes it (english's: ~90 nodes' children, ~2 ms of Python 3.8 here)."""
        rules = {}
        for b in self.first_bytes:
            if b < 0x80:
                unit = self._units[self._root ^ b]
                node = self._root ^ b ^ _unit_offset(unit)
                rules[b] = (bool(unit & 0x100), self._children(node))
        return rules

    def _children(self, node: int) -> Set[int]:
        """The bytes that lead from `node` (after the xor with its offset) to a child.

        The child by byte b sits at node ^ b: the 256 candidates are one aligned block of units,
        read as a slice (sentencepiece's normalizer builds these sets for ~90 nodes)."""
        low, base = node & 0xFF, node & ~0xFF
        block = self._units[base : base + 256]
        return {j ^ low for j, unit in enumerate(block) if unit & 0x800000FF == j ^ low}

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
        if self._ascii_rules is None:
            self._ascii_rules = self._made_ascii_rules()
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
