"""The pure-Python tokenizer (core/portable/text/tokenizer/) against the libraries it replaces.

For every fixture model (tests/fixtures/tokenizers, made by scripts/train_tokenizers.py: unigram
and BPE, 300 to 8000 pieces, with and without byte fallback, user-defined symbols, digit
splitting, nmt_nfkc / nmt_nfkc_cf / identity normalization) and both of its files, our ids must
equal the library's ids, and our decoded text the library's text:

- the `.model` loader against `sentencepiece`, the `tokenizer.json` loader against `tokenizers`
  (where the two libraries disagree with each other, each loader follows its own);
- a fixed corpus of tricky strings, Hypothesis strings mixing many kinds of text, and arbitrary id
  lists for decoding;
- tokenizer.json variants of the fixtures (other normalizers, pre-tokenizers, added tokens,
  post-processor, decoders), against `tokenizers`;
- every BMP character after a character the charsmap rewrites, against `tokenizers`' grapheme
  segmentation;
- each token's span of the text (`layout`, what word timestamps spread the attention through),
  against sentencepiece's `offset_mapping` (bytes) and `tokenizers`' offsets (characters), on every
  string above (but the variants with Unicode forms or case, whose ids alone are checked).

Tokenizer test volume of the default run (printed in the summary as "tokenizer test volume"):
5,540 strings encoded and decoded (3,759 on the 7 fixture models, each against both libraries;
1,781 on 13 tokenizer.json variants), 1,400 arbitrary id lists decoded with both libraries, and
84,861 two-character probes of the Precompiled normalizer.
"""

from __future__ import annotations

import base64
import json
import string
from pathlib import Path

import pytest
import sentencepiece
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.portable.errors import ConfigError
from core.portable.text.tokenizer import Tokenizer
from core.portable.text.tokenizer.charsmap import CharsMap
from core.portable.text.tokenizer.hf_stages import PrecompiledNormalizer
from tests.support.paths import TOKENIZERS

FIXTURES = TOKENIZERS
MODELS = sorted(p.stem for p in FIXTURES.glob("*.model"))
EXAMPLES = 500  # Hypothesis strings per model (each checked with both files)
ID_LISTS = 200  # Hypothesis id lists per model

VOLUME = {"strings": 0, "id lists": 0, "normalizer probes": 0}


class Pair:
    """One fixture model: the libraries and our loaders, for both files."""

    def __init__(self, name: str):
        self.name = name
        self.sp = sentencepiece.SentencePieceProcessor(model_file=str(FIXTURES / f"{name}.model"))
        self.hf = tokenizers.Tokenizer.from_file(str(FIXTURES / f"{name}.json"))
        self.ours_sp = Tokenizer.from_file(str(FIXTURES / f"{name}.model"))
        self.ours_hf = Tokenizer.from_file(str(FIXTURES / f"{name}.json"))

    def check_text(self, text: str) -> None:
        ids = self.sp.encode(text)
        assert self.ours_sp.encode(text) == ids, f"{self.name}.model encode {text!r}"
        assert self.ours_sp.decode(ids) == self.sp.decode(ids), f"{self.name}.model decode of {text!r}"
        mapped = self.sp.encode(text, return_type="offset_mapping", return_bytes=True)  # offsets in bytes
        assert self.ours_sp.layout(text) == [(i, a, b) for i, (a, b) in zip(mapped["ids"], mapped["offsets"])], (
            f"{self.name}.model offsets of {text!r}"
        )
        encoding = self.hf.encode(text)
        ids = encoding.ids
        assert self.ours_hf.encode(text) == ids, f"{self.name}.json encode {text!r}"
        assert self.ours_hf.decode(ids) == self.hf.decode(ids), f"{self.name}.json decode of {text!r}"
        assert self.ours_hf.layout(text) == layout_of(encoding), f"{self.name}.json offsets of {text!r}"
        VOLUME["strings"] += 1

    def check_ids(self, ids: list) -> None:
        assert self.ours_sp.decode(ids) == self.sp.decode(ids), f"{self.name}.model decode {ids}"
        assert self.ours_hf.decode(ids) == self.hf.decode(ids), f"{self.name}.json decode {ids}"
        VOLUME["id lists"] += 1


def layout_of(encoding) -> list:  # noqa: ANN001
    """(id, start, end) of a `tokenizers` encoding (start and end in characters)."""
    return [(i, a, b) for i, (a, b) in zip(encoding.ids, encoding.offsets)]


_PAIRS: dict = {}


def pair(name: str) -> Pair:
    if name not in _PAIRS:
        _PAIRS[name] = Pair(name)
    return _PAIRS[name]


class _VolumeReport:
    """Prints the counts in pytest's terminal summary."""

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        terminalreporter.write_sep("-", "tokenizer test volume")
        terminalreporter.write_line(", ".join(f"{count} {what}" for what, count in VOLUME.items()))


@pytest.fixture(scope="module", autouse=True)
def report_volume(request: pytest.FixtureRequest) -> None:
    if not request.config.pluginmanager.has_plugin("tokenizer-volume"):
        request.config.pluginmanager.register(_VolumeReport(), "tokenizer-volume")


# --- text ------------------------------------------------------------------------------------

WORDS = (
    "the of and to in is that for it as with was on be by this are from or at an which not have "
    "but function value return class object default module file name used Hello world Paris"
).split()
WHITESPACE = " \t\n\r\u00a0\u3000\u2002\u2009\u200b\u2581\x0b\x0c\x85\u2028\ufeff"
ACCENTED = "éèêëàâäôöûüçñÉÀÇØøåÅœßÆıİǅǈ"
CJK = "日本語中文字漢字かなカナひらがな한국어가각"
EMOJI = ("😀", "👍🏽", "👩\u200d👩\u200d👧", "🇫🇷", "🇫🇷🇩", "❤️", "©", "®\u200d©", "🏳️\u200d🌈")
COMBINING = "\u0300\u0301\u0302\u0308\u0327\u0340\u20dd\u0e33\u094d\u0903\u200d\u200c\ufe0f\u3099\uff9e\u1161\u11a8"
NFKC = "ＡＢＣａｂｃ０１２！？ﬁﬂﬃ①②㈱㌔ｶﾞﾊﾟ½²™℃ÅǅⅣ㍻ｰ～\u2126\u212b"
CONTROLS = "\x00\x01\x02\x07\x08\x1b\x1f\x7f\x80\x9f\u0600\u200e\u2060\ufff9\U000e0001"
SPECIAL = ("<s>", "</s>", "<unk>", "[laugh]", "<break>", "<0x41>", "<0xE2>", "▁", "▁▁")

segments = st.one_of(
    st.sampled_from(WORDS),
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=8),
    st.text(alphabet=string.digits + ".,", min_size=1, max_size=8),
    st.text(alphabet=string.punctuation, min_size=1, max_size=4),
    st.text(alphabet=WHITESPACE, min_size=1, max_size=5),
    st.text(alphabet=ACCENTED, min_size=1, max_size=4),
    st.text(alphabet=CJK, min_size=1, max_size=4),
    st.sampled_from(EMOJI),
    st.text(alphabet=COMBINING, min_size=1, max_size=3),
    st.text(alphabet=NFKC, min_size=1, max_size=3),
    st.text(alphabet=CONTROLS, min_size=1, max_size=2),
    st.sampled_from(SPECIAL),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=3),
)
texts = st.lists(segments, max_size=14).map("".join)

FIXED = [
    "",
    " ",
    "   ",
    "\t\n",
    "a",
    " a",
    "a ",
    "  leading and trailing  ",
    "Hello world.",
    "Hello,   world!  How are\tyou?\nFine.",
    "3.14",
    "It costs $3.14, or 2,718.28 in total; 1000000 people.",
    "Mr. Smith's dog isn't here.",
    "Dr. O'Neil said: \"don't\" — really?!",
    "e-mail: someone@example.com, https://example.com/a_b?c=d&e=f",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "the the the the the the the the",
    "................................",
    "1111111111111111111111222222222",
    "!!!???...,,,;;;",
    "café naïve résumé Ångström Øresund",
    "e\u0301 a\u0308 Ａ\u0301 ﬁ\u0301 x\u0308\u0301 \u00a0\u0301",
    "ｆｕｌｌ-ｗｉｄｔｈ ＴＥＸＴ ０１２３ ﬁﬂ ① ㈱ ½",
    "日本語のテキストと한국어 텍스트",
    "😀 👍🏽 👩\u200d👩\u200d👧 🇫🇷🇩🇪 ❤️",
    "\x00\x01\x02 bell\x07 tab\t vt\x0b ff\x0c del\x7f",
    "line\r\nbreak\rand\nmore\u2028sep\u2029end",
    "\u200b\u200c\u200d\ufeff zero width",
    "<s> </s> <unk> [laugh] <break> <0x41>",
    "▁ ▁▁ a▁b",
    "\U0001d400\U0001d401 \U00020000 \U0010fffd",
    "Ω Å K ǅ ǈ ﬀ ﬃ ㍻ ㌔",
    "  \u3000\u3000 ideographic   spaces \u3000",
    "tab\t\t\tseparated\t\tvalues",
    "UPPER lower MiXeD",
    " ".join(f"Sentence number {i} is here." for i in range(40)),
    ("The quick brown fox jumps over the lazy dog. 3.14 ünïcödé 日本 😀\n" * 150)[:10000],
]


@pytest.mark.parametrize("name", MODELS)
def test_fixed_corpus(name: str) -> None:
    model = pair(name)
    for text in FIXED:
        model.check_text(text)


@pytest.mark.parametrize("text", ["  a  b  ", "<s> and </s>", "\uff21\u0301", "\ufb01\u0301"])
def test_where_the_libraries_disagree_each_loader_follows_its_own(text: str) -> None:
    """unigram4000.json (the conversion `tokenizers` itself makes) keeps a trailing space, matches
    control pieces typed as text, and drops a mark after a rewritten character; sentencepiece does
    none of these."""
    model = pair("unigram4000")
    assert model.sp.encode(text) != model.hf.encode(text).ids
    model.check_text(text)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=texts)
def test_strings(name: str, text: str) -> None:
    pair(name).check_text(text)


# --- decoding arbitrary ids ---------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=ID_LISTS, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_decode_any_ids(name: str, data: st.DataObject) -> None:
    size = pair(name).sp.vocab_size()
    # Special and byte pieces sit at the start of the vocabulary, rare single characters at the end.
    edges = st.sampled_from(list(range(min(size, 270))) + list(range(size - 30, size)))
    ids = data.draw(st.lists(st.one_of(st.integers(0, size - 1), edges), max_size=16))
    pair(name).check_ids(ids)


@pytest.mark.parametrize("name", MODELS)
def test_out_of_range_ids(name: str) -> None:
    model = pair(name)
    size = model.sp.vocab_size()
    with pytest.raises(IndexError):
        model.sp.decode([size])
    with pytest.raises(IndexError):
        model.ours_sp.decode([size])
    # tokenizers skips ids it does not know
    assert model.ours_hf.decode([5, size, 6, size + 100]) == model.hf.decode([5, size, 6, size + 100])


# --- other tokenizer.json pipelines -------------------------------------------------------------


def _fixture_json(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _variant(base: str, **changes) -> dict:
    config = _fixture_json(base)
    for path, value in changes.items():
        target = config
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return config


def _added(content: str, token_id: int, **flags) -> dict:
    entry = {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False}
    entry.update({"normalized": False, "special": False}, **flags)
    return entry


METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
}
VARIANTS = {
    # Metaspace options (transformers writes "first" for legacy=False conversions)
    "metaspace_first": _variant("unigram4000", pre_tokenizer__prepend_scheme="first", decoder__prepend_scheme="first"),
    "metaspace_never": _variant("unigram4000", pre_tokenizer__prepend_scheme="never", decoder__prepend_scheme="never"),
    "metaspace_no_split": _variant("unigram4000", pre_tokenizer__split=False),
    "metaspace_legacy": _variant(
        "unigram4000",
        pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        decoder={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
    ),
    # SentencePieceUnigramTokenizer's own normalizer, and a BERT-like one
    "nmt_nfkc": _variant(
        "unigram4000",
        normalizer={
            "type": "Sequence",
            "normalizers": [
                {"type": "Nmt"},
                {"type": "NFKC"},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ],
        },
    ),
    "nfd_strip_accents_lowercase": _variant(
        "unigram4000",
        normalizer={
            "type": "Sequence",
            "normalizers": [
                {"type": "NFD"},
                {"type": "StripAccents"},
                {"type": "Lowercase"},
                {"type": "Strip", "strip_left": True, "strip_right": True},
            ],
        },
    ),
    "whitespace_digits_split": _variant(
        "unigram4000",
        pre_tokenizer={
            "type": "Sequence",
            "pretokenizers": [
                {"type": "WhitespaceSplit"},
                {"type": "Split", "pattern": {"Regex": "[.,!?]"}, "behavior": "Isolated", "invert": False},
                {"type": "Digits", "individual_digits": True},
                METASPACE,
            ],
        },
    ),
    "template": _variant(
        "unigram4000",
        post_processor=TEMPLATE,
        added_tokens=[_added("<s>", 1, special=True)],
    ),
    # added tokens: special, single-word, stripping, normalized, new ids
    "added_tokens": _variant(
        "bpe300",
        added_tokens=_fixture_json("bpe300")["added_tokens"]
        + [
            _added("[laugh]", 300, single_word=True, lstrip=True, rstrip=True, special=True),
            _added("hello", 301, normalized=True),
            _added("\uff21\uff22", 302, rstrip=True, normalized=True),
            _added(" the", 303, single_word=True),
        ],
    ),
    "bpe_ignore_merges": _variant("bpe300", model__ignore_merges=True),
    "bpe_unfused_unknowns": _variant("bpe300", model__fuse_unk=False),
    "llama_no_byte_fallback": _variant("bpe1000_bytes", model__byte_fallback=False),
    "llama_regex_replace": _variant(
        "bpe1000_bytes",
        normalizer={
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                {"type": "Replace", "pattern": {"Regex": "\u2581{2,}"}, "content": "\u2581"},
            ],
        },
        decoder={
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 2, "stop": 0},
            ],
        },
    ),
}
VARIANT_EXAMPLES = 100


class VariantPair:
    def __init__(self, config: dict):
        data = json.dumps(config)
        # Unicode forms and case are aligned by grapheme cluster, not as the Rust crates align them.
        kinds = json.dumps(config.get("normalizer"))
        self.exact_offsets = not any(f'"{k}"' in kinds for k in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase"))
        self.hf = tokenizers.Tokenizer.from_str(data)
        self.ours = Tokenizer.from_bytes(data.encode("utf-8"), "tokenizers", name="variant.json")

    def check_text(self, text: str) -> None:
        encoding = self.hf.encode(text)
        ids = encoding.ids
        assert self.ours.encode(text) == ids, f"encode {text!r}"
        assert self.ours.decode(ids) == self.hf.decode(ids), f"decode of {text!r}"
        if self.exact_offsets:
            assert self.ours.layout(text) == layout_of(encoding), f"offsets of {text!r}"
        else:
            assert [i for i, _, _ in self.ours.layout(text)] == ids
        VOLUME["strings"] += 1


_VARIANT_PAIRS: dict = {}


def variant(name: str) -> VariantPair:
    if name not in _VARIANT_PAIRS:
        _VARIANT_PAIRS[name] = VariantPair(VARIANTS[name])
    return _VARIANT_PAIRS[name]


# Characters whose NFKC, case or marks differ between Unicode versions (Python's tables against
# the Rust crates') stay out of these strings; the pipelines are what is tested here.
variant_texts = st.lists(
    st.one_of(
        st.sampled_from(WORDS + ["hello", "[laugh]", "\uff21\uff22", " the", "HELLO", "3.14", "½"]),
        st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=6),
        st.text(alphabet=string.punctuation, min_size=1, max_size=3),
        st.text(alphabet=WHITESPACE, min_size=1, max_size=4),
        st.text(alphabet=ACCENTED + CJK + COMBINING + NFKC + CONTROLS, min_size=1, max_size=3),
        st.sampled_from(EMOJI + SPECIAL),
    ),
    max_size=12,
).map("".join)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_fixed_corpus(name: str) -> None:
    for text in FIXED:
        variant(name).check_text(text)


@pytest.mark.parametrize("name", sorted(VARIANTS))
@settings(max_examples=VARIANT_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=variant_texts)
def test_variant_strings(name: str, text: str) -> None:
    variant(name).check_text(text)


def test_strip_decoder() -> None:
    """The Strip decoder on its own, for every start/stop (`tokenizers` panics on a few short
    tokens where its loop underflows; those are skipped)."""
    token_lists = (["__a__"], ["a_"], ["_a"], ["a"], ["___"], ["a__b_"], ["ab__", "_c_", "_d"], ["_", "a"])
    for start in range(3):
        for stop in range(3):
            theirs = tokenizers.decoders.Strip("_", start, stop)
            ours = Tokenizer.from_bytes(
                json.dumps(
                    _variant("bpe300", decoder={"type": "Strip", "content": "_", "start": start, "stop": stop})
                ).encode(),
                "tokenizers",
            )._backend.decoder
            for tokens in token_lists:
                try:
                    expected = theirs.decode(tokens)
                except BaseException as e:  # pyo3's PanicException derives from BaseException
                    if type(e).__name__ != "PanicException":
                        raise
                    continue
                assert "".join(ours(tokens)) == expected, (start, stop, tokens)


# --- the Precompiled normalizer's grapheme clusters ---------------------------------------------


def precompiled(name: str):
    config = json.loads((FIXTURES / f"{name}.json").read_text())
    steps = config["normalizer"].get("normalizers", [config["normalizer"]])
    blob = base64.b64decode(next(s for s in steps if s["type"] == "Precompiled")["precompiled_charsmap"])
    return tokenizers.normalizers.Precompiled(blob), PrecompiledNormalizer(CharsMap(blob))


def test_every_bmp_character_after_a_rewritten_one() -> None:
    """ "²" (2 bytes, rewritten to "2") then any BMP character: one cluster of under 6 bytes, whose
    second character is dropped, exactly when the character extends the cluster."""
    theirs, ours = precompiled("unigram4000")
    for cp in range(0x20, 0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        text = "\u00b2" + chr(cp)
        assert ours(text) == theirs.normalize_str(text), f"U+{cp:04X}"
        VOLUME["normalizer probes"] += 1


@pytest.mark.parametrize("name", ["unigram4000", "unigram8000_digits"])
def test_every_rewritten_character_before_a_mark_and_a_letter(name: str) -> None:
    """Each character the charsmap rewrites, then a combining mark or a letter: which clusters
    (controls break, prepended marks join) decide whether the next character survives."""
    theirs, ours = precompiled(name)
    for cp in range(0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if theirs.normalize_str(ch) == ch:
            continue
        for after in ("\u0301", "a", "\u0e33"):
            text = ch + after
            assert ours(text) == theirs.normalize_str(text), f"U+{cp:04X} {after!r}"
            VOLUME["normalizer probes"] += 1


# --- loading ------------------------------------------------------------------------------------


def test_interface() -> None:
    model = pair("unigram4000")
    assert model.ours_sp.vocab_size == model.sp.vocab_size() == 4000
    assert model.ours_hf.vocab_size == model.hf.get_vocab_size() == 4000
    assert model.ours_sp.kind == "sentencepiece" and model.ours_hf.kind == "tokenizers"
    for suffix, kind in ((".model", "sentencepiece"), (".json", "tokenizers")):
        data = (FIXTURES / f"unigram4000{suffix}").read_bytes()
        tokenizer = Tokenizer.from_bytes(data, kind)
        assert tokenizer.encode("Hello world.") == model.sp.encode("Hello world.")
        assert tokenizer.decode([5, 100]) == (model.ours_sp if suffix == ".model" else model.ours_hf).decode([5, 100])
    # numpy integers and tuples work as ids too
    np = pytest.importorskip("numpy")
    assert model.ours_sp.decode(np.array([100, 101])) == model.sp.decode([100, 101])


@pytest.mark.parametrize("name", MODELS)
def test_vocab_size(name: str) -> None:
    model = pair(name)
    assert model.ours_sp.vocab_size == model.sp.vocab_size()
    assert model.ours_hf.vocab_size == model.hf.get_vocab_size()


def malformed_model_files() -> dict:
    good = (FIXTURES / "unigram300.model").read_bytes()
    return {
        "empty.model": b"",
        "garbage.model": b"\xff\xfe\xfd not a protobuf",
        "truncated.model": good[: len(good) // 2],
        "text.model": b"hello world\n",
        "no_pieces.model": b"\x12\x02\x18\x01",  # a trainer_spec only
    }


@pytest.mark.parametrize("file_name", sorted(malformed_model_files()))
def test_malformed_model_raises_config_error(tmp_path: Path, file_name: str) -> None:
    path = tmp_path / file_name
    path.write_bytes(malformed_model_files()[file_name])
    with pytest.raises(ConfigError, match=file_name):
        Tokenizer.from_file(str(path))


def test_a_model_cut_anywhere_is_a_config_error_or_loads() -> None:
    """The protobuf reader's fast path (one-byte keys and lengths) never reads past the end: a file
    cut at any byte is rejected with ConfigError, never an IndexError or a wrong vocabulary."""
    good = (FIXTURES / "unigram300.model").read_bytes()
    whole = Tokenizer.from_bytes(good, "sentencepiece")
    for cut in list(range(0, 64)) + list(range(64, len(good), 97)):
        try:
            tokenizer = Tokenizer.from_bytes(good[:cut], "sentencepiece")
        except ConfigError:
            continue
        assert tokenizer.vocab_size <= whole.vocab_size  # a cut list of pieces is a shorter one


def broken_json() -> dict:
    good = json.loads((FIXTURES / "bpe300.json").read_text())
    unigram = json.loads((FIXTURES / "unigram4000.json").read_text())
    vocab = unigram["model"]["vocab"]

    def with_entry(entry: object) -> str:  # the Unigram vocabulary with its 10th entry replaced
        return json.dumps(dict(unigram, model=dict(unigram["model"], vocab=vocab[:10] + [entry] + vocab[11:])))

    cases = {
        "unigram_entry_not_a_list.json": with_entry({"token": "a", "score": -1.0}),
        "unigram_entry_too_short.json": with_entry(["a"]),
        "unigram_entry_too_long.json": with_entry(["a", -1.0, 0]),
        "unigram_token_not_a_string.json": with_entry([7, -1.0]),
        "empty.json": "",
        "garbage.json": "{not json",
        "list.json": "[1, 2, 3]",
        "no_model.json": json.dumps({"version": "1.0"}),
        "wordpiece.json": json.dumps(dict(good, model={"type": "WordPiece", "vocab": {}})),
        "bad_normalizer.json": json.dumps(dict(good, normalizer={"type": "BertNormalizer"})),
        "bad_decoder.json": json.dumps(dict(good, decoder={"type": "WordPiece"})),
        "bad_merge.json": json.dumps(dict(good, model=dict(good["model"], merges=[["nope", "zzz"]]))),
        "bad_charsmap.json": json.dumps(dict(good, normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAA"})),
    }
    return cases


@pytest.mark.parametrize("file_name", sorted(broken_json()))
def test_malformed_json_raises_config_error(tmp_path: Path, file_name: str) -> None:
    path = tmp_path / file_name
    path.write_text(broken_json()[file_name])
    with pytest.raises(ConfigError, match=file_name):
        Tokenizer.from_file(str(path))


def test_missing_file_and_bad_kind(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nowhere.model"):
        Tokenizer.from_file(str(tmp_path / "nowhere.model"))
    with pytest.raises(ConfigError, match="kind"):
        Tokenizer.from_bytes(b"", "tiktoken")
    with pytest.raises(ConfigError, match="upload.model"):
        Tokenizer.from_bytes(b"\x00\x01", "sentencepiece", name="upload.model")
