"""Where the tests' inputs are: the committed fixtures (tiny models with their official references,
the test voice, trained tokenizers, the normalization table) and what scripts/test.sh makes."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TINY_DIR = FIXTURES / "models"
TINY_CONFIG = TINY_DIR / "tiny_lsd" / "config.yaml"
VOICE_24K = FIXTURES / "voice" / "voice_24000.wav"
VOICE_22K = FIXTURES / "voice" / "voice_22050.wav"
TOKENIZERS = FIXTURES / "tokenizers"
NORMALIZE_CASES = FIXTURES / "normalize_cases.tsv"
# The full-size fixtures scripts/test.sh writes under build/reference with the official package.
REFERENCE = ROOT / "build" / "reference"
FULL_MODELS = (
    "english",
    "english_2m_2026-10",
    "english_7m_2026-10",
    "english_18m_2026-10",
    "english_2026-01",
    "english_drifting_26-09",
)
# The model of the browser tests: the small full-size fixture.
SMALL = "english_2m_2026-10"
# The interpreters scripts/test.sh makes: the official package's, and Pyodide's versions'.
REFERENCE_PYTHON = ROOT / ".venv-ref" / "bin" / "python"
PYTHON38 = ROOT / ".venv-py38" / "bin" / "python"
# The address in-process test clients name (the server answers to localhost's names only).
LOCAL = "http://127.0.0.1"
