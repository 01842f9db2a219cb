"""`pocket-tts-numpy mcp` in a real MCP session: the `mcp` SDK's own client starts it over stdio,
initializes, lists the tools and calls each; refusals are MCP tool errors naming their code."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import stat
import sys
from typing import Any

import pytest
import soundfile

from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.serving import GUARD

mcp = pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10")


async def session_of(work: Any, *options: str) -> Any:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = ["-m", "core.cli", "mcp", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), *options]
    parameters = StdioServerParameters(command=sys.executable, args=command, cwd=str(ROOT))
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def run(work: Any, *options: str) -> Any:
    return asyncio.run(asyncio.wait_for(session_of(work, *options), GUARD * 2))


def test_the_tools_speak_list_and_refuse(tmp_path) -> None:
    async def work(session: Any) -> Any:
        tools = sorted(tool.name for tool in (await session.list_tools()).tools)
        spoken = await session.call_tool("speak", {"text": "Hello from an agent.", "speed": 1.5})
        written = await session.call_tool("speak", {"text": "Into a file.", "format": "flac", "file": "said.flac"})
        voices = await session.call_tool("list_voices", {})
        models = await session.call_tool("list_models", {})
        refused = [
            await session.call_tool("speak", arguments)
            for arguments in (
                {"text": "Hi.", "voice": "nobody"},
                {"text": "Hi.", "file": "../escape.wav"},
                {"text": "   "},
                {"text": "x" * 6000},
                {"text": "Hi.", "speed": 9},
            )
        ]
        return tools, spoken, written, voices, models, refused

    tools, spoken, written, voices, models, refused = run(work, "--output-dir", str(tmp_path))
    assert tools == ["list_models", "list_voices", "speak", "speak_aloud", "stop_speaking"]
    [audio] = spoken.content
    assert not spoken.is_error and audio.type == "audio" and audio.mime_type == "audio/wav"
    samples, rate = soundfile.read(io.BytesIO(base64.b64decode(audio.data)))
    assert rate == 24000 and samples.size > 0
    assert not written.is_error and "said.flac" in written.content[0].text
    assert soundfile.info(str(tmp_path / "said.flac")).format == "FLAC"
    listed = json.loads(voices.content[0].text)
    assert listed[0]["kind"] == "default" and listed[0]["voice"] == VOICE_24K.stem
    described = json.loads(models.content[0].text)
    assert described["loaded"]["name"] == TINY_CONFIG.parent.name and "english" in described["catalog"]
    said = [result.content[0].text for result in refused]
    assert all(result.is_error for result in refused), said
    for text, code in zip(said, ("unknown_voice", "bad_path", "empty_text", "text_too_long", "invalid_value")):
        assert text.startswith(code + ":") or code in text, (code, text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["said.flac"]


def test_without_an_output_folder_no_file_is_written(tmp_path) -> None:
    async def work(session: Any) -> Any:
        return await session.call_tool("speak", {"text": "Hi.", "file": "a.wav"})

    result = run(work)
    assert result.is_error and "writes no files" in result.content[0].text


def test_a_file_is_always_new_and_a_bad_name_is_a_typed_refusal(tmp_path) -> None:
    """The output folder's files are the user's: a name that is taken (their file, a link planted to
    elsewhere, a FIFO that would hang whoever opens it) gets the next free name, and nothing there is
    opened, followed or replaced; a name no file system takes is `bad_path`, never a traceback."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere.txt"
    out.mkdir()
    (out / "notes.txt").write_text("the user's notes")
    elsewhere.write_text("not in the output folder")
    (out / "link.wav").symlink_to(elsewhere)
    (out / "dangling.wav").symlink_to(tmp_path / "nothing-yet.wav")
    os.mkfifo(out / "pipe.wav")
    names = ["notes.txt", "link.wav", "dangling.wav", "pipe.wav", "notes.txt"]
    bad = ["a\x00b.wav", "x" * 300 + ".wav", "tab\there.wav", "..", "sub/dir.wav", ""]

    async def work(session: Any) -> Any:
        written = [await session.call_tool("speak", {"text": "Hi.", "file": name}) for name in names]
        refused = [await session.call_tool("speak", {"text": "Hi.", "file": name}) for name in bad]
        return written, refused

    written, refused = run(work, "--output-dir", str(out))
    said = [result.content[0].text for result in written]
    assert not any(result.is_error for result in written), said
    made = ["notes-2.txt", "link-2.wav", "dangling-2.wav", "pipe-2.wav", "notes-3.txt"]
    assert [text.split()[1] for text in said] == [str(out / name) for name in made]
    assert (out / "notes.txt").read_text() == "the user's notes" and elsewhere.read_text() == "not in the output folder"
    assert os.readlink(out / "link.wav") == str(elsewhere) and not (tmp_path / "nothing-yet.wav").exists()
    assert stat.S_ISFIFO(os.lstat(out / "pipe.wav").st_mode)
    for name in made:
        assert soundfile.info(str(out / name)).samplerate == 24000
    for result in refused:
        text = result.content[0].text
        assert result.is_error and "bad_path: " in text and "Traceback" not in text, text
    expected = {"notes.txt", "link.wav", "dangling.wav", "pipe.wav", *made}
    assert {p.name for p in out.iterdir()} == expected  # no temporary file left behind


def test_speak_takes_a_loudness() -> None:
    async def work(session: Any) -> Any:
        plain = await session.call_tool("speak", {"text": "A level for the agent.", "speed": 1.0})
        leveled = await session.call_tool("speak", {"text": "A level for the agent.", "loudness": -14})
        refused = await session.call_tool("speak", {"text": "Hi.", "loudness": -60})
        return plain, leveled, refused

    plain, leveled, refused = run(work)
    peaks = []
    for result in (plain, leveled):
        samples, _ = soundfile.read(io.BytesIO(base64.b64decode(result.content[0].data)))
        peaks.append(abs(samples).max())
    assert peaks[1] > 4 * peaks[0] and peaks[1] <= 10 ** (-1 / 20) + 1e-4
    assert refused.is_error and "invalid_value: loudness must be between -40 and -5 LUFS" in refused.content[0].text


def test_speak_takes_pronunciations_and_refuses_a_bad_pair() -> None:
    async def work(session: Any) -> Any:
        said = await session.call_tool("speak", {"text": "A GIF.", "pronunciations": {"GIF": "jif"}})
        refused = await session.call_tool("speak", {"text": "Hi.", "pronunciations": {"-x": "y"}})
        return said, refused

    said, refused = run(work)
    assert not said.is_error and said.content[0].type == "audio"
    assert refused.is_error and "invalid_text: pronunciations, '-x'" in refused.content[0].text
