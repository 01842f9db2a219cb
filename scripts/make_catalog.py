"""Write core/portable/weights/catalog.json from the installed official package (pocket-tts 4.0.1).

The catalog is what `TTSModel.load("english")` needs without the official package: every shipped
config (architecture, Hugging Face files with their pinned revisions, text options), the predefined
voices with where their states live, the default voice and text per language. A config also gets
the `timestamp_heads` (word timestamps) of `pocket-tts-timestamped` 1.4.0's config of the same name
where the fork pins the same weights (heads are chosen per checkpoint: another revision's do not
carry over).

    .venv-ref/bin/python -m scripts.make_catalog
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from pocket_tts import default_parameters as defaults
from pocket_tts.utils import utils
from pocket_tts.utils.config import CONFIGS_DIR

OUT = Path(__file__).resolve().parent.parent / "core" / "portable" / "weights" / "catalog.json"


def main() -> None:
    from pocket_tts_timestamped.utils.config import CONFIGS_DIR as TIMESTAMPED_CONFIGS

    models = {}
    for path in sorted(CONFIGS_DIR.glob("*.yaml")):
        with open(path, encoding="utf-8") as f:
            models[path.stem] = yaml.safe_load(f)
        fork = Path(TIMESTAMPED_CONFIGS) / path.name
        if fork.exists():
            timed = yaml.safe_load(fork.read_text(encoding="utf-8"))
            if timed.get("timestamp_heads") and timed.get("weights_path") == models[path.stem].get("weights_path"):
                models[path.stem]["timestamp_heads"] = timed["timestamp_heads"]
    embeddings = utils.get_predefined_voice(language="{language}", name="{name}")
    catalog = {
        "source": "pocket-tts 4.0.1 (pocket_tts/config/*.yaml, default_parameters.py, utils/utils.py)",
        "default_model": defaults.DEFAULT_LANGUAGE,
        "models": models,
        "voice_embeddings": embeddings,
        "voices": dict(utils._ORIGINS_OF_PREDEFINED_VOICES),
        "default_voice": dict(defaults.DEFAULT_VOICE_FOR_LANGUAGE),
        "default_voice_fallback": defaults.DEFAULT_VOICE_FALLBACK,
        "default_text": dict(defaults.DEFAULT_TEXT_FOR_LANGUAGE),
    }
    OUT.write_text(json.dumps(catalog, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(models)} models, {len(catalog['voices'])} voices", file=sys.stderr)


if __name__ == "__main__":
    main()
