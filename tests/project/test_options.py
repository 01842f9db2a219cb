"""The generation options have one home (core.portable.synthesis.options.GenerationOptions): the docs' table
(docs/options.md), the command line's flags and the server's request fields are checked against it,
so they cannot drift."""

from __future__ import annotations

import dataclasses
import re

import msgspec
import pytest

from core import PocketTTSError
from core.cli import parser
from core.portable.synthesis.options import GenerationOptions, names
from server.schemas import GenerateRequest
from tests.support.paths import ROOT


def test_the_docs_table_is_the_options_and_their_docs() -> None:
    page = (ROOT / "docs" / "options.md").read_text()
    table = page[page.index("| option | meaning |") :].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", table, re.M)
    assert rows == [(f.name, f.metadata["doc"]) for f in dataclasses.fields(GenerationOptions)]


def test_the_command_line_has_a_flag_per_option() -> None:
    args = parser().parse_args(["generate", "--max-tokens", "7", "--noise-clamp", "2.5", "--lsd-decode-steps", "2"])
    assert set(names()) <= set(vars(args))
    assert (args.max_tokens, args.noise_clamp, args.lsd_decode_steps, args.temperature) == (7, 2.5, 2, None)


def test_the_server_takes_every_option_by_name() -> None:
    assert [
        f
        for f in GenerateRequest.__struct_fields__
        if f not in ("text", "voice", "sample_rate", "model_name", "pronunciations")
    ] == names()
    request = msgspec.json.decode(b'{"text": "Hi.", "max_tokens": 7, "noise_clamp": 2.5}', type=GenerateRequest)
    assert request.options() == GenerationOptions(max_tokens=7, noise_clamp=2.5)


def test_unknown_options_and_values_out_of_range_are_clear_errors(model, voice) -> None:
    with pytest.raises(PocketTTSError, match="unknown option 'temprature'"):
        GenerationOptions.of({"temprature": 0.5})
    with pytest.raises(PocketTTSError, match="unknown option 'sped'"):
        model.generate("Hi.", voice, sped=2)
    for bad, name in [({"max_tokens": 0}, "max_tokens"), ({"seed": -1}, "seed"), ({"noise_clamp": 0.0}, "noise_clamp")]:
        with pytest.raises(PocketTTSError, match=name):
            GenerationOptions(**bad).check()


def test_pause_markup_is_silence_unless_pauses_is_false() -> None:
    """pauses=False (LiveKit's default): the markup is text like any other, tokenized with the rest."""
    from core import TTSModel
    from core.portable.synthesis import planning

    model = TTSModel.load(str(ROOT / "tests" / "fixtures" / "models" / "tiny_lsd" / "config.yaml"))
    text = "Hello [pause:1s] there."
    with_pauses = planning.plan(model.reader, text, 50)
    as_text = planning.plan(model.reader, text, 50, pauses=False)
    assert [item for item in with_pauses if isinstance(item, int)] == [model.sample_rate]
    assert not [item for item in as_text if isinstance(item, int)] and len(as_text) == 1
    assert len(as_text[0].tokens) > sum(len(item.tokens) for item in with_pauses if not isinstance(item, int))
    with pytest.raises(PocketTTSError, match="pauses must be true or false"):
        GenerationOptions(pauses="no").check()
