"""Model bundles: a self-contained folder that `TTSModel.load(folder)` loads, here or in the browser.

    bundle.json        format, version, name, file names, voices, default voice
    config.json        the official config schema as JSON (its weights are named in bundle.json)
    flow_lm.safetensors, decoder.safetensors, voice_cloning.safetensors
                       the checkpoint's parts (params.PARTS), int8 (core.quantize) or float32,
                       official key names; a part apart is what one browser worker loads
    tokenizer.json / tokenizer.model
    voices/<name>.safetensors   voice states in the official format

The folder is written beside its destination and renamed into place, so an interrupted export
never leaves a half-written bundle, and an existing folder that is not a bundle is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Dict, List, Optional, Sequence

from . import params, quantize, safetensors_file, sources, voice
from .errors import PocketTTSError
from .model import TTSModel, load_weights


def export(
    model_source: str,
    out_dir: str,
    voices: Sequence[str] = (),
    int8: bool = True,
    voice_cloning: bool = True,
    int8_group: Optional[int] = None,
) -> Dict[str, object]:
    """Write a bundle of `model_source` to `out_dir`; returns what was written (names, sizes).

    `voices` are predefined names, audio files or voice states; with none, a catalog model
    bundles its default voice. `voice_cloning=False` leaves the Mimi encoder out (smaller; the
    bundle then speaks only with its voice states). int8 bundles quantize the flow LM and the
    voice-cloning encoder (one scale per row, or per `int8_group` values) and keep the Mimi decoder
    in float32: it measured the largest share of the int8 error for a small share of the bytes
    (README, "int8 bundles").
    """
    if int8_group is not None and (isinstance(int8_group, bool) or not isinstance(int8_group, int) or int8_group < 1):
        raise PocketTTSError(f"the int8 group must be a positive number of values, got {int8_group!r}")
    files = sources.resolve(model_source)
    tensors = load_weights(files.weights)
    model = TTSModel.from_files(files, tensors)
    chosen = list(voices) or ([files.default_voice] if files.default_voice in files.voices else [])
    states = {_voice_name(v): model.voice_state(v) for v in chosen}
    keep_cloning = voice_cloning and model.can_clone_voices
    parts = [part for part in params.PARTS if keep_cloning or part != params.VOICE_CLONING]
    in_float = lambda key: params.part_of(key) == params.DECODER  # noqa: E731
    stored = quantize.quantize(tensors, int8_group, in_float) if int8 else tensors
    tokenizer_name = "tokenizer.json" if files.tokenizer.endswith(".json") else "tokenizer.model"
    cfg = dict(files.config.to_dict(), weights_path=None, weights_path_without_voice_cloning=None)
    cfg["flow_lm"]["lookup_table"]["tokenizer_path"] = tokenizer_name
    manifest = {
        "format": sources.BUNDLE_FORMAT,
        "version": sources.BUNDLE_VERSION,
        "name": files.name,
        "config": "config.json",
        "weights": {part: f"{part}.safetensors" for part in parts},
        "tokenizer": tokenizer_name,
        "quantization": "int8" if int8 else "float32",
        "voice_cloning": keep_cloning,
        "voices": {name: f"voices/{name}.safetensors" for name in states},
        "default_voice": next(iter(states), None),
        "sample_rate": files.config.mimi.sample_rate,
    }

    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.exists(out_dir) and os.listdir(out_dir) and not os.path.isfile(os.path.join(out_dir, "bundle.json")):
        raise PocketTTSError(f"{out_dir} exists and is not a bundle: choose an empty or new folder")
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".bundle-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it private; a bundle is meant to be served
    try:
        metadata_out = {"format": quantize.FORMAT, "version": quantize.VERSION} if int8 else {}
        for part in parts:
            part_tensors = {k: v for k, v in stored.items() if params.part_of(k) == part}
            safetensors_file.save(os.path.join(staging, f"{part}.safetensors"), part_tensors, metadata_out)
        shutil.copyfile(files.tokenizer, os.path.join(staging, tokenizer_name))
        os.makedirs(os.path.join(staging, "voices"))
        for name, state in states.items():
            voice.save(state, os.path.join(staging, "voices", f"{name}.safetensors"))
        _write_json(os.path.join(staging, "config.json"), cfg)
        _write_json(os.path.join(staging, "bundle.json"), manifest)
        _replace_dir(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "bundle": out_dir,
        "voices": list(states),
        "weights_bytes": sum(os.path.getsize(os.path.join(out_dir, f"{part}.safetensors")) for part in parts),
        "source_weights_bytes": sum(os.path.getsize(path) for path in set(files.weights.values())),
        "total_bytes": sum(os.path.getsize(p) for p in _files(out_dir)),
    }


def _voice_name(source: str) -> str:
    base = os.path.basename(source)
    return base.split(".")[0] if "." in base else base


def _write_json(path: str, data: object) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)


def _replace_dir(staging: str, out_dir: str) -> None:
    """Move the finished bundle into place; an old bundle there is removed only after that."""
    if not os.path.exists(out_dir):
        os.replace(staging, out_dir)
        return
    old = tempfile.mkdtemp(prefix=".old-bundle-", dir=os.path.dirname(os.path.abspath(out_dir)))
    os.rmdir(old)
    os.replace(out_dir, old)
    os.replace(staging, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def _files(directory: str) -> List[str]:
    return [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
