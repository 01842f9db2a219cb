"""LoRA adapters (core/portable/weights/adapter.py): an adapter in PEFT's layout on the tiny model,
merged at load, speaks as the official package does on the same weights merged by hand; its
mistakes are one-line errors naming the key; every entry that loads a model takes it (the command
line's generate, export and batch, the server's settings and so its MCP server)."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import load_file, save_file

from core import PocketTTSError, TTSModel, WeightsError
from core.portable.model import load_weights
from core.portable.weights import adapter as lora
from tests.support.paths import ROOT, TINY_CONFIG
from tests.support.reference import run_reference

TEXT = "Hello there, this is a fine tune speaking."
FRAMES = 12
FORCED = {"temperature": 0.0, "normalize": False, "eos_threshold": float("inf"), "max_frames": FRAMES}
VOICE = str(TINY_CONFIG.parent / "voice_state.safetensors")
# The modules adapted, named in the official FlowLM, as PEFT names them; rank 4, alpha 8, except
# linear1 (rank_pattern 2, alpha_pattern 6).
MODULES = [
    f"transformer.layers.{n}.{name}"
    for n in (0, 1)
    for name in ("self_attn.in_proj", "self_attn.out_proj", "linear1", "linear2")
] + [
    "flow_net.input_proj",
    "flow_net.res_blocks.0.mlp.0",
    "flow_net.res_blocks.0.adaLN_modulation.1",  # stacked with the others at load: its rows of that matrix
    "flow_net.final_layer.adaLN_modulation.1",
    "flow_net.final_layer.linear",
    "out_eos",
]
CONFIG = {
    "peft_type": "LORA",
    "r": 4,
    "lora_alpha": 8,
    "target_modules": [
        "in_proj",
        "out_proj",
        "linear1",
        "linear2",
        "input_proj",
        "mlp.0",
        "adaLN_modulation.1",
        "linear",
        "out_eos",
    ],
    "rank_pattern": {"linear1": 2},
    "alpha_pattern": {"linear1": 6},
}


def _base() -> dict:
    return load_file(str(TINY_CONFIG.parent / "model.safetensors"))


def _rank_alpha(module: str) -> tuple:
    return (2, 6.0) if module.endswith("linear1") else (4, 8.0)


def _pairs(seed: int = 0) -> dict:
    """Trained-looking halves (lora_B is not zero, as PEFT starts it) for every module of MODULES."""
    rng = np.random.default_rng(seed)
    base = _base()
    pairs = {}
    for module in MODULES:
        out, inner = base[f"flow_lm.{module}.weight"].shape
        rank, _ = _rank_alpha(module)
        pairs[module] = (
            (rng.standard_normal((rank, inner)) / math.sqrt(inner)).astype(np.float32),
            (0.1 * rng.standard_normal((out, rank))).astype(np.float32),
        )
    return pairs


def _write_peft(folder: Path, pairs: dict, config: dict = CONFIG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for module, (down, up) in pairs.items():
        tensors[f"base_model.model.{module}.lora_A.weight"] = down
        tensors[f"base_model.model.{module}.lora_B.weight"] = up
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def _merged_by_hand(pairs: dict) -> dict:
    """The base weights with W + alpha / r * B @ A, written here without core's adapter code."""
    weights = _base()
    for module, (down, up) in pairs.items():
        rank, alpha = _rank_alpha(module)
        key = f"flow_lm.{module}.weight"
        weights[key] = (weights[key].astype(np.float64) + alpha / rank * (up.astype(np.float64) @ down)).astype(
            np.float32
        )
    return weights


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    return _write_peft(tmp_path_factory.mktemp("adapter") / "my-voice", _pairs())


def _db(a: np.ndarray, b: np.ndarray) -> float:
    return 10 * math.log10(float(np.sum((a - b) ** 2)) / max(float(np.sum(b**2)), 1e-30))


OFFICIAL = """
import sys
import numpy as np
from pathlib import Path
from pocket_tts import TTSModel

config, voice, text, frames, out = sys.argv[1:]
model = TTSModel.load_model(config=config)
model.temp = 0.0
model.eos_threshold = float("inf")
model._estimate_max_gen_len = lambda _tokens: int(frames)
state = model.get_state_for_audio_prompt(Path(voice))
np.save(out, model.generate_audio(state, text).numpy())
"""


def test_an_adapter_speaks_as_the_official_package_on_the_merged_weights(adapter, tmp_path, reference_python) -> None:
    folder = tmp_path / "merged"
    folder.mkdir()
    save_file(_merged_by_hand(_pairs()), str(folder / "model.safetensors"))
    config = yaml.safe_load(TINY_CONFIG.read_text())
    tokenizer = (TINY_CONFIG.parent / config["flow_lm"]["lookup_table"]["tokenizer_path"]).resolve()
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = str(tokenizer)
    config["weights_path"] = str(folder / "model.safetensors")
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "official.npy"
    run_reference(reference_python, OFFICIAL, str(folder / "config.yaml"), VOICE, TEXT, str(FRAMES), str(out))
    official = np.load(out)

    adapted = TTSModel.load(str(TINY_CONFIG), adapter=str(adapter))
    ours = adapted.generate(TEXT, VOICE, **FORCED)
    base = TTSModel.load(str(TINY_CONFIG)).generate(TEXT, VOICE, **FORCED)
    assert ours.shape == official.shape == base.shape
    assert _db(ours, official) <= -50, _db(ours, official)
    assert _db(base, official) > -20  # the adapter changed the voice: the base is far from it
    assert adapted.adapter == str(adapter)


def test_merged_weights_follow_the_config(adapter) -> None:
    """alpha / r per module (rank_pattern, alpha_pattern), alpha / sqrt(r) with use_rslora; the
    modules named with the official TTSModel's prefix too; a single file with its config in its
    metadata is the same adapter."""
    merged = lora.merged(
        load_weights({"flow_lm": str(TINY_CONFIG.parent / "model.safetensors")}), lora.read(str(adapter))
    )
    by_hand = _merged_by_hand(_pairs())
    for module in MODULES:
        key = f"flow_lm.{module}.weight"
        np.testing.assert_allclose(merged[key], by_hand[key], rtol=1e-5, atol=1e-6)

    rs = _write_peft(adapter.parent / "rslora", _pairs(), dict(CONFIG, use_rslora=True))
    scale = {module: pair.scale for module, pair in lora.read(str(rs)).pairs.items()}
    assert scale["flow_lm.transformer.layers.0.linear1.weight"] == pytest.approx(6 / math.sqrt(2))
    assert scale["flow_lm.transformer.layers.0.linear2.weight"] == pytest.approx(8 / 2)

    single = adapter.parent / "single.safetensors"
    pairs = _pairs()
    tensors = {}
    for module, (down, up) in pairs.items():
        tensors[f"base_model.model.flow_lm.{module}.lora_A.weight"] = down
        tensors[f"base_model.model.flow_lm.{module}.lora_B.weight"] = up
    metadata = {
        "r": "4",
        "lora_alpha": "8",
        "rank_pattern": json.dumps({"linear1": 2}),
        "alpha_pattern": '{"linear1": 6}',
    }
    save_file(tensors, str(single), metadata=metadata)
    read = lora.read(str(single))
    assert read.pairs.keys() == lora.read(str(adapter)).pairs.keys()
    assert all(read.pairs[key].scale == pair.scale for key, pair in lora.read(str(adapter)).pairs.items())


def _error(path: Path) -> str:
    with pytest.raises(WeightsError) as caught:
        TTSModel.load(str(TINY_CONFIG), adapter=str(path))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_adapter_that_does_not_fit_is_a_one_line_error_naming_the_key(tmp_path) -> None:
    pairs = _pairs()
    no_module = dict(pairs, **{"transformer.layers.7.linear1": pairs["transformer.layers.0.linear1"]})
    message = _error(_write_peft(tmp_path / "a", no_module))
    assert "flow_lm.transformer.layers.7.linear1 is no layer of this model" in message

    wrong_rank = dict(pairs)
    down, up = pairs["transformer.layers.1.linear2"]
    wrong_rank["transformer.layers.1.linear2"] = (down[:3], up[:, :3])
    assert "transformer.layers.1.linear2 has rank 3, its config says r = 4" in _error(
        _write_peft(tmp_path / "b", wrong_rank)
    )

    other = dict(pairs)
    other["transformer.layers.0.self_attn.in_proj"] = (np.ones((4, 48), np.float32), np.ones((144, 4), np.float32))
    message = _error(_write_peft(tmp_path / "c", other))
    assert (
        "flow_lm.transformer.layers.0.self_attn.in_proj.weight is [96, 32]" in message
        and "another architecture" in message
    )

    halves = _write_peft(tmp_path / "d", pairs)
    tensors = load_file(str(halves / "adapter_model.safetensors"))
    del tensors["base_model.model.out_eos.lora_B.weight"]
    save_file(tensors, str(halves / "adapter_model.safetensors"))
    assert "out_eos.lora_B.weight is missing" in _error(halves)

    bare = tmp_path / "bare.safetensors"
    save_file({"base_model.model.out_eos.lora_A.weight": np.ones((4, 32), np.float32)}, str(bare))
    assert "no adapter_config.json beside it and no lora_alpha in its metadata" in _error(bare)
    assert "no such adapter" in _error(tmp_path / "nowhere")

    assert "must be a positive whole number, got 'four'" in _error(
        _write_peft(tmp_path / "e", pairs, dict(CONFIG, r="four"))
    )
    assert "rank_pattern has a pattern that is not one" in _error(
        _write_peft(tmp_path / "f", pairs, dict(CONFIG, rank_pattern={"(linear1": 2}))
    )
    broken = dict(pairs)
    down, up = pairs["flow_net.input_proj"]
    broken["flow_net.input_proj"] = (down, np.full_like(up, np.nan))
    assert "flow_net.input_proj has values that are not finite numbers" in _error(_write_peft(tmp_path / "g", broken))


def test_the_command_line_takes_an_adapter(adapter, tmp_path) -> None:
    """generate --adapter speaks the adapted model; export --adapter writes a bundle of the merged
    weights (int8: quantized after merging); a bad adapter is one line on stderr, exit 1."""
    wav = tmp_path / "out.wav"
    command = [sys.executable, "-m", "core.cli", "generate", TEXT, "--model", str(TINY_CONFIG), "--voice", VOICE]
    options = ["--temperature", "0", "--no-normalize", "--eos-threshold", "inf", "--max-frames", str(FRAMES)]
    options += ["-o", str(wav)]
    done = subprocess.run([*command, *options, "--adapter", str(adapter)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert f"with the adapter {adapter}" in done.stderr
    import soundfile

    heard, _ = soundfile.read(str(wav), dtype="float32")
    want = TTSModel.load(str(TINY_CONFIG), adapter=str(adapter)).generate(TEXT, VOICE, **FORCED)
    assert heard.shape == want.shape and np.max(np.abs(heard - want)) < 2 / 32768

    bad = subprocess.run(
        [*command, *options, "--adapter", str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=ROOT
    )
    assert (
        bad.returncode == 1
        and bad.stderr.strip().splitlines()[-1].startswith("error: ")
        and "Traceback" not in bad.stderr
    )

    bundle = tmp_path / "bundle"
    export = [sys.executable, "-m", "core.cli", "export", "--model", str(TINY_CONFIG), "--out", str(bundle)]
    done = subprocess.run([*export, "--adapter", str(adapter)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = load_weights({"flow_lm": str(bundle / "flow_lm.safetensors")})
    by_hand = _merged_by_hand(_pairs())
    key = "flow_lm.transformer.layers.0.linear1.weight"
    step = np.abs(by_hand[key]).max(axis=1, keepdims=True) / 127  # int8: one scale per row
    assert np.all(np.abs(written[key] - by_hand[key]) <= step / 2 + 1e-7)
    assert np.abs(written[key] - _base()[key]).max() > 10 * step.max()


def test_the_server_and_its_mcp_server_take_an_adapter(adapter) -> None:
    from server import mcp_server
    from server.engine import load_engine
    from server.settings import Settings

    assert "adapter" in mcp_server.SETTINGS
    settings = Settings(model=str(TINY_CONFIG), adapter=adapter, voice=VOICE)
    engine = load_engine(settings)
    try:
        model = engine.hosted.model
        assert model.adapter == str(adapter)
        want = TTSModel.load(str(TINY_CONFIG), adapter=str(adapter)).params["flow_lm"]["out_eos"]["weight"]
        np.testing.assert_array_equal(model.params["flow_lm"]["out_eos"]["weight"].dequantize(), want.dequantize())
    finally:
        engine.close()


def test_an_adapter_is_kept_apart_and_shares_every_weight(adapter, tmp_path) -> None:
    """The adapted model holds no copy of the base's weights: an adapted layer is the base's own
    array and the pair (quantize.LowRank), the others are the base's arrays; a second adapter on
    the same base is a second model, the base unchanged; an int8 bundle keeps its int8 weights."""
    from core.portable.network.quantize import Int8Matrix, LowRank

    base = TTSModel.load(str(TINY_CONFIG))
    first, second = base.adapted(str(adapter)), base.adapted(str(_write_peft(tmp_path / "other", _pairs(seed=1))))
    layer = base.params["flow_lm"]["transformer"]["layers"][0]
    for variant in (first, second):
        adapted = variant.params["flow_lm"]["transformer"]["layers"][0]
        assert (
            isinstance(adapted["linear1"]["weight"], LowRank)
            and adapted["linear1"]["weight"].base is layer["linear1"]["weight"]
        )
        assert adapted["norm1"]["weight"] is layer["norm1"]["weight"]
        assert variant.params["mimi"] is base.params["mimi"]
    said = [model.generate(TEXT, VOICE, **FORCED) for model in (base, first, second)]
    assert _db(said[1], said[0]) > -20 and _db(said[2], said[1]) > -20
    assert np.array_equal(said[0], TTSModel.load(str(TINY_CONFIG)).generate(TEXT, VOICE, **FORCED))
    merged = TTSModel.from_files(base.files, tensors=lora.merged(_base(), lora.read(str(adapter))))
    assert _db(said[1], merged.generate(TEXT, VOICE, **FORCED)) < -90  # kept apart is merged, to float rounding

    from core.export import export

    export(str(TINY_CONFIG), str(tmp_path / "bundle"), [VOICE])
    bundle = TTSModel.load(str(tmp_path / "bundle"), adapter=str(adapter))
    weight = bundle.params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"]
    if isinstance(
        TTSModel.load(str(tmp_path / "bundle")).params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"],
        Int8Matrix,
    ):
        assert isinstance(weight.base, Int8Matrix)  # where the kernels multiply int8, the adapter keeps it
    assert _db(bundle.generate(TEXT, VOICE, **FORCED), said[1]) < -20


def test_a_kept_apart_product_is_the_merged_one_on_every_backend() -> None:
    """ops.linear of a LowRank (its base float32 or int8, on NumPy and on the compiled kernels) is
    the product of the merged matrix; stacked (quantize.concatenate), the updates keep their rows."""
    from core import host
    from core.portable.network import ops, quantize

    rng = np.random.default_rng(3)
    weight = rng.standard_normal((320, 256)).astype(np.float32)
    q = quantize.quantize({"w": weight})
    int8 = quantize.Int8Matrix(q["w"], q["w" + quantize.SCALE_SUFFIX])
    down, up = rng.standard_normal((4, 256)).astype(np.float32), rng.standard_normal((320, 4)).astype(np.float32)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    for backend in (ops.NUMPY, host.runtime().backend):
        for base in (weight, int8):
            low_rank = quantize.LowRank(base, down, up)
            for rows in (x, x[0]):  # several rows, and one (a vector)
                with ops.using(backend):
                    got = ops.linear(rows, low_rank)
                    want = ops.linear(rows, base) + rows @ (up @ down).T
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    stacked = quantize.concatenate([weight[:64], quantize.LowRank(weight[64:], down, up[64:])])
    np.testing.assert_allclose(
        stacked.dequantize(), np.concatenate([weight[:64], weight[64:] + up[64:] @ down]), atol=1e-5
    )


def test_a_server_serves_several_adapters_of_its_model_chosen_per_request(adapter, tmp_path) -> None:
    """--also-adapter NAME=PATH: each fine-tune is a model of the server by that name, sharing the
    model's weights (the server holds its pairs, not a copy), its audio the adapted model's."""
    import httpx
    import soundfile

    from core.portable.audio.pcm import pcm16
    from server.engine import load_engine
    from server.served_models import held_bytes
    from server.settings import Settings
    from tests.support.serving import GUARD, serving

    other = _write_peft(tmp_path / "other", _pairs(seed=1))
    pairs = (f"mine={adapter}", f"theirs={other}")
    engine = load_engine(Settings(model=str(TINY_CONFIG), voice=VOICE, also_adapters=pairs))
    try:
        listed = {m.name: (m.language, m.loaded) for m in engine.models.listed()}
        assert listed == {"tiny_lsd": ("english", True), "mine": ("english", True), "theirs": ("english", True)}
        models = [engine.model, engine.models.loaded("mine").model, engine.models.loaded("theirs").model]
        assert held_bytes(models) < 1.1 * held_bytes(models[:1])
        options = {"temperature": 0.0, "seed": 1}
        with serving(engine) as url:
            for name, path in (("mine", adapter), ("theirs", other), (None, None)):
                answer = httpx.post(url + "/generate", json={"text": TEXT, "model": name, **options}, timeout=GUARD)
                samples, _ = soundfile.read(io.BytesIO(answer.content), dtype="int16")
                loaded = TTSModel.load(str(TINY_CONFIG), adapter=None if path is None else str(path))
                want = np.frombuffer(pcm16(loaded.generate(TEXT, VOICE, **options)), "<i2")
                assert np.array_equal(samples, want), name
        assert engine.active == 0
    finally:
        engine.close()
    with pytest.raises(PocketTTSError, match="no layer of this model") as caught:
        broken = _write_peft(
            tmp_path / "broken", {"transformer.layers.9.linear1": _pairs()["transformer.layers.0.linear1"]}
        )
        load_engine(Settings(model=str(TINY_CONFIG), voice=VOICE, also_adapters=(f"broken={broken}",)))
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="NAME=PATH"):
        Settings(model=str(TINY_CONFIG), also_adapters=("=x",)).check()


def test_an_adapter_replaces_the_one_a_model_has(adapter, tmp_path) -> None:
    """adapted() on an adapted model adapts its base: the server's --also-adapter fine-tunes of an
    --adapter model are each the base's with theirs, never two stacked."""
    other = str(_write_peft(tmp_path / "other", _pairs(seed=1)))
    base = TTSModel.load(str(TINY_CONFIG))
    twice = TTSModel.load(str(TINY_CONFIG), adapter=str(adapter)).adapted(other)
    assert twice.adapter == other
    assert np.array_equal(twice.generate(TEXT, VOICE, **FORCED), base.adapted(other).generate(TEXT, VOICE, **FORCED))
