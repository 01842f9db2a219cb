"""Parity with the official pocket-tts 4.0.1, stage by stage and end to end.

The references come from `scripts/make_reference.py` (the official code on the same random
weights, temperature 0). Each stage is fed the *official* input of that stage, so a failure points
at one stage. Bars: the tiny models must agree to float32 rounding (-100 dB) on every stage, the
full-size models to -90 dB.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.portable.audio import pcm as audio
from core.portable.network import flow_lm, mimi
from core.portable.text.prepare import prepare_text_prompt, split_into_chunks
from tests.support.metrics import max_abs, nmse_db
from tests.support.parity import Loaded
from tests.support.paths import VOICE_22K, VOICE_24K
from tests.support.reference import record

# The acceptance bars are -60 dB for latents and -50 dB for audio; float32 reordering gives
# -110 dB or better on every stage of the full-size models, so -90 dB still catches regressions.
FULL_BAR = -90.0
TINY_BAR = -100.0


def check(loaded: Loaded, stage: str, ours: np.ndarray, reference: np.ndarray) -> None:
    ours, reference = np.asarray(ours), np.asarray(reference)
    assert ours.shape == reference.shape, f"{stage}: shape {ours.shape} != official {reference.shape}"
    bar = TINY_BAR if loaded.is_tiny else FULL_BAR
    error, worst = nmse_db(ours, reference), max_abs(ours, reference)
    record(loaded.name, stage, error, worst, bar)
    assert error <= bar, f"{loaded.name} {stage}: NMSE {error:.1f} dB > {bar} dB (max abs {worst:.3g})"


def texts(loaded: Loaded) -> dict:
    return json.loads(str(loaded.ref["texts_json"]))


def forced(loaded: Loaded, voice, text_key: str = "medium", **options) -> np.ndarray:
    """Generation with EOS off for the reference's forced length."""
    return loaded.model.generate(
        texts(loaded)[text_key],
        voice,
        temperature=0.0,
        normalize=False,  # the official reads the text as given
        eos_threshold=float("inf"),
        max_frames=int(loaded.ref["frames"]),
        **options,
    )


def test_text_embeddings(loaded: Loaded) -> None:
    tokens = loaded.ref["tokens"].tolist()
    prepared, _ = prepare_text_prompt(texts(loaded)["medium"], loaded.model.text_options)
    assert loaded.model.tokenizer.encode(prepared) == tokens
    check(
        loaded,
        "text embeddings",
        flow_lm.text_embeddings(loaded.model.params["flow_lm"], tokens),
        loaded.ref["text_emb"],
    )


def test_prompt_waveform(loaded: Loaded) -> None:
    if "voice_audio" not in loaded.ref:
        pytest.skip("this fixture shares its prompt waveform with its base architecture")
    samples, rate = audio.read(str(VOICE_24K))
    check(
        loaded,
        "prompt waveform",
        audio.prepare_prompt(samples, rate, loaded.model.sample_rate),
        loaded.ref["voice_audio"],
    )


@pytest.mark.parametrize(
    "wav, key, stage",
    [
        (VOICE_24K, "voice_latents", "encoder latents (24 kHz file)"),
        (VOICE_22K, "voice22_latents", "encoder latents (22.05 kHz file)"),
    ],
)
def test_encoder_latents(loaded: Loaded, wav, key: str, stage: str) -> None:
    samples, rate = audio.read(str(wav))
    prompt = audio.prepare_prompt(samples, rate, loaded.model.sample_rate)
    check(loaded, stage, mimi.encode(loaded.model.mimi_spec, loaded.model.params["mimi"], prompt), loaded.ref[key])


def test_voice_state_from_audio(loaded: Loaded) -> None:
    ours = loaded.model.voice_state(str(VOICE_24K)).transformer
    official = loaded.official_voice().transformer
    assert ours.offset == official.offset
    stacked = lambda s: np.stack([np.stack(s.keys), np.stack(s.values)])  # noqa: E731
    check(loaded, "voice state", stacked(ours), stacked(official))


def _official_latent_run(loaded: Loaded):
    """Our flow LM driven from the official voice state and tokens, EOS ignored."""
    model = loaded.model
    spec, p = model.flow_spec, model.params["flow_lm"]
    state = loaded.official_voice().transformer.copy()
    flow_lm.prompt(spec, p, state, flow_lm.text_embeddings(p, loaded.ref["tokens"].tolist()))
    zeros = np.zeros((1, spec.latent_dim), np.float32)
    latents, logits = [], []
    latent = None
    for _ in range(int(loaded.ref["frames"])):
        next_latents, next_logits = flow_lm.step(spec, p, [state], [latent], zeros, model.time_terms(1))
        latent = next_latents[0]
        latents.append(latent)
        logits.append(next_logits[0])
    return np.array(latents), np.array(logits, dtype=np.float32)


def test_flow_lm_latents_and_eos_logits(loaded: Loaded) -> None:
    latents, logits = _official_latent_run(loaded)
    check(loaded, "latents", latents, loaded.ref["latents"])
    check(loaded, "EOS logits", logits, loaded.ref["eos_logits"])


def test_flow_lm_hidden_states(loaded: Loaded) -> None:
    model = loaded.model
    spec, p = model.flow_spec, model.params["flow_lm"]
    state = loaded.official_voice().transformer.copy()
    flow_lm.prompt(spec, p, state, flow_lm.text_embeddings(p, loaded.ref["tokens"].tolist()))
    hidden = []
    reference = loaded.ref["hidden"]
    for i in range(reference.shape[0]):
        previous = None if i == 0 else loaded.ref["latents"][i - 1]
        hidden.append(flow_lm.backbone(spec, p, [state], [flow_lm.input_rows(p, [previous])])[0])
    check(loaded, "hidden states (8 frames)", np.array(hidden), reference)


def test_decoder_pcm(loaded: Loaded) -> None:
    model = loaded.model
    p = model.params["flow_lm"]
    latents = loaded.ref["latents"] * p["emb_std"] + p["emb_mean"]
    pcm = mimi.decode(model.mimi_spec, model.params["mimi"], latents)
    fade = np.linspace(0, 1, model.sample_rate // 200, dtype=np.float32)
    pcm[: fade.shape[0]] *= fade
    check(loaded, "decoder PCM", pcm, loaded.ref["pcm_forced"])


def test_end_to_end_from_official_voice_state(loaded: Loaded) -> None:
    check(loaded, "PCM end to end", forced(loaded, loaded.official_voice()), loaded.ref["pcm_forced"])


def test_end_to_end_from_audio_prompt(loaded: Loaded) -> None:
    check(loaded, "PCM end to end (our voice)", forced(loaded, str(VOICE_24K)), loaded.ref["pcm_forced"])


def test_multi_step_head(loaded: Loaded) -> None:
    if "pcm_multistep" not in loaded.ref:
        pytest.skip("one-step head")
    pcm = forced(loaded, loaded.official_voice(), lsd_decode_steps=int(loaded.ref["multistep"]))
    check(loaded, "PCM multi-step head", pcm, loaded.ref["pcm_multistep"])


def test_eos_mid_run_same_frame(loaded: Loaded) -> None:
    if "pcm_eos_mid" not in loaded.ref:
        pytest.skip("no EOS threshold with a safe margin on this fixture")
    pcm = loaded.model.generate(
        texts(loaded)["medium"],
        loaded.official_voice(),
        temperature=0.0,
        normalize=False,  # the official reads the text as given
        eos_threshold=float(loaded.ref["eos_threshold_mid"]),
        max_frames=int(loaded.ref["frames"]),
    )
    assert pcm.shape == loaded.ref["pcm_eos_mid"].shape, "EOS stopped at another frame than the official"
    check(loaded, "PCM EOS mid-run", pcm, loaded.ref["pcm_eos_mid"])


def test_eos_with_model_defaults(loaded: Loaded) -> None:
    pcm = loaded.model.generate(texts(loaded)["short"], loaded.official_voice(), temperature=0.0, normalize=False)
    assert pcm.shape == loaded.ref["pcm_short"].shape, "EOS stopped at another frame than the official"
    check(loaded, "PCM EOS default", pcm, loaded.ref["pcm_short"])


def test_text_chunks(loaded: Loaded) -> None:
    if "pcm_chunks" not in loaded.ref:
        pytest.skip("this fixture shares the multi-chunk run with its base architecture")
    max_tokens = int(loaded.ref["chunk_max_tokens"])
    chunks = split_into_chunks(loaded.model.tokenizer, texts(loaded)["chunks"], max_tokens, loaded.model.text_options)
    assert chunks == json.loads(str(loaded.ref["chunks_json"]))
    pcm = loaded.model.generate(
        texts(loaded)["chunks"],
        loaded.official_voice(),
        temperature=0.0,
        normalize=False,  # the official reads the text as given
        max_tokens=max_tokens,
    )
    assert pcm.shape == loaded.ref["pcm_chunks"].shape
    check(loaded, "PCM text chunks", pcm, loaded.ref["pcm_chunks"])
