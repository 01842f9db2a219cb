"""Catalog names, downloads (the real huggingface_hub client against a local fake Hub), bundles, int8.

Download tests run in subprocesses so that HF_ENDPOINT, HF_HOME and HF_TOKEN are read by
huggingface_hub as in real use; nothing here touches the network.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import ConfigError, Runtime, TTSModel
from core.files import save_tensors
from core.portable.model import load_weights
from core.portable.weights import catalog, params, safetensors_file
from tests.support.fake_hub import FakeHub
from tests.support.metrics import nmse_db
from tests.support.parity import model_dir
from tests.support.paths import FIXTURES, ROOT, TINY_DIR, VOICE_24K
from tests.support.reference import record_int8

MODEL = "english_2m_2026-10"
TEXT = "Downloads are cached, then the model speaks offline."
DRIVER = """
import json, sys
import numpy as np
from core import TTSModel, PocketTTSError
model = TTSModel.load(sys.argv[1])
result = {"can_clone": model.can_clone_voices, "default_voice": model.default_voice}
for voice in sys.argv[3:]:
    try:
        pcm = model.generate(sys.argv[2], voice, temperature=0.0, eos_threshold=float("inf"), max_frames=6)
        np.save(voice.replace("/", "_") + ".npy", pcm)
        result[voice] = "ok"
    except PocketTTSError as e:
        result[voice] = "error: " + str(e)
print(json.dumps(result))
"""


@pytest.fixture
def full_model(request) -> Path:
    directory = model_dir(Path(request.config.getoption("--reference-dir")), MODEL)
    if not (directory / "model.safetensors").exists():
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"{directory} is missing")
        pytest.skip(f"the {MODEL} fixture is not built (scripts/test.sh builds it)")
    return directory


def serve_catalog_model(hub: FakeHub, directory: Path) -> None:
    cfg = catalog.config(MODEL)
    hub.add(cfg.weights_path, directory / "model.safetensors")
    hub.add(cfg.weights_path_without_voice_cloning, directory / "model.safetensors")
    hub.add(cfg.flow_lm.lookup_table.tokenizer_path, FIXTURES / "tokenizers" / "unigram4000.model")
    for voice in ("alba", "marius"):
        hub.add(catalog.voice_url(MODEL, voice), directory / "voice_state.safetensors")


def run(args: list, hub_endpoint: str, home: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, HF_ENDPOINT=hub_endpoint, HF_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    environment.pop("HF_HUB_OFFLINE", None) if "HF_HUB_OFFLINE" not in env else None
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=environment, cwd=cwd, timeout=300
    )


@pytest.mark.slow
def test_catalog_model_is_downloaded_cached_and_speaks(tmp_path, full_model: Path) -> None:
    with FakeHub() as hub:
        serve_catalog_model(hub, full_model)
        done = run(["-c", DRIVER, MODEL, TEXT, "alba", "marius", "george"], hub.endpoint, tmp_path / "hf", tmp_path)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        fetched = [r for r in hub.requests if r.startswith("GET")]
    assert result["can_clone"] is True and result["default_voice"] == "alba"
    assert result["alba"] == "ok" and result["marius"] == "ok"
    assert result["george"].startswith("error: could not fetch hf://kyutai/pocket-tts-without-voice-cloning/")
    assert any("/kyutai/pocket-tts/resolve/" in r and r.endswith("model.safetensors") for r in fetched)
    assert any(r.endswith("tokenizer.model") for r in fetched)
    # The same audio as the local files give.
    local = TTSModel.load(str(full_model / "config.yaml"))
    expected = local.generate(
        TEXT, str(full_model / "voice_state.safetensors"), temperature=0.0, eos_threshold=float("inf"), max_frames=6
    )
    assert np.array_equal(np.load(tmp_path / "alba.npy"), expected)

    # Offline afterwards: everything comes from the cache, no request at all.
    with FakeHub() as hub:
        done = run(["-c", DRIVER, MODEL, TEXT, "alba"], hub.endpoint, tmp_path / "hf", tmp_path, HF_HUB_OFFLINE="1")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["alba"] == "ok" and hub.requests == []
    listing = run(["-m", "core.cli", "models"], "http://127.0.0.1:9", tmp_path / "hf", tmp_path)
    rows = {line[3:].split()[0]: line for line in listing.stdout.splitlines()[1:]}
    assert rows[MODEL].startswith("*") and rows[MODEL].endswith(" MB")  # cached: its size on disk
    assert rows["english"].startswith(" ") and rows["english"].endswith("not cached")
    voices = run(["-m", "core.cli", "voices", "--model", MODEL], "http://127.0.0.1:9", tmp_path / "hf", tmp_path)
    listed = {line[3:].split()[0]: line for line in voices.stdout.splitlines()[1:]}
    assert listed["alba"].startswith("*") and "(default)" in listed["alba"] and listed["george"].startswith(" ")


def test_gated_voice_cloning_repo_falls_back_and_refuses_cloning(tmp_path, full_model: Path) -> None:
    with FakeHub() as hub:
        serve_catalog_model(hub, full_model)
        hub.gated.add("kyutai/pocket-tts")
        done = run(["-c", DRIVER, MODEL, TEXT, "alba", str(VOICE_24K)], hub.endpoint, tmp_path / "hf", tmp_path)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert any("pocket-tts-without-voice-cloning" in r for r in hub.requests if r.startswith("GET"))
    assert result["can_clone"] is False and result["alba"] == "ok"
    assert "accept the terms at https://huggingface.co/kyutai/pocket-tts" in result[str(VOICE_24K)]


def test_hf_token_opens_the_gated_repo(tmp_path, full_model: Path) -> None:
    with FakeHub() as hub:
        serve_catalog_model(hub, full_model)
        hub.gated.add("kyutai/pocket-tts")
        hub.token = "hf_test_token"
        done = run(["-c", DRIVER, MODEL, TEXT], hub.endpoint, tmp_path / "hf", tmp_path, HF_TOKEN="hf_test_token")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["can_clone"] is True
        assert not any("without-voice-cloning" in r and r.endswith("model.safetensors") for r in hub.requests)


def test_no_network_is_one_clear_line(tmp_path) -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    done = run(
        ["-m", "core.cli", "generate", "--model", MODEL, "--text", "Hi.", "-o", str(tmp_path / "x.wav")],
        closed,
        tmp_path / "hf",
        tmp_path,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 2  # "loading ..." then the error
    error = done.stderr.splitlines()[-1]
    cfg = catalog.config(MODEL)
    assert error.startswith("error: ") and cfg.weights_path in error and cfg.weights_path_without_voice_cloning in error
    assert "To work offline" in error and "Traceback" not in done.stderr
    assert not (tmp_path / "x.wav").exists()


def test_every_catalog_name_has_a_config_and_voice_paths() -> None:
    names = catalog.model_names()
    for expected in (
        "english",
        "english_2026-10",
        "english_2m_2026-10",
        "english_7m_refl_2026-10",
        "english_18m_2026-10",
        "english_drifting_26-09",
        "french_24l",
        "german",
        "dutch",
    ):
        assert expected in names
    for name in names:
        cfg = catalog.config(name)
        assert cfg.weights_path.startswith("hf://kyutai/pocket-tts/") and "@" in cfg.weights_path
        assert cfg.weights_path_without_voice_cloning.startswith("hf://kyutai/pocket-tts-without-voice-cloning/")
    assert catalog.default_voice("french_24l") == "estelle" and catalog.default_voice("english") == "alba"
    assert catalog.voice_url("english", "alba") == (
        "hf://kyutai/pocket-tts-without-voice-cloning/languages/english/embeddings/alba.safetensors"
        "@a7056f505a4a8ca72d8b5fb1440071d6f1a35739"
    )
    for voice in ("alba", "marius", "javert", "jean", "fantine", "cosette", "eponine", "azelma"):
        assert voice in catalog.voice_names()


def test_predefined_voice_needs_a_catalog_model(model) -> None:
    from core import VoiceError

    with pytest.raises(VoiceError, match="predefined voice 'alba'.*cannot use it"):
        model.voice_state("alba")


def test_a_browser_engine_reads_the_weights_the_worker_wrote_into_the_room_it_reserved(tmp_path, monkeypatch) -> None:
    """browser/worker-boot.js copies each downloaded weights file to the address
    core.browser.engine.reserve gives (here ctypes does): the engine's model then speaks as the
    model loaded from the files does, its tensors views of those bytes, none kept for later."""
    import ctypes

    from core.browser import engine
    from core.export import export
    from core.portable.network import quantize

    monkeypatch.setattr(quantize, "MIN_ELEMENTS", 512)
    out = tmp_path / "bundle"
    export(str(TINY_DIR / "tiny_gqa" / "config.yaml"), str(out), [str(VOICE_24K)])
    files = {name: (out / name).read_bytes() for name in ("flow_lm.safetensors", "decoder.safetensors")}
    for name, data in files.items():
        ctypes.memmove(engine.reserve(str(out / name), len(data)), data, len(data))
        (out / name).write_bytes(b"")  # read from memory, not from here
    browser = engine.BrowserEngine(str(out), "both")
    assert engine._reserved == {} and browser.model.parts == ("flow_lm", "decoder")
    for name, data in files.items():
        (out / name).write_bytes(data)
    options = dict(temperature=0.0, max_frames=4, eos_threshold=float("inf"))
    # Without kernels linked (a worker whose WebAssembly failed), the engine's runtime is NumPy's.
    numpy = Runtime()
    expected = TTSModel.load(str(out), parts=("flow_lm", "decoder"), runtime=numpy).generate(
        "From memory.", None, **options
    )
    assert np.array_equal(browser.model.generate("From memory.", None, **options), expected)


def test_bundle_round_trip(tmp_path, monkeypatch) -> None:
    from core.export import export
    from core.portable.network import quantize

    monkeypatch.setattr(quantize, "MIN_ELEMENTS", 512)  # the tiny model's matrices are all small
    out = tmp_path / "bundle"
    report = export(str(TINY_DIR / "tiny_gqa" / "config.yaml"), str(out), [str(VOICE_24K)])
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["quantization"] == "int8" and manifest["voices"] == {
        "voice_24000": "voices/voice_24000.safetensors"
    }
    assert report["weights_bytes"] < 0.6 * report["source_weights_bytes"]
    # The Mimi decoder: its linear layers int8, its convolutions float16, widened to float32 at load.
    decoder, _ = safetensors_file.load(str(out / "decoder.safetensors"))
    assert decoder["mimi.decoder_transformer.transformer.layers.0.linear1.weight"].dtype == np.int8
    assert decoder["mimi.decoder.model.0.conv.weight"].dtype == np.float16
    assert {v.dtype for v in decoder.values() if v.size < quantize.MIN_ELEMENTS} == {np.dtype(np.float32)}
    loaded = load_weights({"decoder": str(out / "decoder.safetensors")})
    # From the file's bytes in memory (a browser worker's), the same tensors, views of those bytes.
    path = str(out / "decoder.safetensors")
    in_memory = np.fromfile(path, np.uint8)
    from_memory = load_weights({"decoder": path}, in_memory={path: in_memory})
    assert sorted(from_memory) == sorted(loaded)
    assert all(np.array_equal(from_memory[k], loaded[k]) and from_memory[k].dtype == loaded[k].dtype for k in loaded)
    int8 = decoder["mimi.decoder_transformer.transformer.layers.0.linear1.weight"]
    kept = load_weights({"decoder": path}, lambda shape: True, in_memory={path: in_memory})
    assert np.shares_memory(kept["mimi.decoder_transformer.transformer.layers.0.linear1.weight"].values, in_memory)
    assert np.array_equal(kept["mimi.decoder_transformer.transformer.layers.0.linear1.weight"].values, int8)
    assert np.array_equal(loaded["mimi.decoder.model.0.conv.weight"], decoder["mimi.decoder.model.0.conv.weight"])
    assert loaded["mimi.decoder.model.0.conv.weight"].dtype == np.float32
    flow, _ = safetensors_file.load(str(out / "flow_lm.safetensors"))
    assert flow["flow_lm.transformer.layers.0.linear1.weight"].dtype == np.int8
    assert manifest["weights"] == {part: f"{part}.safetensors" for part in ("flow_lm", "decoder", "voice_cloning")}
    bundled = TTSModel.load(str(out))
    assert bundled.default_voice == "voice_24000" and bundled.can_clone_voices
    pcm = bundled.generate("From a bundle.", None, temperature=0.0, max_frames=5)
    assert pcm.shape == (5 * 1920,) and np.abs(pcm).max() > 0
    # Version 1 bundles (one model.safetensors with every part, per-row int8 scales) still load.
    v1 = tmp_path / "v1"
    shutil.copytree(out, v1)
    merged, metadata = {}, {}
    for name in manifest["weights"].values():
        tensors, metadata = safetensors_file.load(str(v1 / name))
        merged.update(
            {k: v.reshape(-1) if k.endswith(".int8_scale") and v.shape[1] == 1 else v for k, v in tensors.items()}
        )
        (v1 / name).unlink()
    save_tensors(str(v1 / "model.safetensors"), merged, dict(metadata, version="1"))
    (v1 / "bundle.json").write_text(json.dumps(dict(manifest, version=1, weights="model.safetensors")))
    assert np.array_equal(TTSModel.load(str(v1)).generate("From a bundle.", None, temperature=0.0, max_frames=5), pcm)
    # Re-exporting over a bundle replaces it; a folder that is not one exported here, unchanged, is never
    # overwritten (core.files.NewFolder: tests/core/test_files.py).
    export(str(TINY_DIR / "tiny_gqa" / "config.yaml"), str(out), [str(VOICE_24K)], int8=False, voice_cloning=False)
    assert json.loads((out / "bundle.json").read_text())["quantization"] == "float32"
    assert not TTSModel.load(str(out)).can_clone_voices
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("do not delete")
    with pytest.raises(ValueError, match="not a folder this tool made"):
        export(str(TINY_DIR / "tiny_gqa" / "config.yaml"), str(precious))
    assert (precious / "thesis.txt").read_text() == "do not delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "precious", "v1"]  # no staging left behind


def test_the_int8_text_table_stays_int8_and_only_the_rows_a_text_uses_are_dequantized(tmp_path, monkeypatch) -> None:
    from core.export import export
    from core.portable.network import flow_lm, quantize

    monkeypatch.setattr(quantize, "MIN_ELEMENTS", 512)  # the tiny model's table is small
    out = tmp_path / "bundle"
    export(str(TINY_DIR / "tiny_gqa" / "config.yaml"), str(out), [str(VOICE_24K)])
    path = str(out / "flow_lm.safetensors")
    in_memory = np.fromfile(path, np.uint8)
    table = load_weights({"flow_lm": path}, in_memory={path: in_memory})["flow_lm.conditioner.embed.weight"]
    assert isinstance(table, quantize.Int8Matrix) and np.shares_memory(table.values, in_memory)
    ids = np.array([3, 0, 3, table.shape[0] - 1, 7])
    assert np.array_equal(table.rows(ids), table.dequantize()[ids]) and table.rows(ids).dtype == np.float32
    # The model's text embeddings are those of the whole table dequantized, as before.
    p = TTSModel.load(str(out)).params["flow_lm"]
    assert isinstance(p["conditioner"]["embed"]["weight"], quantize.Int8Matrix)
    whole = dict(p, conditioner=dict(p["conditioner"], embed={"weight": table.dequantize()}))
    tokens = ids.tolist()
    assert np.array_equal(flow_lm.text_embeddings(p, tokens), flow_lm.text_embeddings(whole, tokens))


@pytest.mark.parametrize("name", ["english", MODEL])
def test_int8_error_side_by_side_with_the_official(tmp_path, request, name: str) -> None:
    """Our int8 bundle and the official `quantize=True`, each against the official float32 output on
    the same weights, text and voice (60 frames, temperature 0): ours must be no worse. Recorded in
    the parity report."""
    from core.export import export

    directory = model_dir(Path(request.config.getoption("--reference-dir")), name)
    if not (directory / "model.safetensors").exists():
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"{directory} is missing")
        pytest.skip("full-size fixture not built")
    reference = np.load(directory / "reference.npz")
    official_int8 = reference["pcm_official_int8"]
    frames = official_int8.shape[0] // 1920
    official_float = reference["pcm_forced"][: frames * 1920]
    voice_file = str(directory / "voice_state.safetensors")
    report = export(str(directory / "config.yaml"), str(tmp_path / "b"), [voice_file])
    text = json.loads(str(reference["texts_json"]))["medium"]
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=frames)
    ours = TTSModel.load(str(tmp_path / "b")).generate(text, voice_file, **options)
    our_error, official_error = nmse_db(ours, official_float), nmse_db(official_int8, official_float)
    record_int8(name, our_error, official_error, report["weights_bytes"], report["source_weights_bytes"])
    assert our_error <= official_error
    assert report["weights_bytes"] < 0.4 * report["source_weights_bytes"]


def _community_checkpoint(folder: Path) -> Path:
    """The tiny model as a community checkpoint would ship it: config.yaml in the official schema
    naming its tokenizer beside it, the weights as model.safetensors (named nowhere)."""
    import yaml

    folder.mkdir(parents=True)
    source = TINY_DIR / "tiny_lsd"
    cfg = yaml.safe_load((source / "config.yaml").read_text())
    tokenizer = (source / cfg["flow_lm"]["lookup_table"]["tokenizer_path"]).resolve()
    cfg["flow_lm"]["lookup_table"]["tokenizer_path"] = "tokenizer.json"
    cfg.pop("weights_path", None)
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    shutil.copy(source / "model.safetensors", folder / "model.safetensors")
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return folder


def test_a_checkpoint_folder_loads_as_its_config_does(tmp_path) -> None:
    folder = _community_checkpoint(tmp_path / "community")
    voice = str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")
    model = TTSModel.load(str(folder))
    assert model.files.weights["flow_lm"] == str(folder / "model.safetensors")
    assert model.files.tokenizer == str(folder / "tokenizer.json")
    config = TTSModel.load(str(TINY_DIR / "tiny_lsd" / "config.yaml"))
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=5)
    assert np.array_equal(
        model.generate("Hello there.", voice, **options), config.generate("Hello there.", voice, **options)
    )
    (folder / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="weights_path: file not found: model.safetensors"):
        TTSModel.load(str(folder))


@pytest.mark.slow
def test_a_community_checkpoint_is_loaded_from_its_hugging_face_repo(tmp_path) -> None:
    """hf://owner/repo[@revision]: its config fetched first, then the files it names, from the same
    repo at the same revision (the real huggingface_hub client against a fake Hub)."""
    folder = _community_checkpoint(tmp_path / "community")
    driver = (
        "import sys, numpy as np; from core import TTSModel; m = TTSModel.load(sys.argv[1]); "
        "np.save('out.npy', m.generate('Hello there.', sys.argv[2], temperature=0.0, eos_threshold=float('inf'), "
        "max_frames=5))"
    )
    voice = str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")
    with FakeHub() as hub:
        for name in ("config.yaml", "model.safetensors", "tokenizer.json"):
            hub.add(f"hf://someone/pocket-tts-community/{name}@v2", folder / name)
        done = run(
            ["-c", driver, "hf://someone/pocket-tts-community@v2", voice], hub.endpoint, tmp_path / "hf", tmp_path
        )
        assert done.returncode == 0, done.stderr
        fetched = sorted(r.rsplit("/", 1)[1] for r in hub.requests if r.startswith("GET") and "/resolve/" in r)
        assert fetched == ["config.yaml", "model.safetensors", "tokenizer.json"], hub.requests
        assert all("/someone/pocket-tts-community/resolve/v2/" in r for r in hub.requests if "/resolve/" in r)
        (tmp_path / "hf" / "hub" / "models--someone--other" / "snapshots" / "abc").mkdir(parents=True)
        listed = run(["-m", "core.cli", "models"], hub.endpoint, tmp_path / "hf", tmp_path, HF_HUB_OFFLINE="1")
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines() if "hf://" in line]
        count = f"{params.parameter_count(TTSModel.load(str(folder)).config) / 1e6:.1f}M"
        assert rows == [["*", "hf://someone/pocket-tts-community@v2", "english", count, "no", rows[0][-2], "MB"]]
        missing = run(
            ["-m", "core.cli", "generate", "Hi.", "--model", "hf://someone/nothing"],
            hub.endpoint,
            tmp_path / "hf",
            tmp_path,
        )
    local = TTSModel.load(str(folder)).generate(
        "Hello there.", voice, temperature=0.0, eos_threshold=float("inf"), max_frames=5
    )
    assert np.array_equal(np.load(tmp_path / "out.npy"), local)
    lines = missing.stderr.strip().splitlines()
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert lines[-1].startswith("error: hf://someone/nothing: no config (config.yaml, config.yml, config.json)")
