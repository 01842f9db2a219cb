"""`pocket-tts-numpy mcp`: an MCP server (the Model Context Protocol, over stdio, with the `mcp`
SDK) that coding and desktop agents speak through. Its tools:

    speak(text, voice?, speed?, format?, file?)   the speech as MCP audio content, or written to
                                                   `file` in the --output-dir folder (a name there,
                                                   nothing above it)
    list_voices()                                  every voice a call may name, with its kind
    list_models()                                  the loaded model, and the catalog

Each call is a session of the one engine (server/session.py: a slot, the text and audio limits of
every front, its error codes), its caller the person who started the server (a key holder: MCP
over stdio is their own process). A refusal is an MCP tool error naming its code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, List, Literal, Optional

import anyio

from core import PocketTTSError, audio_formats, threads
from core.files import check_writable, write_atomically
from core.portable import catalog
from core.portable.options import GenerationOptions
from server import errors
from server.access import KEY_HOLDER
from server.engine import ServerEngine, load_engine
from server.errors import ServiceError
from server.session import Session
from server.settings import Settings, SettingsError

FORMATS = ("wav", "mp3", "flac", "opus")


class Speaker:
    """The tools' work on an engine; files go to `output_dir` only (None: no file is written)."""

    def __init__(self, engine: ServerEngine, output_dir: Optional[Path]):
        self.engine = engine
        self.output_dir = output_dir

    async def speak(self, text: str, voice: Optional[str], speed: float, fmt: str) -> bytes:
        """The whole speech of `text` as a file in `fmt` (a ServiceError for any refusal)."""
        if fmt not in FORMATS or not audio_formats.available(fmt):
            writable = ", ".join(f for f in FORMATS if audio_formats.available(f))
            raise ServiceError(errors.UNSUPPORTED_VALUE, f"format {fmt!r}: use one of {writable}", "format")
        file = audio_formats.WholeFile(fmt, self.engine.sample_rate)
        session = await Session.open(self.engine, voice, GenerationOptions(speed=speed), caller=KEY_HOLDER)
        try:
            await session.say(text)
            await session.end()
            async for chunk in session.audio():
                await anyio.to_thread.run_sync(file.add, chunk)  # encoded as it is made, off the event loop
        finally:
            session.close()
        return await anyio.to_thread.run_sync(file.end)

    def target(self, name: str) -> Path:
        """Where a file named `name` goes: in the output folder, nowhere else (a name with a folder in
        it, or one that climbs out, is refused before any work)."""
        if self.output_dir is None:
            raise ServiceError(
                errors.UNSUPPORTED_VALUE, "this server writes no files: start it with --output-dir DIR", "file"
            )
        if not name or Path(name).name != name or name in (".", ".."):
            message = f"file {name!r}: give a file name, without folders (it goes to the output folder)"
            raise ServiceError(errors.BAD_PATH, message, "file")
        path = self.output_dir / name
        try:
            check_writable(str(path))
        except PocketTTSError as e:
            raise ServiceError(errors.BAD_PATH, str(e), "file") from None
        return path

    def voices(self) -> List[dict]:
        return [voice._asdict() for voice in self.engine.voice_list(KEY_HOLDER)]

    def models(self) -> dict:
        loaded = dict(self.engine.description, name=self.engine.name, sample_rate=self.engine.sample_rate)
        return {"loaded": loaded, "catalog": catalog.model_names()}


def build(speaker: Speaker) -> Any:
    """The MCP server of `speaker`'s tools."""
    from mcp.server.mcpserver import Audio, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(
        name="pocket-tts-numpy",
        instructions="Speak text aloud with Kyutai's Pocket TTS: `speak` returns the audio, or writes it to a file.",
    )

    async def refused(work: Any) -> Any:
        try:
            return await work
        except ServiceError as e:
            raise ToolError(f"{e.code}: {e.message}") from None

    @server.tool()
    async def speak(
        text: str,
        voice: Optional[str] = None,
        speed: float = 1.0,
        format: Literal["wav", "mp3", "flac", "opus"] = "wav",  # noqa: A002 -- the tool's argument name
        file: Optional[str] = None,
    ) -> Any:
        """Speak `text` (up to 5000 characters; pause markup such as [pause:500ms] allowed) in
        `voice` (a name from list_voices; default: the server's) at `speed` (0.25-4). Returns the
        audio, or, with `file` (a file name), writes it to the server's output folder."""

        async def work() -> Any:
            path = speaker.target(file) if file is not None else None
            data = await speaker.speak(text, voice, speed, format)
            if path is None:
                return Audio(data=data, format="mpeg" if format == "mp3" else format)
            await anyio.to_thread.run_sync(write_atomically, str(path), data)
            return f"wrote {path} ({len(data)} bytes, {format})"

        return await refused(work())

    @server.tool()
    async def list_voices() -> str:
        """Every voice `speak` may name: id (what to pass as voice), kind, and the language it was
        recorded in where known."""
        return json.dumps(await anyio.to_thread.run_sync(speaker.voices))

    @server.tool()
    async def list_models() -> str:
        """The model this server speaks with (its language, parameters, sample rate, whether it
        times words), and the catalog's models (another one needs another server)."""
        return json.dumps(speaker.models())

    return server


# The server's settings the MCP server takes (server/settings.py): the engine's.
SETTINGS = ("model", "voice", "max_concurrent", "voices_dir")


def main(argv: Optional[List[str]] = None, prog: str = "pocket-tts-numpy mcp") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="An MCP server (stdio) that speaks text")
    Settings.add_arguments(parser, SETTINGS)
    parser.add_argument("--output-dir", help="the folder `speak` may write files to (default: it writes none)")
    args = vars(parser.parse_args(argv))
    output = args.pop("output_dir", None)
    try:
        settings = Settings.from_environment().updated(args, "the command line")
    except SettingsError as e:
        parser.error(str(e))
    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError:
        print("error: the MCP server needs the `mcp` package: pip install 'pocket-tts-numpy[mcp]'", file=sys.stderr)
        return 1
    output_dir = Path(output).expanduser() if output else None
    if output_dir is not None and not (output_dir.is_dir() and os.access(output_dir, os.W_OK)):
        print(f"error: --output-dir {output} is not a folder this server can write to", file=sys.stderr)
        return 1
    try:
        engine = load_engine(settings)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with threads.serving():
        try:
            anyio.run(build(Speaker(engine, output_dir)).run_stdio_async)
        finally:
            engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
