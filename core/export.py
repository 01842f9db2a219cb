"""Exporting a model as a bundle (the format: core/portable/weights/bundle.py), and a voice as a state file.

The folder is written beside its destination and renamed into place (core.files.NewFolder), so an
interrupted export never leaves a half-written bundle, and a folder there is replaced only where it
is empty or is a bundle exported here, unchanged since: a user's folder is never touched.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import host
from .files import NewFolder, save_tensors, write_atomically
from .portable.errors import PocketTTSError
from .portable.model import TTSModel, load_weights
from .portable.network import quantize
from .portable.voices import state as voice_state
from .portable.voices.state import VoiceSource
from .portable.weights import adapter as lora
from .portable.weights import bundle, params, sources


def export(
    model_source: str,
    out_dir: str,
    voices: Sequence[str] = (),
    int8: bool = True,
    voice_cloning: bool = True,
    int8_group: Optional[int] = None,
    adapter: Optional[str] = None,
) -> Dict[str, object]:
    """Write a bundle of `model_source` to `out_dir` (write_bundle's, made whole beside it: a folder
    there is replaced only where core.files.NewFolder may, checked before any work); returns what was
    written (names, sizes)."""
    with NewFolder(out_dir) as staging:
        report = write_bundle(model_source, staging.path, voices, int8, voice_cloning, int8_group, adapter)
        staging.publish()
    return dict(report, bundle=out_dir)


def write_bundle(
    model_source: str,
    folder: str,
    voices: Sequence[str] = (),
    int8: bool = True,
    voice_cloning: bool = True,
    int8_group: Optional[int] = None,
    adapter: Optional[str] = None,
) -> Dict[str, object]:
    """The bundle of `model_source` written into `folder` (an empty folder of the caller's own
    making: a NewFolder's); returns what was written (names, sizes). `adapter`: a LoRA adapter
    merged into the weights first (an int8 bundle quantizes the merged weights).

    `voices` are predefined names, audio files or voice states; with none, a catalog model
    bundles its default voice. `voice_cloning=False` leaves the Mimi encoder out (smaller; the
    bundle then speaks only with its voice states). int8 bundles quantize the flow LM, the
    voice-cloning encoder and most of the Mimi decoder's bytes (one scale per row, or per
    `int8_group` values); see _decoder_float16 for the decoder's other convolutions.
    """
    if int8_group is not None and (isinstance(int8_group, bool) or not isinstance(int8_group, int) or int8_group < 1):
        raise PocketTTSError(f"the int8 group must be a positive number of values, got {int8_group!r}")
    runtime = host.runtime()
    files = sources.resolve(model_source, runtime.fetch)
    tensors = load_weights(files.weights)
    if adapter is not None:
        tensors = lora.merged(tensors, lora.read(adapter))
    model = TTSModel.from_files(files, tensors, runtime=runtime)
    chosen = list(voices) or ([files.default_voice] if files.default_voice in files.voices else [])
    states = {_voice_name(v): model.voice_state(v) for v in chosen}
    keep_cloning = voice_cloning and model.can_clone_voices
    parts = [part for part in params.PARTS if keep_cloning or part != params.VOICE_CLONING]
    half = lambda key: _decoder_float16(key, tensors[key])  # noqa: E731
    stored = quantize.quantize(tensors, int8_group, half=half) if int8 else tensors
    tokenizer_name = "tokenizer.json" if files.tokenizer.endswith(".json") else "tokenizer.model"
    cfg = dict(files.config.to_dict(), weights_path=None, weights_path_without_voice_cloning=None)
    cfg["flow_lm"]["lookup_table"]["tokenizer_path"] = tokenizer_name
    manifest = bundle.manifest(
        files.name,
        parts,
        tokenizer_name,
        int8,
        keep_cloning,
        list(states),
        files.config.mimi.sample_rate,
    )

    for part in parts:
        part_tensors = {k: v for k, v in stored.items() if params.part_of(k) == part}
        save_tensors(os.path.join(folder, bundle.weights_file(part)), part_tensors, bundle.weights_metadata(int8))
    with open(files.tokenizer, "rb") as f:
        write_atomically(os.path.join(folder, tokenizer_name), f.read())
    os.makedirs(os.path.join(folder, bundle.VOICES))
    for name, state in states.items():
        save_tensors(os.path.join(folder, bundle.voice_file(name)), voice_state.to_tensors(state))
    _write_json(os.path.join(folder, bundle.CONFIG), cfg)
    _write_json(os.path.join(folder, bundle.MANIFEST), manifest)
    return {
        "bundle": folder,
        "voices": list(states),
        "weights_bytes": sum(os.path.getsize(os.path.join(folder, bundle.weights_file(part))) for part in parts),
        "source_weights_bytes": sum(os.path.getsize(path) for path in set(files.weights.values())),
        "total_bytes": sum(os.path.getsize(p) for p in _files(folder)),
    }


# The decoder's convolutions with fewer values than this are stored float16 in an int8 bundle.
DECODER_INT8_CONVOLUTION = 1 << 20


def _decoder_float16(key: str, value: np.ndarray) -> bool:
    """Whether an int8 bundle stores this tensor float16: the Mimi decoder's convolutions, but for
    the two largest (english: its first convolution and first upsampling, 3.4 of its 10 million
    values). Its linear layers are int8, as the flow LM's. Measured on english against the official
    float32 audio (docs/cli.md, "int8 bundles"): the decoder all float16 -41.5 dB, as float32; all
    int8 -39.0 dB; this mix -40.4 dB for 11 MB (float32: 41 MB); the official quantize=True -38.3 dB."""
    if params.part_of(key) != params.DECODER:
        return False
    return value.ndim != 2 and value.size < DECODER_INT8_CONVOLUTION


def export_voice(model: TTSModel, source: VoiceSource, path: str, sample_rate: Optional[int] = None) -> None:
    """Save a voice in the official voice-state format (loads in `pocket-tts` too)."""
    save_tensors(os.fspath(path), voice_state.to_tensors(model.voice_state(source, sample_rate)))


def _voice_name(source: str) -> str:
    base = os.path.basename(source)
    return base.split(".")[0] if "." in base else base


def _write_json(path: str, data: object) -> None:
    write_atomically(path, json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8"))


def _files(directory: str) -> List[str]:
    return [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
