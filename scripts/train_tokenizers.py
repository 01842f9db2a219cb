"""Train the stand-in tokenizers the fixtures use (the real ones cannot be downloaded here).

Run with the reference environment (it has sentencepiece, tokenizers and protobuf):

    .venv-ref/bin/python -m scripts.train_tokenizers --out tests/fixtures/tokenizers

The corpus is text found on this machine: docstrings of the Python standard library and the
METADATA of installed packages. It only has to look like English text; the files it produces
are committed, so the exact corpus does not matter for reproducing the tests.
"""

from __future__ import annotations

import argparse
import ast
import sys
import sysconfig
from pathlib import Path


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


def main() -> None:
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers.implementations import SentencePieceUnigramTokenizer

    # The tokenizers converter imports the protobuf schema under its bare name.
    sys.modules.setdefault("sentencepiece_model_pb2", sentencepiece_model_pb2)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    corpus = args.out / "corpus.txt"
    lines = stdlib_docstrings(3_000_000) + package_metadata(2_000_000)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"corpus: {len(lines)} lines, {corpus.stat().st_size / 1e6:.1f} MB", file=sys.stderr)

    prefix = args.out / "unigram4000"
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=4000,
        model_type="unigram",
        character_coverage=0.9995,
        num_threads=1,
        input_sentence_size=200_000,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    SentencePieceUnigramTokenizer.from_spm(str(prefix) + ".model").save(str(prefix) + ".json")
    corpus.unlink()
    (args.out / "unigram4000.vocab").unlink()
    print(f"wrote {prefix}.model and {prefix}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
