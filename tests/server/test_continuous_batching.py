"""Generations stepped together (core.portable.synthesis: generation.advance, decoding.decode_together)
give each one the audio it gets alone: whatever joins or leaves, whatever its voice and options, however its text
is read."""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pytest

from core import TTSModel
from core.portable.synthesis.decoding import decode_together
from core.portable.synthesis.generation import Frame, advance, alone
from tests.support.metrics import nmse_db
from tests.support.paths import VOICE_24K

# (text, voice: "official" state or "cloned" from a recording, options)
REQUESTS = [
    ("Hello there, the first one.", "official", {"temperature": 0.0, "max_frames": 9, "eos_threshold": 1e9}),
    ("A second [pause:130ms] with a pause, and two chunks. Of text.", "cloned", {"temperature": 0.0, "max_tokens": 6}),
    ("Sampled with a seed.", "official", {"temperature": 0.7, "seed": 5, "max_frames": 7, "eos_threshold": 1e9}),
    ("Four flow steps a frame.", "cloned", {"temperature": 0.3, "seed": 1, "lsd_decode_steps": 4, "max_frames": 6}),
    ("Stops early at its own threshold.", "official", {"temperature": 0.0, "eos_threshold": -1e9}),
]


@pytest.fixture(scope="module")
def voices(model: TTSModel, voice) -> Dict[str, object]:
    return {"official": voice, "cloned": model.voice_state(str(VOICE_24K))}


@pytest.fixture(scope="module")
def expected(model: TTSModel, voices) -> List[np.ndarray]:
    return [model.generate(text, voices[v], **options) for text, v, options in REQUESTS]


def together(model: TTSModel, voices, joins: Dict[int, List[int]], prompt_rows: Optional[int]) -> List[np.ndarray]:
    """REQUESTS stepped together, request i joining at the step where joins lists it."""
    running, audio = [], {}
    step = 0
    while step <= max(joins) or any(not generation.finished for _, generation, _ in running):
        for i in joins.get(step, []):
            text, v, options = REQUESTS[i]
            running.append((i, model.generation(text, voices[v], **options), model.decoder()))
            audio[i] = []
        live = [(i, g, d) for i, g, d in running if not g.finished]
        frames = advance(model, [g for _, g, _ in live], prompt_rows)
        made = [(i, d, f) for (i, _, d), f in zip(live, frames) if f is not None]
        for (i, _, _), chunk in zip(made, decode_together([d for _, d, _ in made], [f for _, _, f in made])):
            if chunk is not None:
                audio[i].append(chunk)
        step += 1
    return [np.concatenate(audio[i]) for i in range(len(REQUESTS))]


def test_generations_stepped_together_each_give_their_audio_alone(model, voices, expected) -> None:
    joins = {0: [0, 1], 2: [2], 5: [3, 4]}  # two start together, the others join mid-way
    for got, want in zip(together(model, voices, joins, None), expected):
        assert got.shape == want.shape and nmse_db(got, want) < -90


def test_a_text_read_a_few_rows_a_step_gives_the_same_audio(model, voices, expected) -> None:
    for got, want in zip(together(model, voices, {0: [0, 1, 2, 3, 4]}, prompt_rows=2), expected):
        assert got.shape == want.shape and nmse_db(got, want) < -90


def test_decoding_together_equals_decoding_alone(model, voice) -> None:
    options = {"temperature": 0.0, "max_frames": 6, "eos_threshold": 1e9}
    streams = [
        list(alone(model, model.generation(text, voice, **options)))
        for text in ("One.", "Two, a bit longer.", "Three!")
    ]
    together_decoders = [model.decoder() for _ in streams]
    alone_decoders = [model.decoder() for _ in streams]
    for step in range(6):
        frames = [stream[step] for stream in streams]
        for decoder, frame, pcm in zip(alone_decoders, frames, decode_together(together_decoders, frames)):
            assert pcm.shape == (model.frame_size,) and nmse_db(pcm, decoder.decode(frame)) < -100
    assert [stream[6].end for stream in streams] == [True] * 3 and len(streams[0]) == 7  # END after the 6 frames
    assert decode_together(together_decoders, [stream[6] for stream in streams]) == [None] * 3  # speed 1: no tail
    pcm = decode_together([model.decoder(), model.decoder()], [Frame(None, 700, False), streams[0][0]])
    assert np.array_equal(pcm[0], np.zeros(700, np.float32)) and pcm[1].shape == (model.frame_size,)
