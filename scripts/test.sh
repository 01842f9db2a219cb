#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this). On a fresh machine it:
#   1. makes .venv with this package and its test tools;
#   2. makes .venv-ref with the official pocket-tts 4.0.1 (CPU torch) for the cross-checks, and
#      .venv-fastrtc with fastrtc (whose dependencies pin others' versions) for its model's tests;
#   3. writes the full-size parity fixtures to build/reference with the official code (skipped
#      when they are up to date with the script and the committed tokenizer/voice files), and the
#      word-timestamp fixtures with pocket-tts-timestamped (skipped likewise);
#   4. rebuilds the WebAssembly kernels and checks they equal the committed core/portable/network/kernels.wasm
#      and kernels-relaxed.wasm, and prepares an emulated aarch64 Python with this checkout's kernels
#      (build/aarch64: qemu, for tests/core/test_aarch64.py);
#   5. checks core/ against Python 3.8, lints and formats (ruff; prettier for the JavaScript), builds the
#      docs (mkdocs build --strict), and runs pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REFERENCE_MODELS="english english_2m_2026-10"
SHORT_REFERENCE_MODELS="english_7m_2026-10 english_18m_2026-10 english_2026-01 english_drifting_26-09"

step() { printf '\n== %s\n' "$*" >&2; }

step "project environment (.venv)"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e ".[test]"

step "official reference environment (.venv-ref: torch 2.13.0 CPU, pocket-tts 4.0.1, pocket-tts-timestamped 1.4.0)"
[ -x .venv-ref/bin/python ] || "$PY" -m venv .venv-ref
if ! .venv-ref/bin/python -c "import pocket_tts, pocket_tts_timestamped, safetensors" 2>/dev/null; then
    .venv-ref/bin/pip install -q --disable-pip-version-check torch==2.13.0
    .venv-ref/bin/pip install -q --disable-pip-version-check pocket-tts==4.0.1 safetensors
    # Word timestamps' reference: the fork of the official package, beside it (no dependency of its own to add).
    .venv-ref/bin/pip install -q --disable-pip-version-check --no-deps pocket-tts-timestamped==1.4.0
fi

step "FastRTC's environment (.venv-fastrtc: fastrtc, and this checkout with its 'fastrtc' extra)"
# Its own: fastrtc's dependencies pin packages the project's environment needs at other versions.
[ -x .venv-fastrtc/bin/python ] || "$PY" -m venv .venv-fastrtc
.venv-fastrtc/bin/python -c "import fastrtc.text_to_speech" 2>/dev/null \
    || .venv-fastrtc/bin/pip install -q --disable-pip-version-check -e ".[fastrtc]"

step "full-size parity fixtures (build/reference)"
stamp=$(cat scripts/make_reference.py tests/fixtures/tokenizers/* tests/fixtures/voice/* | sha256sum | cut -c1-16)
if [ "$(cat build/reference/.stamp 2>/dev/null)" != "$stamp" ]; then
    rm -rf build/reference
    .venv-ref/bin/python -m scripts.make_reference --out build/reference $REFERENCE_MODELS
    .venv-ref/bin/python -m scripts.make_reference --out build/reference --frames 32 $SHORT_REFERENCE_MODELS
    echo "$stamp" > build/reference/.stamp
else
    echo "up to date" >&2
fi

step "word-timestamp fixtures from pocket-tts-timestamped (build/reference/*/words.json)"
words_stamp=$(cat build/reference/.stamp scripts/make_word_reference.py | sha256sum | cut -c1-16)
if [ "$(cat build/reference/.words-stamp 2>/dev/null)" != "$words_stamp" ]; then
    .venv-ref/bin/python -m scripts.make_word_reference --out build/reference $REFERENCE_MODELS
    echo "$words_stamp" > build/reference/.words-stamp
else
    echo "up to date" >&2
fi

step "the committed WebAssembly kernels (SIMD, relaxed SIMD) are the builds of core/portable/network/kernels.c"
.venv/bin/python -m scripts.build_kernels --check

step "the kernels on 64-bit ARM under qemu: an aarch64 Python with NumPy and core/_kernels (build/aarch64)"
.venv/bin/python -m scripts.aarch64

step "core/ runs on Python 3.8 (vermin), lint and format (ruff)"
.venv/bin/vermin -t=3.8- --no-tips --violations core
.venv/bin/ruff check .
.venv/bin/ruff format --check core browser server scripts e2e tests setup.py

step "the JavaScript (the page, the in-browser engine, Pyodide's patches) parses and is formatted (prettier)"
# Pinned, into build/ (ignored): the formatter of every .js file, which parses each as it checks it,
# and axe-core, the accessibility check the page's browser tests run (tests/browser/test_page_design.py).
[ -x build/js-tools/node_modules/.bin/prettier ] && [ -f build/js-tools/node_modules/axe-core/axe.min.js ] \
    || npm install --silent --no-save --no-audit --no-fund --prefix build/js-tools prettier@3.10.1 axe-core@4.14.1 >/dev/null
build/js-tools/node_modules/.bin/prettier --check --print-width 120 "web/*.js" "browser/*.js" "browser/site/patches/*.js"

step "the documentation site builds with no broken link or anchor (mkdocs build --strict)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

step "core/ on the Pyodide versions: Python 3.8 with NumPy 1.17.5 (.venv-py38)"
py38=""
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.8*/bin/python3.8 python3.8; do
    # pyenv's shims exist even where they cannot run: try each.
    if "$candidate" -c "import sys; assert sys.version_info[:2] == (3, 8)" 2>/dev/null; then
        py38=$candidate
        break
    fi
done
if [ -n "$py38" ]; then
    [ -x .venv-py38/bin/python ] || "$py38" -m venv .venv-py38
    # Pyodide's versions alone, nothing of ours installed: it also compiles the sites' modules
    # (browser/site/compiled.py), whose imports must be the page's.
    .venv-py38/bin/pip install -q --disable-pip-version-check numpy==1.17.5 num2words==0.5.14 pyyaml pytest
    PYTHONPATH=. .venv-py38/bin/python -m pytest -q -p no:cacheprovider --reference-dir /nonexistent \
        tests/core/test_parity.py tests/core/test_streaming.py tests/core/test_generation.py tests/core/test_kernels.py \
        tests/core/test_tsm.py tests/core/test_segmenter.py tests/core/test_normalize.py tests/core/test_text_stream.py \
        tests/core/test_ssml.py tests/core/test_runtime.py \
        -k "tiny or streaming or generation or kernels or tsm or segmenter or normalize or text_stream or ssml or runtime"
else
    echo "SKIPPED: no Python 3.8 on this machine (pyenv install 3.8 to run this check)" >&2
fi

step "pytest"
.venv/bin/python -m pytest --require-full-reference "$@"
