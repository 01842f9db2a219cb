"""The stages of a `tokenizer.json` around its model: normalizers, pre-tokenizers, post-processors
and decoders, each built from its JSON object."""

from __future__ import annotations

import base64
import re
import unicodedata
from typing import Callable, Dict, List, Optional, Tuple, TypeVar

from .charsmap import CharsMap
from .errors import FormatError
from .graphemes import graphemes

Normalizer = Callable[[str], str]
# A text with, for each of its characters, the characters (start, end) of the input it came from.
Aligned = Tuple[str, List[Tuple[int, int]]]
AlignedNormalizer = Callable[[Aligned], Aligned]
T = TypeVar("T")

# Rust's char::is_whitespace (Unicode White_Space), which differs from str.isspace.
RUST_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)


def _rust_strip(text: str, left: bool, right: bool) -> str:
    start, end = 0, len(text)
    while left and start < end and text[start] in RUST_WHITESPACE:
        start += 1
    while right and end > start and text[end - 1] in RUST_WHITESPACE:
        end -= 1
    return text[start:end]


class PrecompiledNormalizer:
    """The Precompiled normalizer of `tokenizers`: per grapheme cluster shorter than 6 bytes, the
    shortest charsmap rule matching its start replaces the whole cluster; other clusters, and
    short ones no rule starts, are rewritten character by character."""

    def __init__(self, charsmap: CharsMap):
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
        return "".join(self._cluster(cluster) for cluster in graphemes(text))

    def aligned(self, aligned: Aligned) -> Aligned:
        """As `__call__`, each character of the result aligned as `tokenizers` aligns it
        (its `replace` of each rewritten part, then NormalizedString::transform)."""
        text, spans = aligned
        changes: List[Tuple[str, int]] = []
        for cluster in graphemes(text):
            rewritten = self._rewrite(cluster) if len(cluster.encode("utf-8")) < 6 else None
            if rewritten is not None:
                _replace(changes, len(cluster), rewritten)
                continue
            for ch in cluster:
                new = self._rewrite(ch)
                if new is None:
                    changes.append((ch, 0))
                else:
                    _replace(changes, 1, new)
        return "".join(c for c, _ in changes), transformed(spans, changes)


def _replace(changes: List[Tuple[str, int]], old_count: int, new: str) -> None:
    """The changes of `new` written for `old_count` characters: one to one; what it adds marked
    inserted; what it removes counted on the last change made so far (whichever character it is)."""
    changes.extend((c, 0) for c in new)
    diff = len(new) - old_count
    if diff > 0:
        for i in range(len(changes) - diff, len(changes)):
            changes[i] = (changes[i][0], 1)
    elif diff < 0 and changes:
        changes[-1] = (changes[-1][0], changes[-1][1] + diff)


def transformed(spans: List[Tuple[int, int]], changes: List[Tuple[str, int]]) -> List[Tuple[int, int]]:
    """NormalizedString::transform: the alignment of the characters of `changes` (each with 0: it
    replaces the next character; > 0: it is inserted, aligned to the character before; < 0: it
    replaces one and removes as many after it)."""
    out: List[Tuple[int, int]] = []
    at = 0
    for _, change in changes:
        if change > 0:
            out.append(spans[at - 1] if at >= 1 else (0, 0))
        else:
            out.append(spans[at])
            at += 1 - change
    return out


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
                raise FormatError(f"{what}: regex {value!r} is not supported ({e})") from None
    raise FormatError(f"{what}: a pattern must be {{'String': ...}} or {{'Regex': ...}}")


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
    content = config_field(cfg, "content", str, what)

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


def _aligned_replacer(cfg: dict, what: str) -> AlignedNormalizer:
    """Replace, aligned: what replaces a match is aligned to the match's last character."""
    regex = _pattern_regex(cfg.get("pattern"), what)
    content = config_field(cfg, "content", str, what)

    def replace(aligned: Aligned) -> Aligned:
        text, spans = aligned
        out, out_spans = [], []
        done = 0
        for start, end in _find_matches(regex, text):
            out.append(text[done:start] + content)
            out_spans.extend(spans[done:start])
            out_spans.extend([spans[end - 1] if end else (0, 0)] * len(content))
            done = end
        out.append(text[done:])
        out_spans.extend(spans[done:])
        return "".join(out), out_spans

    return replace


def _per_cluster(normalize: Normalizer) -> AlignedNormalizer:
    """A normalizer of characters (Unicode forms, case), aligned cluster by cluster; where the whole
    text's result is not the clusters' (a rule across them), every character to the whole input."""

    def aligned(pair: Aligned) -> Aligned:
        text, spans = pair
        whole = normalize(text)
        changes: List[Tuple[str, int]] = []
        for cluster in graphemes(text):
            _replace(changes, len(cluster), normalize(cluster))
        if "".join(c for c, _ in changes) != whole:
            return whole, [(spans[0][0], spans[-1][1])] * len(whole) if spans else []
        return whole, transformed(spans, changes)

    return aligned


def _kept(keep: Callable[[str], bool]) -> AlignedNormalizer:
    """A normalizer that drops characters."""

    def aligned(pair: Aligned) -> Aligned:
        kept = [(c, span) for c, span in zip(*pair) if keep(c)]
        return "".join(c for c, _ in kept), [span for _, span in kept]

    return aligned


def build_aligned_normalizer(cfg: Optional[dict]) -> Optional[AlignedNormalizer]:
    """`build_normalizer`'s normalizer on an aligned text (for token offsets)."""
    if cfg is None:
        return None
    kind = _type_of(cfg, "normalizer")
    what = f"normalizer {kind}"
    if kind == "Sequence":
        return _composed([build_aligned_normalizer(c) for c in config_field(cfg, "normalizers", list, what)])
    if kind == "Replace":
        return _aligned_replacer(cfg, what)
    if kind == "Strip":
        left, right = bool(cfg.get("strip_left", True)), bool(cfg.get("strip_right", True))

        def strip(pair: Aligned) -> Aligned:
            text, spans = pair
            start = len(text) - len(_rust_strip(text, True, False)) if left else 0
            end = start + len(_rust_strip(text[start:], False, right))
            return text[start:end], spans[start:end]

        return strip
    if kind == "Prepend":
        prefix = config_field(cfg, "prepend", str, what)
        return lambda pair: (prefix + pair[0], [pair[1][0]] * len(prefix) + pair[1]) if pair[0] else pair
    if kind == "StripAccents":
        return _kept(lambda c: not unicodedata.category(c).startswith("M"))
    if kind == "Nmt":
        dropped = _kept(lambda c: _nmt(c) != "")
        return lambda pair: (_nmt(pair[0]), dropped(pair)[1])
    normalize = build_normalizer(cfg)
    if isinstance(normalize, PrecompiledNormalizer):
        return normalize.aligned
    return _per_cluster(normalize)  # type: ignore[arg-type]


def config_field(cfg: dict, key: str, kind: type, what: str, default: object = None) -> object:
    value = cfg.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FormatError(f"{what}: {key!r} must be a {kind.__name__}")
    return value


def build_normalizer(cfg: Optional[dict]) -> Optional[Normalizer]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "normalizer")
    what = f"normalizer {kind}"
    if kind == "Sequence":
        return _composed([build_normalizer(c) for c in config_field(cfg, "normalizers", list, what)])
    if kind == "Precompiled":
        blob = cfg.get("precompiled_charsmap")
        try:
            data = base64.b64decode(blob, validate=True) if isinstance(blob, str) else b""
        except ValueError:
            raise FormatError("normalizer Precompiled: precompiled_charsmap is not base64") from None
        return PrecompiledNormalizer(CharsMap(data))
    if kind == "Replace":
        return _replacer(cfg, what)
    if kind == "Strip":
        left = bool(cfg.get("strip_left", True))
        right = bool(cfg.get("strip_right", True))
        return lambda text: _rust_strip(text, left, right)
    if kind == "Prepend":
        prefix = config_field(cfg, "prepend", str, what)
        return lambda text: prefix + text if text else text
    if kind == "Nmt":
        return _nmt
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda text: unicodedata.normalize(kind, text)
    if kind == "Lowercase":
        return lambda text: text.lower()
    if kind == "StripAccents":
        return lambda text: "".join(c for c in text if not unicodedata.category(c).startswith("M"))
    raise FormatError(f"normalizer type {kind!r} is not supported")


def _composed(steps: List[Optional[Callable[[T], T]]]) -> Callable[[T], T]:
    """A "Sequence" stage: its steps one after the other (a step that does nothing is None)."""
    chain = [step for step in steps if step is not None]

    def sequence(value: T) -> T:
        for step in chain:
            value = step(value)
        return value

    return sequence


def _type_of(cfg: object, what: str) -> str:
    if not isinstance(cfg, dict) or not isinstance(cfg.get("type"), str):
        raise FormatError(f"a {what} must be an object with a 'type'")
    return cfg["type"]


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
        raise FormatError(f"split behavior {behavior!r} is not supported")
    return [text[s:e] for s, e in spans if e > s]


def _metaspace_scheme(cfg: dict, what: str) -> str:
    if "prepend_scheme" in cfg:
        scheme = cfg["prepend_scheme"]
        if scheme not in ("always", "first", "never"):
            raise FormatError(f"{what}: prepend_scheme {scheme!r} is not supported")
        return scheme
    return "always" if cfg.get("add_prefix_space", True) else "never"  # the older spelling


def build_pre_tokenizer(cfg: Optional[dict]) -> Optional[PreTokenizer]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "pre_tokenizer")
    what = f"pre_tokenizer {kind}"
    if kind == "Sequence":
        steps = [build_pre_tokenizer(c) for c in config_field(cfg, "pretokenizers", list, what)]
        chain = [s for s in steps if s is not None]

        def sequence(text: str, at_start: bool) -> List[str]:
            words = [text]
            for step in chain:
                # Only the first word of the input still starts it (Metaspace's "first" scheme).
                words = [w for k, word in enumerate(words) for w in step(word, at_start and k == 0)]
            return words

        return sequence
    if kind == "Metaspace":
        replacement = config_field(cfg, "replacement", str, what)
        if len(replacement) != 1:
            raise FormatError(f"{what}: the replacement must be one character")
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
        return lambda text, _: _split_segments(text, _char_segments(text, RUST_WHITESPACE.__contains__), "Removed")
    if kind == "Digits":
        behavior = "Isolated" if cfg.get("individual_digits", False) else "Contiguous"

        def is_numeric(c: str) -> bool:  # Rust's char::is_numeric
            return unicodedata.category(c) in ("Nd", "Nl", "No")

        return lambda text, _: _split_segments(text, _char_segments(text, is_numeric), behavior)
    if kind == "Split":
        regex = _pattern_regex(cfg.get("pattern"), what)
        behavior = config_field(cfg, "behavior", str, what)
        invert = bool(cfg.get("invert", False))
        _split_segments("", [], behavior)  # reject an unknown behavior now
        return lambda text, _: _split_segments(text, _regex_segments(text, regex, invert), behavior)
    raise FormatError(f"pre_tokenizer type {kind!r} is not supported")


def _located(words: List[str], aligned: Aligned) -> List[Aligned]:
    """`words`, cut in order from the text of `aligned` (what lies between them dropped), aligned."""
    text, spans = aligned
    out: List[Aligned] = []
    at = 0
    for word in words:
        start = text.find(word, at)
        at = start + len(word)
        out.append((word, spans[start:at]))
    return out


def build_aligned_pre_tokenizer(cfg: Optional[dict]) -> Optional[Callable[[Aligned, bool], List[Aligned]]]:
    """`build_pre_tokenizer`'s pre-tokenizer on an aligned text: its words, aligned (Metaspace's
    prefix aligned as the character after it, as `tokenizers` aligns what it prepends)."""
    if cfg is None:
        return None
    kind = _type_of(cfg, "pre_tokenizer")
    if kind == "Sequence":
        steps = [build_aligned_pre_tokenizer(c) for c in config_field(cfg, "pretokenizers", list, kind)]
        chain = [step for step in steps if step is not None]

        def sequence(pair: Aligned, at_start: bool) -> List[Aligned]:
            words = [pair]
            for step in chain:
                words = [w for k, word in enumerate(words) for w in step(word, at_start and k == 0)]
            return words

        return sequence
    plain = build_pre_tokenizer(cfg)
    if kind != "Metaspace":
        return lambda pair, at_start: _located(plain(pair[0], at_start), pair)  # type: ignore[misc]
    replacement = cfg["replacement"]
    scheme = _metaspace_scheme(cfg, "pre_tokenizer Metaspace")

    def metaspace(pair: Aligned, at_start: bool) -> List[Aligned]:
        text, spans = pair[0].replace(" ", replacement), list(pair[1])
        prepend = scheme == "always" or (scheme == "first" and at_start)
        if prepend and text and not text.startswith(replacement):
            text, spans = replacement + text, spans[:1] + spans
        return _located(plain(text, False), (text, spans))  # type: ignore[misc]

    return metaspace


def build_post_processor(cfg: Optional[dict]) -> Callable[[List[int]], List[int]]:
    """What `encode(text)` (add_special_tokens=True) adds around the ids of one sequence."""
    if cfg is None:
        return lambda ids: ids
    kind = _type_of(cfg, "post_processor")
    what = f"post_processor {kind}"
    if kind == "ByteLevel":
        return lambda ids: ids  # offsets only
    if kind == "Sequence":
        return _composed([build_post_processor(c) for c in config_field(cfg, "processors", list, what)])
    if kind in ("BertProcessing", "RobertaProcessing"):
        cls_id, sep_id = (config_field(cfg, key, list, what)[1] for key in ("cls", "sep"))
        return lambda ids: [cls_id] + ids + [sep_id]
    if kind == "TemplateProcessing":
        special = config_field(cfg, "special_tokens", dict, what, {})
        before: List[int] = []
        after: List[int] = []
        seen_sequence = False
        for item in config_field(cfg, "single", list, what):
            if isinstance(item, dict) and "Sequence" in item:
                seen_sequence = True
            elif isinstance(item, dict) and "SpecialToken" in item:
                name = item["SpecialToken"].get("id")
                if name not in special:
                    raise FormatError(f"{what}: special token {name!r} is not defined")
                (after if seen_sequence else before).extend(special[name]["ids"])
            else:
                raise FormatError(f"{what}: unexpected template item {item!r}")
        return lambda ids: before + ids + after
    raise FormatError(f"post_processor type {kind!r} is not supported")


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


def build_decoder(cfg: Optional[dict]) -> Optional[Decoder]:
    if cfg is None:
        return None
    kind = _type_of(cfg, "decoder")
    what = f"decoder {kind}"
    if kind == "Sequence":
        return _composed([build_decoder(c) for c in config_field(cfg, "decoders", list, what)])
    if kind == "Metaspace":
        replacement = config_field(cfg, "replacement", str, what)
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
        content = config_field(cfg, "content", str, what)
        if len(content) != 1:
            raise FormatError(f"{what}: content must be one character")
        return _strip_decoder(
            content, int(config_field(cfg, "start", int, what)), int(config_field(cfg, "stop", int, what))
        )
    if kind == "Replace":
        replace = _replacer(cfg, what)
        return lambda tokens: [replace(t) for t in tokens]
    raise FormatError(f"decoder type {kind!r} is not supported")
