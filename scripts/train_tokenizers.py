"""Train the stand-in tokenizers the fixtures use (the real ones cannot be downloaded here).

Run with the reference environment (it has sentencepiece, tokenizers and protobuf):

    .venv-ref/bin/python -m scripts.train_tokenizers --out tests/fixtures/tokenizers

The corpus is text found on this machine: docstrings of the Python standard library and the
METADATA of installed packages. It only has to look like English text; the files it produces
are committed, so the exact corpus does not matter for reproducing the tests. A model whose
files already exist is skipped, so re-running never changes committed files (delete a pair to
retrain it).

Each SentencePiece `.model` gets a `tokenizer.json` conversion, the way the released tokenizers
come in both formats:

- unigram models: `tokenizers`' own `SentencePieceUnigramTokenizer.from_spm` (Precompiled
  normalizer, `Replace(" {2,}", " ")`, Metaspace pre-tokenizer and decoder);
- BPE models: `tokenizers` ships no converter for them, so `bpe_to_tokenizer` below rebuilds
  the one in `transformers` (`SpmConverter` / `LlamaConverter`): vocabulary in id order, merges
  for every pair of pieces whose concatenation is a piece, ordered by that piece's score.

The two libraries do not agree on every string for these conversions (unknown runs, control
pieces typed as text, combining marks after a normalized character): the tests compare each of
our loaders with its own library.
"""

from __future__ import annotations

import argparse
import ast
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Spec:
    """One fixture model: `name`.model and `name`.json."""

    name: str
    model_type: str  # "unigram" or "bpe"
    vocab_size: int
    # "from_spm" (unigram), "spm" (transformers SpmConverter) or "llama" (LlamaConverter)
    json_style: str
    options: dict = field(default_factory=dict)  # extra SentencePieceTrainer options


SPECS = (
    # The first fixture; tests/fixtures/models use it. Never retrained.
    Spec("unigram4000", "unigram", 4000, "from_spm"),
    Spec("unigram300", "unigram", 300, "from_spm", {"character_coverage": 0.995}),
    Spec(
        "unigram1000_bytes",
        "unigram",
        1000,
        "from_spm",
        {"byte_fallback": True, "user_defined_symbols": ["[laugh]", "<break>"], "normalization_rule_name": "identity"},
    ),
    Spec(
        "unigram8000_digits",
        "unigram",
        8000,
        "from_spm",
        {"split_digits": True, "normalization_rule_name": "nmt_nfkc_cf"},
    ),
    Spec("bpe300", "bpe", 300, "spm", {"character_coverage": 0.995, "normalization_rule_name": "identity"}),
    # Llama-style: no normalization, whitespace kept as typed, digits split, byte fallback.
    Spec(
        "bpe1000_bytes",
        "bpe",
        1000,
        "llama",
        {
            "byte_fallback": True,
            "split_digits": True,
            "normalization_rule_name": "identity",
            "remove_extra_whitespaces": False,
        },
    ),
    Spec("bpe8000", "bpe", 8000, "spm"),
)


def stdlib_docstrings(limit_bytes: int) -> list[str]:
    texts: list[str] = []
    size = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    texts.extend(line.strip() for line in doc.splitlines() if line.strip())
                    size += len(doc)
        if size > limit_bytes:
            break
    return texts


def package_metadata(limit_bytes: int) -> list[str]:
    texts: list[str] = []
    size = 0
    for path in sorted(Path(p) for p in sys.path if p.endswith("site-packages")):
        for meta in sorted(path.glob("*.dist-info/METADATA")):
            body = meta.read_text(encoding="utf-8", errors="replace").split("\n\n", 1)[-1]
            texts.extend(line.strip() for line in body.splitlines() if len(line.strip()) > 20)
            size += len(body)
            if size > limit_bytes:
                return texts
    return texts


def train(spec: Spec, corpus: Path, out: Path) -> Path:
    import sentencepiece as spm

    prefix = out / spec.name
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=spec.vocab_size,
        model_type=spec.model_type,
        character_coverage=spec.options.get("character_coverage", 0.9995),
        num_threads=1,
        input_sentence_size=200_000,
        shuffle_input_sentence=False,
        minloglevel=2,
        **{k: v for k, v in spec.options.items() if k != "character_coverage"},
    )
    (out / f"{spec.name}.vocab").unlink()
    return Path(str(prefix) + ".model")


def load_proto(model_path: Path):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_path.read_bytes())
    return proto


def bpe_merges(proto) -> list[tuple[str, str]]:
    """transformers' `generate_merges`: every split of a piece into two pieces, best score first."""
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    merges = []
    for piece in proto.pieces:
        local = [
            (piece.piece[:k], piece.piece[k:], piece.score)
            for k in range(1, len(piece.piece))
            if piece.piece[:k] in vocab and piece.piece[k:] in vocab
        ]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


def bpe_to_tokenizer(model_path: Path, style: str):
    """A `tokenizers.Tokenizer` equal to transformers' conversion of a SentencePiece BPE model.

    "spm" is `SpmConverter` (Precompiled + Strip + Replace normalizer, Metaspace pre-tokenizer and
    decoder); "llama" is `LlamaConverter` (Prepend + Replace normalizer, no pre-tokenizer, a
    Replace/ByteFallback/Fuse/Strip decoder).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    proto = load_proto(model_path)
    trainer = proto.trainer_spec
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    model = BPE(
        vocab, bpe_merges(proto), unk_token=trainer.unk_piece, fuse_unk=True, byte_fallback=trainer.byte_fallback
    )
    tokenizer = Tokenizer(model)
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if style == "llama":
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tokenizer.decoder = decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        )
    else:
        steps = [normalizers.Precompiled(charsmap)] if charsmap else []
        if proto.normalizer_spec.remove_extra_whitespaces:
            steps += [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "▁")]
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    special = [p.piece for p in proto.pieces if p.type in (2, 3)]  # UNKNOWN, CONTROL
    tokenizer.add_special_tokens([AddedToken(piece, normalized=False, special=True) for piece in special])
    return tokenizer


def write_json(spec: Spec, model_path: Path, json_path: Path) -> None:
    if spec.json_style == "from_spm":
        from sentencepiece import sentencepiece_model_pb2
        from tokenizers.implementations import SentencePieceUnigramTokenizer

        # The tokenizers converter imports the protobuf schema under its bare name.
        sys.modules.setdefault("sentencepiece_model_pb2", sentencepiece_model_pb2)
        SentencePieceUnigramTokenizer.from_spm(str(model_path)).save(str(json_path))
    else:
        bpe_to_tokenizer(model_path, spec.json_style).save(str(json_path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    todo = [
        s for s in SPECS if not ((args.out / f"{s.name}.model").exists() and (args.out / f"{s.name}.json").exists())
    ]
    if not todo:
        print("all tokenizers exist; nothing to do", file=sys.stderr)
        return

    corpus = args.out / "corpus.txt"
    lines = stdlib_docstrings(3_000_000) + package_metadata(2_000_000)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"corpus: {len(lines)} lines, {corpus.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    try:
        for spec in todo:
            model_path = args.out / f"{spec.name}.model"
            if not model_path.exists():
                train(spec, corpus, args.out)
            write_json(spec, model_path, args.out / f"{spec.name}.json")
            print(f"wrote {spec.name}.model and {spec.name}.json", file=sys.stderr)
    finally:
        corpus.unlink()


if __name__ == "__main__":
    main()
