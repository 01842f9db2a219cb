"""A `tokenizer.json`: added tokens, then the pipeline of the `tokenizers` library."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Dict, Iterator, List, Optional, Set, Tuple

from .errors import FormatError
from .hf_models import HFBpe, HFUnigram
from .hf_stages import (
    RUST_WHITESPACE,
    Aligned,
    build_aligned_normalizer,
    build_aligned_pre_tokenizer,
    build_decoder,
    build_normalizer,
    build_post_processor,
    build_pre_tokenizer,
)


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
                while start > done and text[start - 1] in RUST_WHITESPACE:
                    start -= 1
            if token.rstrip:
                while stop < len(text) and text[stop] in RUST_WHITESPACE:
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


class HFTokenizer:
    """A `tokenizer.json`: Tokenizer::encode(text, add_special_tokens=True).ids and
    Tokenizer::decode(ids, skip_special_tokens=True)."""

    def __init__(self, data: bytes):
        try:
            cfg = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise FormatError(f"not a tokenizer.json ({e})") from None
        if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
            raise FormatError("not a tokenizer.json (no 'model' object)")
        if cfg.get("truncation") is not None:
            raise FormatError("truncation is not supported")
        padding = cfg.get("padding")
        if padding is not None and not (isinstance(padding, dict) and padding.get("strategy") == "BatchLongest"):
            raise FormatError("fixed-length padding is not supported")
        model_cfg = cfg["model"]
        kind = model_cfg.get("type") or ("Unigram" if isinstance(model_cfg.get("vocab"), list) else "BPE")
        if kind == "Unigram":
            self.model: HFUnigram | HFBpe = HFUnigram(model_cfg)
            model_vocab = self.model.vocab
        elif kind == "BPE":
            self.model = HFBpe(model_cfg)
            model_vocab = set(self.model.vocab)
        else:
            raise FormatError(f"model type {kind!r} is not supported (only Unigram and BPE)")
        self.normalizer = build_normalizer(cfg.get("normalizer"))
        self._normalizer_cfg = cfg.get("normalizer")
        self._aligned_normalizer: Optional[object] = None  # made at the first `layout`
        self.pre_tokenizer = build_pre_tokenizer(cfg.get("pre_tokenizer"))
        self._pre_tokenizer_cfg = cfg.get("pre_tokenizer")
        self.decoder = build_decoder(cfg.get("decoder"))
        self._init_added_tokens(cfg.get("added_tokens") or [], model_vocab)
        self.post_process = build_post_processor(cfg.get("post_processor"))
        self.vocab_size = len(model_vocab | set(self.added_ids))

    def _init_added_tokens(self, entries: list, model_vocab: Set[str]) -> None:
        self.added_ids: Dict[str, int] = {}
        self.added_by_id: Dict[int, str] = {}
        self.special: Set[str] = set()
        tokens: List[_AddedToken] = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
                raise FormatError("added_tokens: each entry needs a 'content'")
            content = entry["content"]
            if not content:
                continue
            model_id = self._model_id(content) if content in model_vocab else None
            token_id = model_id if model_id is not None else entry.get("id")
            if not isinstance(token_id, int):
                raise FormatError(f"added_tokens: {content!r} has no id")
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
        if isinstance(self.model, HFBpe):
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

    def piece(self, token_id: int) -> str:
        token = self.added_by_id.get(token_id)
        return token if token is not None else (self.model.id_to_token(token_id) or "")

    def layout(self, text: str) -> List[Tuple[int, int, int]]:
        """(id, start, end) of each token, start and end in characters of `text`, as the
        `tokenizers` library's offsets: what each token's characters came from."""
        if self._aligned_normalizer is None:
            self._aligned_normalizer = build_aligned_normalizer(self._normalizer_cfg) or (lambda pair: pair)
            self._aligned_pre_tokenizer = build_aligned_pre_tokenizer(self._pre_tokenizer_cfg) or (
                lambda pair, _: [pair]
            )
        out: List[Tuple[int, int, int]] = []
        offset = 0
        for piece, token_id in self.raw_matcher.split(text):
            start, offset = offset, offset + len(piece)
            if token_id is not None:
                out.append((token_id, start, offset))
                continue
            normalized: Aligned = self._aligned_normalizer((piece, [(i, i + 1) for i in range(start, offset)]))
            at = 0
            for k, (part, part_id) in enumerate(self.normalized_matcher.split(normalized[0])):
                aligned = (part, normalized[1][at : at + len(part)])
                at += len(part)
                if not part:
                    continue
                if part_id is not None:
                    out.append((part_id, aligned[1][0][0], aligned[1][-1][1]))
                    continue
                for word, spans in self._aligned_pre_tokenizer(aligned, start == 0 and k == 0):
                    if word:
                        out.extend(
                            (i, spans[a][0], spans[b - 1][1]) for i, a, b in self.model.tokenize_with_offsets(word)
                        )
        return _with_added(out, self.post_process)

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


def _with_added(tokens: List[Tuple[int, int, int]], post_process: object) -> List[Tuple[int, int, int]]:
    """`tokens` inside what the post-processor puts around a sequence (its template's tokens, which
    come from no text: (0, 0), as `tokenizers` gives them)."""
    around = post_process([-1])  # type: ignore[operator]
    before = around.index(-1) if -1 in around else 0
    return [(i, 0, 0) for i in around[:before]] + tokens + [(i, 0, 0) for i in around[before + 1 :]]
