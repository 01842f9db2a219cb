"""Generation behaviour that the parity runs do not pin down: sampling, budgets, streaming shape."""

from __future__ import annotations

import numpy as np
import pytest

from core import PocketTTSError, TTSModel
from core.portable.synthesis import planning
from core.portable.synthesis.decoding import decoded
from core.portable.synthesis.generation import alone
from core.portable.synthesis.planning import noise_source
from core.portable.weights.params import DECODER, FLOW_LM, VOICE_CLONING
from tests.support.paths import FIXTURES, TINY_DIR, VOICE_24K


def test_stream_yields_one_frame_per_chunk_and_equals_generate(model: TTSModel, voice) -> None:
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=7)
    chunks = list(model.stream("Streaming in frames.", voice, **options))
    assert len(chunks) == 7
    assert all(c.dtype == np.float32 and c.shape == (model.frame_size,) for c in chunks)
    assert np.array_equal(np.concatenate(chunks), model.generate("Streaming in frames.", voice, **options))


def test_first_chunk_fades_in(model: TTSModel, voice) -> None:
    first = next(iter(model.stream("Fade.", voice, temperature=0.0)))
    assert first[0] == 0.0
    fade = model.sample_rate // 200
    assert np.all(np.abs(first[:fade]) <= np.abs(first[:fade] / np.linspace(0, 1, fade).clip(1e-9)) + 1e-9)


def test_seeded_sampling_is_reproducible(model: TTSModel, voice) -> None:
    options = dict(temperature=0.7, eos_threshold=float("inf"), max_frames=6)
    a = model.generate("Random but reproducible.", voice, seed=1, **options)
    b = model.generate("Random but reproducible.", voice, seed=1, **options)
    c = model.generate("Random but reproducible.", voice, seed=2, **options)
    d = model.generate("Random but reproducible.", voice, rng=np.random.default_rng(1), **options)
    cold = model.generate("Random but reproducible.", voice, temperature=0.0, eos_threshold=float("inf"), max_frames=6)
    assert np.array_equal(a, b) and np.array_equal(a, d)
    assert not np.allclose(a, c) and not np.allclose(a, cold)


def test_noise_source_statistics() -> None:
    zeros = noise_source(32, 0.0, None, 1, None)
    assert not np.any(zeros())
    draw = noise_source(32, 0.49, None, 3, None)
    plain = np.concatenate([draw() for _ in range(400)])
    assert abs(plain.std() - 0.7) < 0.03 and abs(plain.mean()) < 0.03
    draw = noise_source(32, 0.49, 0.5, 3, None)
    clamped = np.concatenate([draw() for _ in range(400)])
    assert clamped.dtype == np.float32 and np.all(np.abs(clamped) <= 0.5)
    # A N(0, 0.7) truncated to +-0.5 has std 0.2735 (sqrt of the truncated-normal variance).
    assert abs(clamped.std() - 0.2735) < 0.01 and abs(clamped.mean()) < 0.02


def test_max_frames_is_a_total_budget_across_chunks(model: TTSModel, voice) -> None:
    text = "One sentence here. Another sentence there. And a third one to finish."
    pcm = model.generate(text, voice, temperature=0.0, eos_threshold=float("inf"), max_frames=10, max_tokens=6)
    assert pcm.shape == (10 * model.frame_size,)
    assert model.generate(text, voice, temperature=0.0, max_frames=0).shape == (0,)


def test_eos_rules(model: TTSModel, voice) -> None:
    """EOS from the first frame on: stopped at the earliest allowed frame plus frames_after_eos."""
    always = dict(temperature=0.0, eos_threshold=-1e9)
    assert model.generate("Hi.", voice, frames_after_eos=0, **always).shape == (6 * model.frame_size,)
    assert model.generate("Hi.", voice, frames_after_eos=4, **always).shape == (10 * model.frame_size,)
    # The default guess: 3 + 2 frames for up to four words, 1 + 2 otherwise.
    assert model.generate("Hi there.", voice, **always).shape == (11 * model.frame_size,)
    assert model.generate("One two three four five.", voice, **always).shape == (9 * model.frame_size,)


def test_length_estimate_caps_a_chunk_without_eos(model: TTSModel, voice) -> None:
    text = "Hi."
    tokens = len(model.tokenizer.encode(text))
    frames = planning.estimate_max_frames(tokens, model.config.mimi.frame_rate)
    assert frames == int(np.ceil((tokens / 3 + 2) * 12.5))
    pcm = model.generate(text, voice, temperature=0.0, eos_threshold=float("inf"))
    assert pcm.shape == (frames * model.frame_size,)


def test_multi_step_decoding_changes_the_result(model: TTSModel, voice) -> None:
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=4)
    one = model.generate("Steps.", voice, **options)
    four = model.generate("Steps.", voice, lsd_decode_steps=4, **options)
    assert one.shape == four.shape and not np.allclose(one, four)


def test_parts_loaded_apart_give_the_same_audio(model: TTSModel) -> None:
    """The flow LM (with voice cloning) in one model and the decoder in another, as the browser's
    two workers load them: frames from one, decoded by the other, give the audio of the whole model."""
    config = str(TINY_DIR / "tiny_lsd" / "config.yaml")
    flow = TTSModel.load(config, parts=(FLOW_LM, VOICE_CLONING))
    decoder = TTSModel.load(config, parts=(DECODER,)).decoder()
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=6)
    voice = flow.voice_state(str(VOICE_24K))
    apart = np.concatenate(
        list(decoded(decoder, alone(flow, flow.generation("Hello [pause:100ms] there.", voice, **options))))
    )
    whole = model.generate("Hello [pause:100ms] there.", model.voice_state(str(VOICE_24K)), **options)
    assert np.array_equal(apart, whole)
    assert "mimi" not in flow.params or "decoder" not in flow.params["mimi"]
    assert set(TTSModel.load(config, parts=(DECODER,)).params) == {"mimi"}


def test_a_model_without_its_flow_lm_reads_its_tokenizer_only_when_asked(monkeypatch) -> None:
    """The browser's decoder worker (the decoder part alone) reads no text: its tokenizer is not read
    at load, but when first asked for, the same as a whole model's; adding the flow LM reads it
    then, so that a tokenizer that does not fit fails at that load, not at the first request."""
    from core.portable.text.tokenizer import Tokenizer
    from core.portable.weights import sources

    config = str(TINY_DIR / "tiny_lsd" / "config.yaml")
    read = []
    from_file = Tokenizer.from_file
    monkeypatch.setattr(Tokenizer, "from_file", classmethod(lambda cls, path: read.append(path) or from_file(path)))
    decoder_only = TTSModel.load(config, parts=(DECODER,))
    assert read == []
    whole = TTSModel.load(config)
    assert len(read) == 1
    assert decoder_only.tokenizer.encode("Hello there.") == whole.tokenizer.encode("Hello there.") and len(read) == 2
    decoder_only.add_parts((FLOW_LM,))
    assert len(read) == 2  # read once
    # A tokenizer of another size than the model's table: adding the flow LM refuses it.
    files = sources.resolve(config)._replace(tokenizer=str(FIXTURES / "tokenizers" / "unigram300.model"))
    mismatched = TTSModel.from_files(files, parts=(DECODER,))
    with pytest.raises(PocketTTSError, match="300 tokens"):
        mismatched.add_parts((FLOW_LM,))
    assert mismatched.parts == (DECODER,)


def test_a_part_that_was_not_loaded_is_a_clear_error() -> None:
    config = str(TINY_DIR / "tiny_lsd" / "config.yaml")
    decoder_only = TTSModel.load(config, parts=(DECODER,))
    with pytest.raises(PocketTTSError, match="without its flow lm"):
        decoder_only.generation("Hello.", None)
    with pytest.raises(PocketTTSError, match="without its voice cloning"):
        decoder_only.voice_state(str(VOICE_24K))
    with pytest.raises(PocketTTSError, match="without its decoder"):
        TTSModel.load(config, parts=(FLOW_LM,)).decoder()


def test_the_derived_layouts_leave_the_checkpoint_as_it_is() -> None:
    """prepare() returns new dicts: the checkpoint's nested tensors are not rewritten, and what a
    derived layout replaces is not held beside it."""
    from core.portable.model import load_weights
    from core.portable.network import flow_lm, mimi
    from core.portable.weights import params
    from core.portable.weights.sources import resolve

    files = resolve(str(TINY_DIR / "tiny_lsd" / "config.yaml"))
    nested = params.nest(load_weights(files.weights))
    spec = mimi.MimiSpec.from_config(files.config.mimi)
    flow, codec = flow_lm.prepare(nested["flow_lm"]), mimi.prepare(spec, nested["mimi"])
    assert "modulation" in flow["flow_net"] and "modulation" not in nested["flow_lm"]["flow_net"]
    assert "adaLN_modulation" in nested["flow_lm"]["flow_net"]["res_blocks"][0]
    convtr = [layer for layer in codec["decoder"]["model"] if layer and "convtr" in layer]
    assert convtr and all("taps" in layer["convtr"] and "weight" not in layer["convtr"] for layer in convtr)
    assert "weight" not in codec["upsample"]["convtr"]["convtr"]
    checkpoint = [layer for layer in nested["mimi"]["decoder"]["model"] if layer and "convtr" in layer]
    assert all("weight" in layer["convtr"] and "taps" not in layer["convtr"] for layer in checkpoint)
