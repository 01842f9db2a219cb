"""Pronunciations (core/portable/text/lexicon.py): a file of `word = respelling` lines, read as the
model's own way to say those words on every front (the Python API, the command line, the server):
the audio is the respelled text's, word times name the word as written, and a file that is not
one is a one-line error naming its line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import TextError, TTSModel
from core.portable.text import lexicon
from tests.support.models import timed_tiny
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K

FILE = """# the household's names
Kyutai = kyoo tie
GIF=jif
New York = noo york

nguyen   =   win   # a comment after it
"""
OPTIONS = {"temperature": 0.0, "eos_threshold": float("inf"), "max_frames": 8}


@pytest.fixture
def names(tmp_path) -> Path:
    path = tmp_path / "names.txt"
    path.write_text(FILE)
    return path


@pytest.mark.parametrize(
    "text, said",
    [
        ("Kyutai made a GIF.", "kyoo tie made a jif."),
        ("KYUTAI and kyutai", "kyoo tie and kyoo tie"),
        ("in New   York, Nguyen said", "in noo york, win said"),
        ("GIFs and kyutai-land stay", "GIFs and kyutai-land stay"),  # whole words only
        ("New Yorker", "New Yorker"),
    ],
)
def test_words_are_respelled_whole(names, text: str, said: str) -> None:
    from core.portable.text.normalize import normalize_text

    assert normalize_text(text, "english", lexicon.read(str(names)), words=False) == said


def test_respelled_before_numbers_are_read(names) -> None:
    from core.portable.text.normalize import normalize_text

    assert normalize_text("Kyutai has 3 GIFs and 1 GIF.", "english", lexicon.read(str(names))) == (
        "kyoo tie has three GIFs and one jif."
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("Kyutai kyoo tie", "line 1: expected `word = respelling`"),
        ("\n\nKyutai =", "line 3: expected `word = respelling`"),
        ("= nothing", "line 1: expected `word = respelling`"),
        ("-dash = x", "line 1: '-dash' does not begin and end with a letter or digit"),
        ("x = " + "y" * 101, "line 1: a word and its respelling have at most 100 characters"),
        ("".join(f"w{n} = x\n" for n in range(1001)), "more than 1000 pronunciations"),
    ],
)
def test_a_file_that_is_not_one_is_an_error_naming_its_line(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(TextError, match=message) as caught:
        lexicon.read(str(path))
    assert "\n" not in str(caught.value)
    with pytest.raises(TextError, match="cannot read the pronunciations"):
        lexicon.read(str(tmp_path / "absent.txt"))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 = kaffay".encode("latin-1"))
    with pytest.raises(TextError, match="cannot read the pronunciations"):
        lexicon.read(str(tmp_path / "latin1.txt"))


def test_the_model_speaks_the_respelling_and_times_the_word_as_written(names, tmp_path) -> None:
    model = TTSModel.load(str(TINY_CONFIG))
    model.pronounce(str(names))
    plain = TTSModel.load(str(TINY_CONFIG))
    voice = str(VOICE_24K)
    assert np.array_equal(
        model.generate("Kyutai made a GIF.", voice, **OPTIONS), plain.generate("Kyoo tie made a jif.", voice, **OPTIONS)
    )
    assert model.spoken("Kyutai made a GIF.") == "kyoo tie made a jif."
    timed = timed_tiny(tmp_path)
    timed.pronounce(str(names))
    _, words = timed.generate("Kyutai made a GIF.", voice, words=True, **dict(OPTIONS, max_frames=40))
    assert words and words[0].word == "Kyutai"  # the word as written, not "kyoo"
    assert [w.word for w in words] == ["Kyutai", "made", "a", "GIF."][: len(words)]


def test_every_front_takes_the_file(names, tmp_path) -> None:
    """The command line's normalize and generate (a bad file: one line, exit 1), and the server's
    setting (and so its MCP server, which takes the same)."""
    done = subprocess.run(
        [sys.executable, "-m", "core.cli", "normalize", "Kyutai has 2 GIFs.", "--pronunciations", str(names)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stdout == "kyoo tie has two GIFs.\n", done.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("Kyutai\n")
    done = subprocess.run(
        [sys.executable, "-m", "core.cli", "generate", "Hi.", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
        + ["--pronunciations", str(bad), "-o", str(tmp_path / "x.wav")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and lines[-1] == f"error: {bad}, line 1: expected `word = respelling`, got 'Kyutai'"
    assert not (tmp_path / "x.wav").exists()

    from server import mcp_server
    from server.engine import load_engine
    from server.settings import Settings

    assert "pronunciations" in mcp_server.SETTINGS
    engine = load_engine(Settings(model=str(TINY_CONFIG), voice=str(VOICE_24K), pronunciations=names))
    try:
        assert engine.hosted.model.spoken("Kyutai") == "kyoo tie"
    finally:
        engine.close()


def test_a_request_brings_its_own_pronunciations_over_the_models(names) -> None:
    """`pronunciations=` on generate and stream (a whole text and one in pieces): the audio is the
    respelled text's, a request's word over the model's file, the model's own kept for the next
    request; a pair that is not one is a one-line TextError naming it."""
    model = TTSModel.load(str(TINY_CONFIG))
    model.pronounce(str(names))  # GIF = jif
    voice = model.voice_state(str(VOICE_24K))
    asked = {"GIF": "gift", "Pocket": "pokkit"}
    said = model.generate("Pocket made a GIF.", voice, pronunciations=asked, **OPTIONS)
    assert np.array_equal(said, model.generate("pokkit made a gift.", voice, **OPTIONS))
    pieces = iter(["Pocket made ", "a GIF."])
    assert np.array_equal(np.concatenate(list(model.stream(pieces, voice, pronunciations=asked, **OPTIONS))), said)
    assert np.array_equal(model.generate("a GIF.", voice, **OPTIONS), model.generate("a jif.", voice, **OPTIONS))
    for bad, message in (
        ({"-x": "y"}, "does not begin and end with a letter or digit"),
        ({"word": " "}, "non-blank text"),
        ({"w" * 101: "y"}, "at most 100 characters"),
        ({f"w{n}": "y" for n in range(1001)}, "at most 1000 pairs"),
        ({"word": 5}, "non-blank text"),
    ):
        with pytest.raises(TextError, match=message) as caught:
            model.generate("Hi.", voice, pronunciations=bad, **OPTIONS)
        assert "\n" not in str(caught.value)


def test_the_servers_fronts_take_a_requests_pronunciations() -> None:
    """POST /generate and OpenAI's /v1/audio/speech (an extra field), the WebSocket's start: the
    audio of the respelled text; a bad pair is a 400 naming it."""
    import httpx

    from core.portable.audio.pcm import pcm16
    from server.engine import ServerEngine
    from tests.support.serving import GUARD, as_served, serving
    from tests.support.speech_socket import said

    model = TTSModel.load(str(TINY_CONFIG))
    engine = ServerEngine(model, str(VOICE_24K), 4)
    asked = {"GIF": "jif"}
    options = {"temperature": 0.0, "seed": 1}
    with as_served():
        want = pcm16(model.generate("a jif.", str(VOICE_24K), **options))
    try:
        with serving(engine) as url:
            body = {"text": "a GIF.", "pronunciations": asked, "format": "pcm", **options}
            assert httpx.post(url + "/stream", json=body, timeout=GUARD).content == want
            speech = {"model": "tts-1", "input": "a GIF.", "voice": "alloy", "response_format": "pcm"}
            spoken = httpx.post(url + "/v1/audio/speech", json={**speech, "pronunciations": asked}, timeout=GUARD)
            plain = httpx.post(url + "/v1/audio/speech", json=speech, timeout=GUARD)
            assert spoken.status_code == 200 and len(spoken.content) == len(want) and spoken.content != plain.content
            assert said(url, {"pronunciations": asked, **options}, "a GIF.") == want
            bad = httpx.post(url + "/generate", json={"text": "Hi.", "pronunciations": {"-x": "y"}}, timeout=GUARD)
            assert bad.status_code == 400 and "'-x'" in bad.json()["error"]["message"]
        assert engine.active == 0
    finally:
        engine.close()
