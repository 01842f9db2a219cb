"""The catalog (core/portable/weights/catalog.json) against the installed official packages: every
config of pocket-tts 4.0.1 is there, and a config carries timestamp heads exactly where
pocket-tts-timestamped 1.4.0's config of the same name has heads and pins the same weights (heads
are chosen per checkpoint)."""

from __future__ import annotations

import json

import pytest

from core.portable.weights import catalog
from tests.support.reference import run_reference

pytestmark = pytest.mark.slow

HEADS = """
import json, yaml
from pathlib import Path
from pocket_tts.utils.config import CONFIGS_DIR
from pocket_tts_timestamped.utils.config import CONFIGS_DIR as TIMED
out = {}
for path in sorted(Path(CONFIGS_DIR).glob("*.yaml")):
    official = yaml.safe_load(path.read_text(encoding="utf-8"))
    fork = Path(TIMED) / path.name
    timed = yaml.safe_load(fork.read_text(encoding="utf-8")) if fork.exists() else {}
    same_weights = timed.get("weights_path") == official.get("weights_path")
    out[path.stem] = {"heads": timed.get("timestamp_heads"), "same_weights": same_weights}
print(json.dumps(out))
"""


def test_timestamp_heads_are_the_forks_where_it_pins_the_same_weights(reference_python) -> None:
    official = json.loads(run_reference(reference_python, HEADS))
    assert sorted(official) == catalog.model_names()
    for name, seen in official.items():
        ours = catalog.config(name).timestamp_heads
        if seen["heads"] and seen["same_weights"]:
            assert ours is not None and [(h.layer, h.head) for h in ours] == [
                (h["layer"], h["head"]) for h in seen["heads"]
            ], name
        else:
            assert ours is None, name
    timed = [name for name, seen in official.items() if seen["heads"] and seen["same_weights"]]
    assert catalog.timed_models() == sorted(timed) and "english" not in timed
