"""The table of written and spoken texts (tests/fixtures/normalize_cases.tsv): what core's text
normalization must make of each, read with num2words as pip installs it and as the site ships it."""

from __future__ import annotations

from typing import List, Tuple

from tests.support.paths import NORMALIZE_CASES


def cases() -> List[Tuple[str, str, str]]:
    """(language, written, spoken) of each row."""
    rows = []
    for line in NORMALIZE_CASES.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            language, written, spoken = line.split("\t")
            rows.append((language, written, spoken))
    return rows
