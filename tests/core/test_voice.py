"""Voice states: the official export format both ways, the legacy format, and bad voices."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core import TTSModel, VoiceError
from core.export import export_voice
from core.files import save_tensors
from core.portable.weights import safetensors_file
from tests.support.metrics import nmse_db
from tests.support.paths import TINY_DIR, VOICE_24K
from tests.support.reference import run_reference

OFFICIAL_GENERATE = """
import os, sys
from pathlib import Path
import numpy as np, torch
from pocket_tts import TTSModel
config, voice, text, frames, out = sys.argv[1:6]
os.chdir(Path(config).parent)
model = TTSModel.load_model(config=config)
model.temp, model.max_decoder_frames_per_call, model.eos_threshold = 0.0, 1, float("inf")
model._estimate_max_gen_len = lambda n: int(frames)
state = model.get_state_for_audio_prompt(Path(voice))
with torch.no_grad():
    np.save(out, model.generate_audio(state, text).numpy())
"""


def load(name: str) -> TTSModel:
    return TTSModel.load(str(TINY_DIR / name / "config.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_lsd", "tiny_gqa"])
def test_our_exported_voice_loads_in_the_official_package(tmp_path, reference_python, name: str) -> None:
    model = load(name)
    ref = np.load(TINY_DIR / name / "reference.npz")
    exported = tmp_path / "ours.safetensors"
    export_voice(model, str(VOICE_24K), str(exported))
    out = tmp_path / "pcm.npy"
    text = json.loads(str(ref["texts_json"]))["medium"]
    run_reference(
        reference_python,
        OFFICIAL_GENERATE,
        str(TINY_DIR / name / "config.yaml"),
        str(exported),
        text,
        str(int(ref["frames"])),
        str(out),
    )
    assert nmse_db(np.load(out), ref["pcm_forced"]) < -100


def test_exported_voice_has_the_official_layout(tmp_path) -> None:
    model = load("tiny_gqa")
    path = tmp_path / "v.safetensors"
    export_voice(model, str(VOICE_24K), str(path))
    ours, _ = safetensors_file.load(str(path))
    official, _ = safetensors_file.load(str(TINY_DIR / "tiny_gqa" / "voice_state.safetensors"))
    assert sorted(ours) == sorted(official)
    for key in official:
        assert ours[key].dtype == official[key].dtype and ours[key].shape == official[key].shape, key


def test_voice_round_trip_and_reuse(tmp_path) -> None:
    model = load("tiny_lsd")
    voice = model.voice_state(str(VOICE_24K))
    path = tmp_path / "v.safetensors"
    export_voice(model, voice, str(path))
    again = model.voice_state(str(path))
    assert again.length == voice.length
    first = model.generate("Same voice, twice.", voice, temperature=0.0, max_frames=8)
    second = model.generate("Same voice, twice.", voice, temperature=0.0, max_frames=8)
    from_file = model.generate("Same voice, twice.", again, temperature=0.0, max_frames=8)
    assert np.array_equal(first, second), "generation must not modify the voice state"
    assert np.array_equal(first, from_file)


def test_legacy_current_end_format(tmp_path) -> None:
    model = load("tiny_lsd")
    official, _ = safetensors_file.load(str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors"))
    legacy = {}
    for key, value in official.items():
        module, field = key.split("/")
        if field == "offset":
            legacy[f"{module}/current_end"] = np.zeros(int(value[0]), np.float32)
        elif field == "cache":
            # Older files may hold spare capacity past the prompt.
            spare = np.full((2, 1, 5) + value.shape[3:], np.nan, np.float32)
            legacy[key] = np.concatenate([value, spare], axis=2)
    path = tmp_path / "legacy.safetensors"
    save_tensors(str(path), legacy)
    old = model.voice_state(str(path))
    new = model.voice_state(str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors"))
    assert old.length == new.length
    assert all(np.array_equal(a, b) for a, b in zip(old.transformer.keys, new.transformer.keys))


def test_voice_of_another_model_is_refused(tmp_path) -> None:
    with pytest.raises(VoiceError, match="3-layer model; this model has 2 layers"):
        load("tiny_lsd").voice_state(str(TINY_DIR / "tiny_gqa" / "voice_state.safetensors"))
    tensors, _ = safetensors_file.load(str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors"))
    regrouped = {k: (v.reshape(2, 1, v.shape[2], 2, -1) if k.endswith("/cache") else v) for k, v in tensors.items()}
    path = tmp_path / "other.safetensors"
    save_tensors(str(path), regrouped)
    with pytest.raises(VoiceError, match="made for another model"):
        load("tiny_lsd").voice_state(str(path))


def test_corrupt_or_missing_voices(tmp_path) -> None:
    model = load("tiny_lsd")
    with pytest.raises(VoiceError, match="voice file not found: .*missing.safetensors"):
        model.voice_state(str(tmp_path / "missing.safetensors"))
    with pytest.raises(VoiceError, match="voice file not found: nope.wav"):
        model.voice_state("nope.wav")
    with pytest.raises(VoiceError, match="has no predefined voices, and 'no-such-voice' is no file"):
        model.voice_state("no-such-voice")
    with pytest.raises(VoiceError, match="is a folder"):
        model.voice_state(str(tmp_path))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 3)
    with pytest.raises(VoiceError, match="bad.safetensors"):
        model.voice_state(str(bad))
    weights = TINY_DIR / "tiny_lsd" / "model.safetensors"
    with pytest.raises(VoiceError, match="not a voice state"):
        model.voice_state(str(weights))


def test_voice_from_samples_at_any_rate_equals_the_file() -> None:
    from core.portable.audio import pcm as audio

    model = load("tiny_lsd")
    samples, rate = audio.read(str(VOICE_24K))
    from_file = model.voice_state(str(VOICE_24K))
    from_array = model.voice_state(samples, sample_rate=rate)
    assert all(np.array_equal(a, b) for a, b in zip(from_file.transformer.keys, from_array.transformer.keys))
    stereo = np.stack([samples, samples])
    from_stereo = model.voice_state(stereo, sample_rate=rate)
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(from_file.transformer.keys, from_stereo.transformer.keys))
    with pytest.raises(VoiceError, match="sample_rate"):
        model.voice_state(samples)


def test_model_without_voice_cloning_weights(tmp_path) -> None:
    """A checkpoint without the encoder side speaks with voice states but refuses audio prompts."""
    source = TINY_DIR / "tiny_lsd"
    tensors, _ = safetensors_file.load(str(source / "model.safetensors"))
    from core.portable.weights.params import is_voice_cloning_key

    save_tensors(str(tmp_path / "model.safetensors"), {k: v for k, v in tensors.items() if not is_voice_cloning_key(k)})
    config = (
        (source / "config.yaml")
        .read_text()
        .replace("weights_path: model.safetensors", f"weights_path: {tmp_path / 'model.safetensors'}")
    )
    (tmp_path / "config.yaml").write_text(config.replace("../../tokenizers", str(TINY_DIR.parent / "tokenizers")))
    model = TTSModel.load(str(tmp_path / "config.yaml"))
    assert not model.can_clone_voices
    with pytest.raises(VoiceError, match="cannot clone voices"):
        model.voice_state(str(VOICE_24K))
    full = load("tiny_lsd")
    official = str(source / "voice_state.safetensors")
    assert np.array_equal(
        model.generate("Hi there.", official, temperature=0.0, max_frames=4),
        full.generate("Hi there.", official, temperature=0.0, max_frames=4),
    )


def test_the_voice_registry_prepares_each_voice_once_by_one_id_scheme(model, monkeypatch) -> None:
    from core.portable.voice_registry import VoiceRegistry, recording_id

    clones = []
    original = model._encode_voice
    monkeypatch.setattr(model, "_encode_voice", lambda prompt: clones.append(prompt) or original(prompt))
    registry = VoiceRegistry(model, str(VOICE_24K), aliases={"alloy": "default"})
    assert len(clones) == 1 and registry.get(None) is registry.default is registry.get("alloy")
    samples = np.random.default_rng(0).standard_normal(24000).astype(np.float32) * 0.1
    first = registry.add(samples, 24000)
    assert first == recording_id(samples, 24000) == registry.add(samples.copy(), 24000) and len(clones) == 2
    assert recording_id(samples, 22050) != first  # the rate is part of the recording
    assert registry.get(first) is registry.get(first)
    with pytest.raises(VoiceError, match="upload it again"):
        registry.get("upload:" + "0" * 24)
    with pytest.raises(VoiceError, match="unknown voice 'voice.wav': use one of default, alloy"):
        registry.get("voice.wav")  # requests name voices, never files


def test_the_registry_keeps_voices_by_size_and_clones_a_dropped_state_again_from_its_recording(model) -> None:
    """States and recordings are kept by bytes: beyond its states' budget a recording's state is
    dropped and cloned again, the same, from the recording; beyond the recordings' budget too, the
    least recently used recording is gone."""
    from core.portable.voice_registry import VoiceRegistry, _state_bytes

    rng = np.random.default_rng(1)
    recordings = [rng.standard_normal(24000).astype(np.float32) * 0.1 for _ in range(4)]
    probe = VoiceRegistry(model, str(VOICE_24K))
    state_size = _state_bytes(probe.get(probe.add(recordings[0], 24000)))
    kept_size = probe.recording(recordings[0], 24000)[1].nbytes
    registry = VoiceRegistry(model, str(VOICE_24K), state_bytes=2 * state_size, recording_bytes=3 * kept_size)
    ids = [registry.add(samples, 24000) for samples in recordings[:3]]
    first = registry.find(ids[2])
    assert registry.find(ids[0]) is None  # two states fit: the first one's went
    again = registry.get(ids[0])  # its recording is kept: cloned again
    alone = model.voice_state(recordings[0], sample_rate=24000)
    assert all(np.array_equal(a, b) for a, b in zip(again.transformer.keys, alone.transformer.keys))
    assert registry.find(ids[1]) is None and registry.find(ids[2]) is first
    registry.add(recordings[3], 24000)  # a fourth recording: the least recently used one goes
    assert registry.find(ids[1]) is None
    with pytest.raises(VoiceError, match="upload it again"):
        registry.get(ids[1])
