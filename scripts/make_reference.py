"""Make parity fixtures with the official implementation (`pocket-tts==4.0.1`, PyTorch).

For every model named on the command line this writes, under OUT/NAME/:

- `config.yaml`: the official YAML schema with local relative paths, the tokenizer swapped for one
  trained here (tests/fixtures/tokenizers: the real ones cannot be downloaded), a `tokenizer.json`
  or a SentencePiece `.model` as the architecture's own;
- `model.safetensors`: random weights of that architecture in the official key layout, with every
  constant tensor (norm weights, biases, LayerScale, emb_std/emb_mean, speaker projection)
  perturbed so that a port ignoring one of them cannot pass;
- `voice_state.safetensors`: the voice state of the espeak-ng prompt, exported by the official
  `export_model_state` (the `pocket-tts export-voice` format);
- `reference.npz`: intermediate tensors and audio from the official code (see `reference_run`),
  and, for full-size models run for 60 frames or more, the official `quantize=True` audio
  (`pcm_official_int8`), which the int8 bundles are compared with.

NAME is an official config (`english`, `english_2m_2026-10`, ...) or one of the tiny architectures
in TINY_MODELS, which keep every code path but are small enough to commit. scripts/test.sh makes
the full-size ones (the larger ones with `--frames 32`):

    .venv-ref/bin/python -m scripts.make_reference --out tests/fixtures/models tiny_lsd tiny_gqa
    .venv-ref/bin/python -m scripts.make_reference --out build/reference english english_2m_2026-10
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
TOKENIZER_JSON = FIXTURES / "tokenizers" / "unigram4000.json"
TOKENIZER_MODEL = FIXTURES / "tokenizers" / "unigram4000.model"
VOICE_DIR = FIXTURES / "voice"
VOICE_TEXT = "The quick brown fox jumps over the lazy dog, then rests in the warm sun."

TEXT_MEDIUM = (
    "Streaming speech synthesis starts playing the first words while the rest of the "
    "sentence is still being generated on a small CPU."
)
TEXT_SHORT = "hello world"
TEXT_CHUNKS = (
    "The first sentence is short. The second one, which has a comma, is a bit longer; "
    "it goes on. Pi is about 3.14 and that is fine! Does the last one end with a question?"
)
CHUNK_MAX_TOKENS = 12


def _tiny_mimi(**overrides: object) -> dict:
    mimi = {
        "dtype": "float32",
        "sample_rate": 24000,
        "inner_dim": 16,
        "outer_dim": 24,
        "channels": 1,
        "frame_rate": 12.5,
        "seanet": {
            "dimension": 24,
            "channels": 1,
            "n_filters": 4,
            "n_residual_layers": 1,
            "ratios": [6, 5, 4],
            "kernel_size": 7,
            "residual_kernel_size": 3,
            "last_kernel_size": 3,
            "dilation_base": 2,
            "pad_mode": "constant",
            "compress": 2,
        },
        "transformer": {
            "d_model": 24,
            "num_heads": 2,
            "num_layers": 1,
            "layer_scale": 0.01,
            "context": 20,
            "dim_feedforward": 48,
            "input_dimension": 24,
            "output_dimensions": [24],
        },
        "quantizer": {"dimension": 16, "output_dimension": 24},
    }
    mimi.update(overrides)
    return mimi


def _tiny_flow_lm(flow_type: str, **overrides: object) -> dict:
    flow_lm = {
        "insert_bos_before_voice": True,
        "dtype": "float32",
        "flow": {"depth": 2, "dim": 24, "type": flow_type},
        "transformer": {
            "d_model": 32,
            "hidden_scale": 2,
            "max_period": 10000,
            "num_heads": 4,
            "num_layers": 2,
        },
        "lookup_table": {
            "dim": 32,
            "n_bins": 4000,
            "tokenizer": "tokenizers",
            "tokenizer_path": "TOKENIZER_JSON",
        },
    }
    flow_lm.update(overrides)
    return flow_lm


TINY_MODELS: dict[str, dict] = {
    # The default English architecture in miniature: LSD head with two time conditions, BOS before
    # the voice, one SEANet/transformer shared by the encoder and decoder sides.
    "tiny_lsd": {
        "default_temperature": 0.3,
        "replace_characters": {"\u2019": "'", "\u2018": "'"},
        "flow_lm": _tiny_flow_lm("lsd"),
        "mimi": _tiny_mimi(),
    },
    # The english_2m/7m/18m family: grouped-query attention with attn_dim != d_model, explicit
    # dim_feedforward, low-rank text table, z_dim, pointwise head, separate decoder SEANet and
    # transformer, a Mimi transformer whose width differs from SEANet's (input/output projections),
    # a SentencePiece .model tokenizer and the text options the YAML schema has.
    "tiny_gqa": {
        "default_temperature": 0.3,
        "default_eos_threshold": -1.0,
        "pad_with_spaces_for_short_inputs": True,
        "remove_semicolons": True,
        "capitalize_first_letter": False,
        "model_recommended_frames_after_eos": 2,
        "replace_characters": {"\u2013": ",", "\u2014": ",", '"': ""},
        "flow_lm": _tiny_flow_lm(
            "pointwise",
            insert_bos_before_voice=False,
            transformer={
                "d_model": 32,
                "hidden_scale": 1,
                "max_period": 10000,
                "num_heads": 4,
                "num_layers": 3,
                "dim_feedforward": 40,
                "attn_dim": 48,
                "num_kv_heads": 2,
            },
            lookup_table={
                "dim": 32,
                "n_bins": 4000,
                "tokenizer": "sentencepiece",
                "tokenizer_path": "TOKENIZER_MODEL",
                "rank": 8,
            },
            z_dim=16,
        ),
        "mimi": _tiny_mimi(
            outer_dim=16,
            quantizer={"dimension": 16, "output_dimension": 16},
            transformer={
                "d_model": 32,
                "num_heads": 2,
                "num_layers": 1,
                "layer_scale": 0.01,
                "context": 20,
                "dim_feedforward": 48,
                "input_dimension": 24,
                "output_dimensions": [24],
            },
            decoder_seanet={
                "dimension": 16,
                "channels": 1,
                "n_filters": 3,
                "n_residual_layers": 2,
                "ratios": [6, 5, 4],
                "kernel_size": 3,
                "residual_kernel_size": 3,
                "last_kernel_size": 5,
                "dilation_base": 2,
                "pad_mode": "constant",
                "compress": 2,
            },
            decoder_transformer={
                "d_model": 16,
                "num_heads": 2,
                "num_layers": 2,
                "layer_scale": 0.01,
                "context": 12,
                "dim_feedforward": 32,
                "input_dimension": 16,
                "output_dimensions": [16],
            },
        ),
    },
    # english_drifting_26-09 in miniature: the head maps the noise to the sample in one step.
    "tiny_drifting": {
        "append_terminal_punctuation": False,
        "flow_lm": _tiny_flow_lm("drifting"),
        "mimi": _tiny_mimi(),
    },
    # The flow-matching head: one time condition, Euler integration over the decode steps.
    "tiny_flow_matching": {
        "flow_lm": _tiny_flow_lm("flow_matching"),
        "mimi": _tiny_mimi(),
    },
    # A codec whose SEANet hop already gives the frame rate (1920 = 8*8*6*5): no down/upsampling
    # convolutions, latents of SEANet's width, no inner_dim/outer_dim.
    "tiny_no_resample": {
        "flow_lm": _tiny_flow_lm("lsd"),
        "mimi": _tiny_mimi(
            inner_dim=None,
            outer_dim=None,
            seanet={
                "dimension": 16,
                "channels": 1,
                "n_filters": 2,
                "n_residual_layers": 1,
                "ratios": [8, 8, 6, 5],
                "kernel_size": 7,
                "residual_kernel_size": 3,
                "last_kernel_size": 3,
                "dilation_base": 2,
                "pad_mode": "constant",
                "compress": 2,
            },
            transformer={
                "d_model": 16,
                "num_heads": 2,
                "num_layers": 1,
                "layer_scale": 0.01,
                "context": 4,
                "dim_feedforward": 32,
                "input_dimension": 16,
                "output_dimensions": [16],
            },
            quantizer={"dimension": 16, "output_dimension": 16},
        ),
    },
}

CODEC_BIAS_SCALE = 0.1
CODEC_INPUT_SCALE = 2.0
# Frames of the forced-length run: enough to fill the Mimi transformer context windows many times.
FULL_FRAMES = 125
TINY_FRAMES = 24
# The official `quantize=True` (int8 flow LM transformer) on the same weights and text, for the
# comparison with our int8 bundles: this many frames, EOS off.
INT8_FRAMES = 60
# Tiny models that also get the prompt waveform and the multi-chunk run.
EXTENDED_TINY_MODELS = ("tiny_lsd", "tiny_gqa")
# Extra decode steps exercised for the multi-step heads.
MULTI_STEP_RUNS = {"lsd": 3, "flow_matching": 4}


def ensure_voice_prompt() -> tuple[Path, Path]:
    """A spoken prompt made with espeak-ng: its native 22050 Hz file and a 24 kHz version."""
    VOICE_DIR.mkdir(parents=True, exist_ok=True)
    native = VOICE_DIR / "voice_22050.wav"
    resampled = VOICE_DIR / "voice_24000.wav"
    if not native.exists():
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(native), VOICE_TEXT], check=True)
    if not resampled.exists():
        subprocess.run(["sox", str(native), "-r", "24000", "-b", "16", "-c", "1", str(resampled)], check=True)
    return native, resampled


def model_yaml(name: str, dest: Path) -> dict:
    """The YAML dict of NAME with local paths; weights_path left out (random init)."""
    import yaml
    from pocket_tts.utils.config import CONFIGS_DIR

    if name in TINY_MODELS:
        cfg = copy.deepcopy(TINY_MODELS[name])
    else:
        with open(CONFIGS_DIR / f"{name}.yaml", encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        lookup = cfg["flow_lm"]["lookup_table"]
        lookup["tokenizer_path"] = "TOKENIZER_JSON" if lookup["tokenizer"] == "tokenizers" else "TOKENIZER_MODEL"
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        cfg.pop(key, None)
    lookup = cfg["flow_lm"]["lookup_table"]
    source = TOKENIZER_JSON if lookup["tokenizer_path"] == "TOKENIZER_JSON" else TOKENIZER_MODEL
    lookup["tokenizer_path"] = os.path.relpath(source, dest)
    return cfg


def perturb_constants(state_dict: dict, seed: int) -> dict:
    """Make random weights whose outputs depend on every tensor and input.

    Random init leaves many tensors constant (norm weights 1, biases 0, LayerScale, emb_std/mean,
    the speaker projection 0): each gets a seeded random spread, or a port ignoring it would pass.
    And Mimi's default init lets the convolution biases dominate its output, so that decoding all-zero
    latents came within -43 dB of the real audio: a wrong latent would hardly show in the PCM. Codec
    biases are scaled down and its input projections up, so that the audio tests are discriminative
    (`scripts.make_reference` prints how far the audio of zero latents lands from the real one).
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in state_dict.items():
        is_constant = (
            value.is_floating_point()
            and value.numel() > 0
            and not key.endswith(".freqs")
            and bool(torch.all(value == value.reshape(-1)[0]))
        )
        if key.startswith(("mimi.decoder.", "mimi.encoder.")) and key.endswith(".bias"):
            value = value * CODEC_BIAS_SCALE
        elif key.startswith(("mimi.quantizer.", "mimi.upsample.")):
            value = value * CODEC_INPUT_SCALE
        if not is_constant:
            out[key] = value
            continue
        c = float(value.reshape(-1)[0])
        noise = torch.randn(value.shape, generator=gen, dtype=value.dtype)
        if key.endswith("speaker_proj_weight"):
            out[key] = noise / math.sqrt(value.shape[-1])
        elif c == 0.0:
            out[key] = 0.05 * noise
        else:
            out[key] = c * (1.0 + 0.2 * noise)
    return out


def build_model(name: str, dest: Path, seed: int):
    """Random weights of NAME saved to dest/model.safetensors; the model reloaded from that file."""
    import safetensors.torch
    import torch
    import yaml
    from pocket_tts import TTSModel

    dest.mkdir(parents=True, exist_ok=True)
    cfg = model_yaml(name, dest)
    yaml_path = dest / "config.yaml"
    with open(yaml_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)

    # The official loader resolves relative paths against the working directory.
    cwd = os.getcwd()
    os.chdir(dest)
    try:
        torch.manual_seed(seed)
        model = TTSModel.load_model(config=str(yaml_path))
        weights = perturb_constants(model.state_dict(), seed + 1)
        safetensors.torch.save_file({k: v.contiguous() for k, v in weights.items()}, str(dest / "model.safetensors"))
        cfg["weights_path"] = "model.safetensors"
        with open(yaml_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)
        model = TTSModel.load_model(config=str(yaml_path))
    finally:
        os.chdir(cwd)
    # Deterministic reference: no sampling noise, and one frame per decoder call.
    model.temp = 0.0
    model.max_decoder_frames_per_call = 1
    return model, cfg


def pick_mid_threshold(eos_logits, frames: int, frames_after_eos: int) -> tuple[float, int] | None:
    """An EOS threshold whose first crossing (from frame 6 on) lands mid-run, with a wide margin."""
    best = None
    first = 6
    for f in range(first + 2, frames - frames_after_eos - 1):
        before = max(eos_logits[first:f])
        margin = eos_logits[f] - before
        if margin > 0 and (best is None or margin > best[2]):
            best = ((before + eos_logits[f]) / 2, f, margin)
    if best is None or best[2] < 2e-3:
        return None
    return float(best[0]), best[1]


def reference_run(model, cfg: dict, dest: Path, frames: int, extended: bool) -> dict:
    """Every tensor the parity tests compare, computed with the official code.

    `extended` adds the prompt waveform and the multi-chunk run, which the small variants of an
    architecture share with their base and would only make the committed fixtures bigger.
    """
    import numpy as np
    import torch
    from pocket_tts.data.audio import audio_read
    from pocket_tts.data.audio_utils import convert_audio, end_on_pause
    from pocket_tts.models.model_state import export_model_state
    from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences

    native_wav, voice_wav = ensure_voice_prompt()
    sr = model.sample_rate
    flow_lm = model.flow_lm
    out: dict[str, object] = {}

    def prepared(text: str) -> str:
        return prepare_text_prompt(
            text,
            model.pad_with_spaces_for_short_inputs,
            model.remove_semicolons,
            model.append_terminal_punctuation,
            model.capitalize_first_letter,
            model.replace_characters,
        )[0]

    with torch.no_grad():
        tokens = flow_lm.conditioner.prepare(prepared(TEXT_MEDIUM))
        out["tokens"] = tokens[0].numpy()
        out["text_emb"] = flow_lm.conditioner(tokens)[0].numpy()

        # Voice prompt: the waveform handed to the encoder, its latents, the conditioning.
        for tag, path in (("voice", voice_wav), ("voice22", native_wav)):
            audio, file_sr = audio_read(path)
            audio = end_on_pause(convert_audio(audio, file_sr, sr, 1), sr)
            latents = model.mimi.encode_to_latent(audio.unsqueeze(0))
            out[f"{tag}_latents"] = latents[0].numpy()
            if tag == "voice" and extended:
                out["voice_audio"] = audio[0].numpy()
                out["voice_cond"] = model._encode_audio(audio.unsqueeze(0))[0].numpy()
        voice_state = model.get_state_for_audio_prompt(Path(voice_wav))
        export_model_state(voice_state, dest / "voice_state.safetensors")

        # Autoregressive run with EOS ignored, recording the backbone output and EOS logits.
        hidden, eos_logits, latents = [], [], []
        original_backbone = flow_lm.backbone

        def recording_backbone(*args, **kwargs):
            result = original_backbone(*args, **kwargs)
            hidden.append(result[0, -1].clone())
            return result

        hook = flow_lm.out_eos.register_forward_hook(lambda _m, _i, o: eos_logits.append(float(o.reshape(-1)[-1])))
        flow_lm.backbone = recording_backbone
        try:
            state = copy.deepcopy(voice_state)
            offset = model._flow_lm_current_end(state)
            model._expand_kv_cache(state, offset + tokens.shape[1] + frames)
            model._run_flow_lm_and_increment_step(model_state=state, text_tokens=tokens)
            hidden.clear()
            eos_logits.clear()
            backbone_input = torch.full((1, 1, flow_lm.ldim), float("nan"))
            for _ in range(frames):
                latent, _ = model._run_flow_lm_and_increment_step(
                    model_state=state, backbone_input_latents=backbone_input
                )
                latents.append(latent[0, 0].clone())
                backbone_input = latent
        finally:
            flow_lm.backbone = original_backbone
            hook.remove()
        out["hidden"] = torch.stack(hidden[:8]).numpy()
        out["latents"] = torch.stack(latents).numpy()
        out["eos_logits"] = np.array(eos_logits, dtype=np.float32)

        # End to end through the public API, EOS off, forced length.
        default_threshold = model.eos_threshold
        estimate = model._estimate_max_gen_len
        model.eos_threshold = float("inf")
        model._estimate_max_gen_len = lambda _tokens: frames
        out["pcm_forced"] = model.generate_audio(voice_state, TEXT_MEDIUM).numpy()
        flow_type = cfg["flow_lm"]["flow"].get("type", "lsd")
        if flow_type in MULTI_STEP_RUNS:
            model.sampler_decode_steps = MULTI_STEP_RUNS[flow_type]
            out["pcm_multistep"] = model.generate_audio(voice_state, TEXT_MEDIUM).numpy()
            out["multistep"] = np.array(MULTI_STEP_RUNS[flow_type])
            model.sampler_decode_steps = 1

        # EOS on, with a threshold that makes the EOS frame land mid-run.
        after = model.model_recommended_frames_after_eos
        after = (1 + 2) if after is None else after
        picked = pick_mid_threshold(out["eos_logits"].tolist(), frames, after)
        if picked is not None:
            model.eos_threshold = picked[0]
            out["eos_threshold_mid"] = np.array(picked[0], dtype=np.float64)
            out["eos_frame_mid"] = np.array(picked[1])
            out["pcm_eos_mid"] = model.generate_audio(voice_state, TEXT_MEDIUM).numpy()

        # EOS on with the model defaults: a short text, then a text split into several chunks.
        model.eos_threshold = default_threshold
        model._estimate_max_gen_len = estimate
        out["pcm_short"] = model.generate_audio(voice_state, TEXT_SHORT).numpy()
    if extended:
        chunks = split_into_best_sentences(
            flow_lm.conditioner.tokenizer,
            TEXT_CHUNKS,
            CHUNK_MAX_TOKENS,
            model.pad_with_spaces_for_short_inputs,
            remove_semicolons=model.remove_semicolons,
            append_terminal_punctuation=model.append_terminal_punctuation,
            capitalize_first_letter=model.capitalize_first_letter,
            replace_characters=model.replace_characters,
        )
        out["chunks_json"] = np.array(json.dumps(chunks))
        with torch.no_grad():
            out["pcm_chunks"] = model.generate_audio(voice_state, TEXT_CHUNKS, max_tokens=CHUNK_MAX_TOKENS).numpy()
    if frames >= INT8_FRAMES and cfg.get("weights_path"):
        out["pcm_official_int8"] = official_int8_run(model, voice_state, TEXT_MEDIUM, INT8_FRAMES)
    out["texts_json"] = np.array(json.dumps({"medium": TEXT_MEDIUM, "short": TEXT_SHORT, "chunks": TEXT_CHUNKS}))
    out["frames"] = np.array(frames)
    out["chunk_max_tokens"] = np.array(CHUNK_MAX_TOKENS)
    return out


def official_int8_run(model, voice_state, text: str, frames: int):
    """The official int8 model (`quantize=True`: dynamic int8 on the flow LM transformer) on the
    same weights (a copy of the model, quantized in place), then the forced run."""
    import torch
    from pocket_tts.quantization import RECOMMENDED_CONFIG, apply_dynamic_int8

    quantized = copy.deepcopy(model)
    apply_dynamic_int8(quantized.flow_lm, RECOMMENDED_CONFIG)
    quantized.eos_threshold = float("inf")
    quantized._estimate_max_gen_len = lambda _tokens: frames
    with torch.no_grad():
        return quantized.generate_audio(voice_state, text).numpy()


def main() -> None:
    import numpy as np
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write NAME/ into")
    parser.add_argument("--frames", type=int, help="forced-run length (default: 125, tiny: 24)")
    parser.add_argument("names", nargs="+", help="official config names or " + ", ".join(TINY_MODELS))
    args = parser.parse_args()
    torch.set_num_threads(1)

    for index, name in enumerate(args.names):
        start = time.monotonic()
        print(f"[{index + 1}/{len(args.names)}] {name}: building random weights", file=sys.stderr)
        dest = (args.out / name).resolve()
        seed = 1000 + sum(name.encode())
        model, cfg = build_model(name, dest, seed)
        frames = args.frames or (TINY_FRAMES if name in TINY_MODELS else FULL_FRAMES)
        print(f"    running the official model ({frames} frames)", file=sys.stderr)
        extended = name not in TINY_MODELS or name in EXTENDED_TINY_MODELS
        reference = reference_run(model, cfg, dest, frames, extended)
        np.savez_compressed(dest / "reference.npz", **reference)
        size = sum(p.stat().st_size for p in dest.iterdir()) / 1e6
        print(f"    done in {time.monotonic() - start:.1f} s, {size:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
