"""Bad input raises one clear exception family (PocketTTSError, a ValueError) naming the culprit."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from core import AudioError, ConfigError, PocketTTSError, TextError, TTSModel, WeightsError
from core.portable.config import Config, load_yaml
from tests.support.paths import TINY_DIR, VOICE_24K
from tests.support.reference import run_reference


def copy_model(tmp_path: Path, name: str = "tiny_lsd") -> Path:
    target = tmp_path / name
    shutil.copytree(TINY_DIR / name, target)
    config = target / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["flow_lm"]["lookup_table"]["tokenizer_path"] = str(TINY_DIR.parent / "tokenizers" / "unigram4000.json")
    config.write_text(yaml.safe_dump(data))
    return config


def edit(config: Path, change) -> None:
    data = yaml.safe_load(config.read_text())
    change(data)
    config.write_text(yaml.safe_dump(data))


@pytest.mark.slow
def test_every_official_config_loads(reference_python) -> None:
    """Every config the official package ships (found with its own interpreter, whatever its Python)."""
    where = run_reference(
        reference_python, "import pocket_tts, pathlib; print(pathlib.Path(pocket_tts.__file__).parent)"
    )
    configs = sorted((Path(where.strip()) / "config").glob("*.yaml"))
    assert len(configs) >= 25
    for path in configs:
        cfg = load_yaml(str(path))
        assert Config.from_dict(cfg.to_dict()) == cfg, path.stem


def test_json_config_loads_like_yaml(tmp_path) -> None:
    import json

    config = copy_model(tmp_path)
    as_json = config.with_suffix(".json")
    as_json.write_text(json.dumps(yaml.safe_load(config.read_text())))
    from_json, from_yaml = TTSModel.load(str(as_json)), TTSModel.load(str(config))
    assert from_json.config == from_yaml.config
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json is not valid JSON"):
        TTSModel.load(str(bad))


def test_unknown_model_name_lists_the_catalog_the_closest_first() -> None:
    closest = "unknown model 'englsh': did you mean 'english'\\? use a catalog name .*english_2m_2026-10"
    with pytest.raises(ConfigError, match=closest):
        TTSModel.load("englsh")
    with pytest.raises(ConfigError, match="unknown model 'zzz': use a catalog name"):
        TTSModel.load("zzz")


def test_missing_config(tmp_path) -> None:
    with pytest.raises(ConfigError, match="missing.yaml"):
        TTSModel.load(str(tmp_path / "missing.yaml"))


def test_invalid_yaml(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("flow_lm: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml is not valid YAML"):
        TTSModel.load(str(path))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(colour="blue"), "unknown field 'colour'"),
        (lambda d: d["flow_lm"]["transformer"].update(num_layerz=3), "flow_lm.transformer: unknown field 'num_layerz'"),
        (lambda d: d["flow_lm"]["transformer"].pop("d_model"), "missing required field 'd_model'"),
        (
            lambda d: d["flow_lm"]["transformer"].update(num_heads="four"),
            r"flow_lm.num_heads|num_heads: expected an int",
        ),
        (lambda d: d["flow_lm"]["flow"].update(type="diffusion"), "flow_lm.flow.type"),
        (lambda d: d["mimi"]["seanet"].update(ratios=[6, 5, 3]), "ratios"),
        (lambda d: d.update(append_terminal_punctuation="yes"), "expected true or false"),
    ],
)
def test_bad_config_fields_are_named(tmp_path, change, message: str) -> None:
    config = copy_model(tmp_path)
    edit(config, change)
    with pytest.raises(ConfigError, match=message):
        TTSModel.load(str(config))


def test_weights_of_another_architecture(tmp_path) -> None:
    config = copy_model(tmp_path)
    shutil.copy(TINY_DIR / "tiny_gqa" / "model.safetensors", config.parent / "model.safetensors")
    with pytest.raises(WeightsError, match="model.safetensors: (unexpected|missing) tensor"):
        TTSModel.load(str(config))


def test_weights_shape_mismatch(tmp_path) -> None:
    config = copy_model(tmp_path)
    edit(config, lambda d: d["flow_lm"]["flow"].update(dim=32))
    with pytest.raises(WeightsError, match=r"flow_lm.flow_net.* has shape \[24.*implies \[32"):
        TTSModel.load(str(config))


def test_missing_and_truncated_weights(tmp_path) -> None:
    config = copy_model(tmp_path)
    weights = config.parent / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(WeightsError, match="model.safetensors"):
        TTSModel.load(str(config))
    weights.unlink()
    with pytest.raises(ConfigError, match="weights_path: file not found: model.safetensors"):
        TTSModel.load(str(config))


def test_http_paths_are_refused(tmp_path) -> None:
    config = copy_model(tmp_path)
    edit(config, lambda d: d.update(weights_path="https://example.com/model.safetensors"))
    with pytest.raises(ConfigError, match="only local paths and hf:// paths"):
        TTSModel.load(str(config))


def test_tokenizer_vocabulary_must_match_n_bins(tmp_path) -> None:
    config = copy_model(tmp_path)
    edit(config, lambda d: d["flow_lm"]["lookup_table"].update(n_bins=3000))
    with pytest.raises(PocketTTSError, match="n_bins|conditioner.embed"):
        TTSModel.load(str(config))


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(model: TTSModel, voice, text: str) -> None:
    with pytest.raises(TextError, match="empty"):
        model.generate(text, voice)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": math.nan}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"eos_threshold": math.nan}, "eos_threshold"),
        ({"eos_threshold": "high"}, "eos_threshold"),
        ({"lsd_decode_steps": 0}, "lsd_decode_steps"),
        ({"max_frames": -1}, "max_frames"),
        ({"max_frames": 2.5}, "max_frames"),
        ({"frames_after_eos": -3}, "frames_after_eos"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"noise_clamp": 0.0}, "noise_clamp"),
    ],
)
def test_bad_options(model: TTSModel, voice, options: dict, message: str) -> None:
    with pytest.raises(PocketTTSError, match=message):
        model.generate("Hello.", voice, **options)


def test_unreadable_voice_audio(model: TTSModel, tmp_path) -> None:
    path = tmp_path / "voice.wav"
    path.write_bytes(b"RIFF\x24\x00\x00\x00WAVEjunk")
    with pytest.raises(AudioError, match="voice.wav"):
        model.voice_state(str(path))
    silent = tmp_path / "empty.wav"
    import wave

    with wave.open(str(silent), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(24000)
    with pytest.raises(AudioError, match="empty"):
        model.voice_state(str(silent))


def test_errors_are_value_errors() -> None:
    for error in (ConfigError, WeightsError, AudioError, TextError):
        assert issubclass(error, PocketTTSError) and issubclass(error, ValueError)


def test_voice_prompt_longer_than_30_s_is_cut(model: TTSModel) -> None:
    from core.portable.audio import pcm as audio

    samples, rate = audio.read(str(VOICE_24K))
    long = np.concatenate([samples] * 12)  # ~58 s
    cut = model.voice_state(long[: 30 * rate], sample_rate=rate)
    assert model.voice_state(long, sample_rate=rate).length == cut.length
