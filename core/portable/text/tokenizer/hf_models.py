"""The models of a `tokenizer.json`: Unigram and BPE."""

from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Set, Tuple

from ...errors import TextError
from .errors import FormatError
from .hf_stages import config_field
from .unigram import PieceIndex, best_path


def _byte_token(byte: int) -> str:
    return f"<0x{byte:02X}>"


class HFUnigram:
    """models::unigram::Unigram: the single-pass Viterbi in float64, unknown runs fused into one
    token, then byte fallback for tokens the vocabulary lacks."""

    def __init__(self, cfg: dict):
        vocab = config_field(cfg, "vocab", list, "model Unigram")
        if not all(isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) for entry in vocab):
            raise FormatError("model Unigram: each vocab entry must be [token, score]")
        self.tokens: List[str] = [token for token, _ in vocab]
        self.scores: List[float] = [float(score) for _, score in vocab]
        self.token_to_id = {token: i for i, token in enumerate(self.tokens)}  # the last one wins
        unk_id = cfg.get("unk_id")
        if unk_id is not None and not (isinstance(unk_id, int) and 0 <= unk_id < len(self.tokens)):
            raise FormatError("model Unigram: unk_id is not in the vocabulary")
        self.unk_id: Optional[int] = unk_id
        self.byte_fallback = bool(cfg.get("byte_fallback", False))
        self.unk_score = min(self.scores, default=float("inf")) - 10.0
        self.index = PieceIndex({t: self.token_to_id[t] for t in self.tokens if t})

    @property
    def vocab(self) -> Set[str]:
        return set(self.token_to_id)

    def id_to_token(self, token_id: int) -> Optional[str]:
        return self.tokens[token_id] if 0 <= token_id < len(self.tokens) else None

    def _segment(self, text: str) -> List[Tuple[int, int]]:
        """The best path's pieces (start, end), each run of unknown pieces fused into one."""
        best_start, best_id = best_path(text, self.index, self.scores, self.unk_score, self.unk_id, float32=False)
        pieces: List[Tuple[int, int]] = []
        unknown_end: Optional[int] = None  # the end of a run of unknown pieces being read backwards
        end = len(text)
        while end > 0:
            start = best_start[end]
            if start < 0:
                raise TextError("the tokenizer met an unknown character but has no unk_id")
            if best_id[end] == self.unk_id:
                unknown_end = end if unknown_end is None else unknown_end
            else:
                if unknown_end is not None:
                    pieces.append((end, unknown_end))
                    unknown_end = None
                pieces.append((start, end))
            end = start
        if unknown_end is not None:
            pieces.append((0, unknown_end))
        pieces.reverse()
        return pieces

    def tokenize(self, word: str) -> List[int]:
        return [token_id for token_id, _, _ in self.tokenize_with_offsets(word)]

    def tokenize_with_offsets(self, word: str) -> List[Tuple[int, int, int]]:
        """(id, start, end) of each token, in characters of `word` (a byte token: its piece's)."""
        out: List[Tuple[int, int, int]] = []
        for start, end in self._segment(word):
            piece = word[start:end]
            token_id = self.token_to_id.get(piece)
            if token_id is None and self.byte_fallback:
                byte_ids = [self.token_to_id.get(_byte_token(b)) for b in piece.encode("utf-8")]
                if all(i is not None for i in byte_ids):
                    out.extend((i, start, end) for i in byte_ids)  # type: ignore[misc]
                    continue
            if token_id is None:
                if self.unk_id is None:
                    raise TextError("the tokenizer met an unknown token but has no unk_id")
                token_id = self.unk_id
            out.append((token_id, start, end))
        return out


class HFBpe:
    """models::bpe::BPE: characters (or byte tokens, or a fused unknown), then the merges applied
    lowest rank first, leftmost first among equals."""

    def __init__(self, cfg: dict):
        what = "model BPE"
        vocab = config_field(cfg, "vocab", dict, what)
        if not all(isinstance(i, int) for i in vocab.values()):
            raise FormatError(f"{what}: vocab ids must be integers")
        self.vocab: Dict[str, int] = dict(vocab)
        self.vocab_r = {i: token for token, i in self.vocab.items()}
        dropout = cfg.get("dropout")
        if dropout not in (None, 0, 0.0):
            raise FormatError(f"{what}: dropout makes encoding random and is not supported")
        self.unk_token = cfg.get("unk_token")
        self.prefix = cfg.get("continuing_subword_prefix") or ""
        self.suffix = cfg.get("end_of_word_suffix") or ""
        self.fuse_unk = bool(cfg.get("fuse_unk", False))
        self.byte_fallback = bool(cfg.get("byte_fallback", False))
        self.ignore_merges = bool(cfg.get("ignore_merges", False))
        self.merges: Dict[Tuple[int, int], Tuple[int, int]] = {}
        for rank, merge in enumerate(config_field(cfg, "merges", list, what, [])):
            if isinstance(merge, str):
                parts = merge.split(" ")
            elif isinstance(merge, list):
                parts = merge
            else:
                parts = []
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                raise FormatError(f"{what}: merge {rank + 1} is not a pair of tokens")
            left, right = parts
            merged = left + right[len(self.prefix) :]
            for token in (left, right, merged):
                if token not in self.vocab:
                    raise FormatError(f"{what}: merge token {token!r} is not in the vocabulary")
            self.merges[(self.vocab[left], self.vocab[right])] = (rank, self.vocab[merged])

    def id_to_token(self, token_id: int) -> Optional[str]:
        return self.vocab_r.get(token_id)

    def _unk_id(self) -> int:
        if self.unk_token not in self.vocab:
            raise TextError(f"the tokenizer's unknown token {self.unk_token!r} is not in its vocabulary")
        return self.vocab[self.unk_token]

    def _symbols(self, word: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        """BPE::merge_word before merging: the symbols' ids and their (start, end) in `word`."""
        ids: List[int] = []
        spans: List[Tuple[int, int]] = []
        unk: Optional[Tuple[int, int, int]] = None  # a pending unknown token, fused with the next if fuse_unk
        last = len(word) - 1
        for i, ch in enumerate(word):
            token = (self.prefix if i else "") + ch + (self.suffix if i == last else "")
            token_id = self.vocab.get(token)
            if token_id is not None:
                if unk is not None:
                    ids.append(unk[0])
                    spans.append(unk[1:])
                    unk = None
                ids.append(token_id)
                spans.append((i, i + 1))
                continue
            if self.byte_fallback:
                byte_ids = [self.vocab.get(_byte_token(b)) for b in token.encode("utf-8")]
                if all(b is not None for b in byte_ids):
                    ids.extend(byte_ids)  # type: ignore[arg-type]
                    spans.extend([(i, i + 1)] * len(byte_ids))
                    continue  # (a pending unknown stays pending, as in the Rust)
            if self.unk_token is not None:
                if unk is not None and not self.fuse_unk:
                    ids.append(unk[0])
                    spans.append(unk[1:])
                    unk = None
                unk = (self._unk_id(), i, i + 1) if unk is None else (unk[0], unk[1], i + 1)
        if unk is not None:
            ids.append(unk[0])
            spans.append(unk[1:])
        return ids, spans

    def tokenize(self, word: str) -> List[int]:
        return [token_id for token_id, _, _ in self.tokenize_with_offsets(word)]

    def tokenize_with_offsets(self, word: str) -> List[Tuple[int, int, int]]:
        """(id, start, end) of each token, in characters of `word`."""
        if not word:
            return []
        if self.ignore_merges and word in self.vocab:
            return [(self.vocab[word], 0, len(word))]
        ids, spans = self._symbols(word)
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
            spans[pos] = (spans[pos][0], spans[right][1])
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
        return [(token_id, start, end) for token_id, (start, end), keep in zip(ids, spans, alive) if keep]
