"""Text streaming in, speed and normalization through the model's own entries (core.portable.model):
`stream` of pieces speaks them as their segments complete and equals `stream` of the whole text when
the segments are its chunks; `speed` stretches every entry's audio (1 untouched); `normalize`
changes what the model reads, and only when asked."""

from __future__ import annotations

import numpy as np
import pytest

from core import LimitError, PocketTTSError
from core.portable.model import one_thread
from core.portable.synthesis import planning
from core.portable.synthesis.generation import alone
from core.portable.synthesis.options import GenerationOptions
from core.portable.text.prepare import split_into_chunks
from tests.support.paths import VOICE_24K

# Sentences of 9 to 12 tokens with max_tokens 12: no two fit in one chunk, so the whole text's
# chunks are its sentences, which is what the segmenter gives out as the pieces arrive.
TEXT = "The first sentence has a few words. Then a second one follows it. And the third ends here."
OPTIONS = {"temperature": 0.7, "seed": 11, "max_tokens": 12, "eos_threshold": 1e9, "normalize": False}


@pytest.fixture(scope="module")
def voice(model):
    return model.voice_state(str(VOICE_24K))


def _words(text: str) -> list:
    """The text as an LLM streams it: words with their leading space, and a word cut in two."""
    words = text.split(" ")
    pieces = [words[0]] + [" " + word for word in words[1:]]
    return pieces[:3] + [pieces[3][:2], pieces[3][2:]] + pieces[4:]


def test_a_stream_of_pieces_equals_the_whole_text_when_the_segments_are_its_chunks(model, voice) -> None:
    chunks = split_into_chunks(model.tokenizer, TEXT, OPTIONS["max_tokens"], model.text_options)
    text = model.text_stream(voice, **OPTIONS)
    made = [segment for piece in _words(TEXT) for segment in text.push(piece)] + text.flush()
    assert len(chunks) == 3 and [segment.text for segment in made] == chunks
    assert [segment.spoken for segment in made] == chunks

    whole = np.concatenate(list(model.stream(TEXT, voice, **OPTIONS)))
    streamed = np.concatenate(list(model.stream(_words(TEXT), voice, **OPTIONS)))
    assert np.array_equal(streamed, whole)
    again = np.concatenate(list(model.stream(iter(_words(TEXT)), voice, **OPTIONS)))
    assert np.array_equal(again, streamed)


def test_a_stream_of_pieces_speaks_a_sentence_before_the_next_piece_arrives(model, voice) -> None:
    received = []

    def pieces():
        for piece in _words(TEXT):
            received.append(piece)
            yield piece

    audio = model.stream(pieces(), voice, **OPTIONS)
    next(audio)
    # The first sentence ends with "words." and is complete once the space after it arrives.
    assert "".join(received) == "The first sentence has a few words. Then"


def test_a_text_stream_keeps_to_its_seconds(model, voice) -> None:
    """The segments draw on one budget as they make frames: the stream as a whole makes at most its
    seconds; the segment that runs it out is cut, and more text after it is a LimitError."""
    text = model.text_stream(voice, max_seconds=4.0, **dict(OPTIONS, normalize=True))
    assert text.budget.total == 50
    made = 0
    with pytest.raises(LimitError, match="made the 4 s of audio it may make"):
        while True:
            for segment in text.push("More words to say here. "):
                made += sum(chunk.shape[0] for chunk in model.runtime.runner(model, segment.generation))
    assert made == 50 * model.frame_size and segment.generation.cut


def test_max_frames_caps_each_segment_and_the_stream_shares_its_budget(model, voice) -> None:
    """max_frames is each segment's cap, as it is each request's: a second segment is not refused
    because the first could have used it all (each drew only what it made)."""
    text = model.text_stream(voice, max_seconds=600.0, **dict(OPTIONS, max_frames=7500, eos_threshold=-1e9))
    first, second = text.push("One sentence here. Another one here. ")
    for segment in (first, second):
        list(model.runtime.runner(model, segment.generation))
        assert segment.generation.finished and not segment.generation.cut
    assert text.budget.left == 7500 - 2 * 11  # EOS at the earliest frame, 6, plus 3 + 2 after it


def test_cancel_drops_the_text_stops_the_speech_and_gives_back_what_it_did_not_make(model, voice) -> None:
    text = model.text_stream(voice, max_seconds=10.0, **OPTIONS)
    first, second = text.push("The first sentence has a few words. Then a second one follows it. And")
    rng = text.rng
    audio = one_thread(model, first.generation)  # frames made as they are heard, none ahead
    heard = [next(audio) for _ in range(3)]
    text.cancel()
    assert list(audio) == [] and first.generation.finished and second.generation.finished
    assert text.pending == "" and text.budget.left == text.budget.total - len(heard)
    after = text.push("Something else entirely. ")
    assert [segment.text for segment in after] == ["Something else entirely."] and text.rng is rng
    assert len(list(model.runtime.runner(model, after[0].generation))) > 0


@pytest.mark.parametrize("speed, frames", [(0.25, 1875), (0.5, 3750), (1.0, 7500), (2.0, 7500), (4.0, 7500)])
def test_the_budget_counts_the_audio_after_the_speed_change_and_the_frames_generated(model, voice, speed, frames):
    """600 s of audio is 1875 frames at speed 0.25 (each 80 ms frame lasts 320 ms), and never more
    than 7500 frames of work at any speed."""
    options = dict(OPTIONS, speed=speed)
    assert model.generation("Hi.", voice, max_seconds=600.0, max_frames=frames, **options).frames_left == frames
    with pytest.raises(LimitError, match="max_frames"):
        model.generation("Hi.", voice, max_seconds=600.0, max_frames=frames + 1, **options)
    text = model.text_stream(voice, max_seconds=600.0, **options)
    assert text.budget.total == frames


def test_bad_options_and_pieces_fail_early(model, voice) -> None:
    with pytest.raises(PocketTTSError, match="speed"):
        model.stream(["Hi. "], voice, speed=5.0)
    with pytest.raises(PocketTTSError, match="unknown option"):
        model.text_stream(voice, sped=2.0)
    with pytest.raises(PocketTTSError):
        list(model.stream([b"bytes "], voice, **OPTIONS))


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_stretches_the_audio_of_every_entry(model, voice, speed) -> None:
    options = dict(OPTIONS, max_frames=25)
    normal = np.concatenate(list(model.stream("A steady sentence.", voice, **options)))
    fast = model.generate("A steady sentence.", voice, **dict(options, speed=speed))
    assert abs(fast.shape[0] - normal.shape[0] / speed) <= 0.02 * normal.shape[0] / speed
    piped = np.concatenate(list(model.stream("A steady sentence.", voice, **dict(options, speed=speed))))
    assert np.array_equal(piped, fast)
    streamed = np.concatenate(list(model.stream(["A steady ", "sentence."], voice, **dict(options, speed=speed))))
    assert np.array_equal(streamed, fast)


def test_speed_one_is_the_generated_audio_bit_for_bit(model, voice) -> None:
    options = dict(OPTIONS, max_frames=6)
    decoder = model.decoder()
    frames = list(alone(model, model.generation("Untouched.", voice, **options)))
    plain = [decoder.decode(frame) for frame in frames[:-1]]
    assert frames[-1].end and decoder.decode(frames[-1]) is None  # nothing held back at speed 1
    got = list(model.stream("Untouched.", voice, **dict(options, speed=1.0)))
    assert len(got) == len(plain) and all(np.array_equal(a, b) for a, b in zip(got, plain))


def test_normalization_changes_what_the_model_reads_only_when_asked(model) -> None:
    said = planning.plan(model.reader, "It costs $5.", 50, True)
    spelled = planning.plan(model.reader, "It costs five dollars.", 50, False)
    raw = planning.plan(model.reader, "It costs $5.", 50, False)
    assert model.spoken("It costs $5 [pause:1s] now.") == "It costs five dollars [pause:1s] now."
    assert model.spoken("It costs $5.", normalize_words=False) == "It costs $5."
    assert [c.tokens for c in said] == [c.tokens for c in spelled]
    assert [c.tokens for c in raw] != [c.tokens for c in said]
    assert GenerationOptions().normalize is True
    plain = planning.plan(model.reader, "Nothing to change here.", 50, True)
    assert [c.tokens for c in plain] == [
        c.tokens for c in planning.plan(model.reader, "Nothing to change here.", 50, False)
    ]


@pytest.mark.parametrize(
    "values, message",
    [
        ({"speed": 0.2}, "speed must be from 0.25 to 4.0"),
        ({"speed": 4.5}, "speed must be from 0.25 to 4.0"),
        ({"speed": float("nan")}, "speed must be from 0.25 to 4.0"),
        ({"speed": "fast"}, "speed must be a number from"),
        ({"speed": True}, "speed must be a number from"),
        ({"normalize": "yes"}, "normalize must be true or false"),
        ({"normalize": 1}, "normalize must be true or false"),
    ],
)
def test_speed_and_normalize_are_checked(values, message) -> None:
    with pytest.raises(PocketTTSError, match=message):
        GenerationOptions.of(values).check()
