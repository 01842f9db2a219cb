"""`pocket-tts-numpy mcp`: an MCP server (the Model Context Protocol, over stdio, with the `mcp`
SDK) that coding and desktop agents speak through. Its tools:

    speak(text, voice?, speed?, format?, file?)   the speech as MCP audio content, or written to
                                                   a new file named `file` in the --output-dir
                                                   folder (a name there, nothing above it; never
                                                   over a file already there: the next free name)
    speak_aloud(text, voice?, speed?, language?)   played on this machine's speakers, queued behind
                                                   what is playing; answers at once with its place
                                                   (server/loudspeaker.py)
    stop_speaking()                                the queue dropped, what plays cut
    list_voices()                                  every voice a call may name, with its kind
    list_models()                                  the loaded model, and the catalog

Each call is a session of the one engine (server/session.py: a slot, the text and audio limits of
every front, its error codes), its caller the person who started the server (a key holder: MCP
over stdio is their own process). A refusal is an MCP tool error naming its code; so is a fault of
ours (internal_error, its traceback on stderr only).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional

import anyio

from core import PocketTTSError, audio_formats, threads
from core.files import check_folder, write_new
from core.portable.synthesis.options import GenerationOptions
from core.portable.weights import catalog
from server import errors
from server.access import KEY_HOLDER
from server.engine import ServerEngine, load_engine
from server.errors import ServiceError
from server.loudspeaker import Loudspeaker
from server.session import Session, whole_text
from server.settings import Settings, SettingsError

FORMATS = ("wav", "mp3", "flac", "opus")
# Bytes of a file name a call may give: the file system's limit (255), with room for a free name's "-N".
MAX_NAME = 240
log = logging.getLogger("pocket_tts.mcp")


class Speaker:
    """The tools' work on an engine; files go to `output_dir` only (None: no file is written)."""

    def __init__(self, engine: ServerEngine, output_dir: Optional[Path]):
        self.engine = engine
        self.output_dir = output_dir

    async def speak(
        self,
        text: str,
        voice: Optional[str],
        speed: float,
        fmt: str,
        loudness: Optional[float] = None,
        language: Optional[str] = None,
        pronunciations: Optional[Dict[str, str]] = None,
    ) -> bytes:
        """The whole speech of `text` as a file in `fmt`, by the served model that speaks
        `language` (None: the default; a ServiceError for any refusal)."""
        if fmt not in FORMATS or not audio_formats.available(fmt):
            writable = ", ".join(f for f in FORMATS if audio_formats.available(f))
            raise ServiceError(errors.UNSUPPORTED_VALUE, f"format {fmt!r}: use one of {writable}", "format")
        whole = whole_text(text)
        options = GenerationOptions(speed=speed, loudness=loudness)
        model = self.engine.model_speaking(language)
        session = await Session.open(
            self.engine, voice, options, caller=KEY_HOLDER, model=model, pronunciations=pronunciations
        )
        file = audio_formats.WholeFile(fmt, self.engine.sample_rate, loudness=session.loudness)
        try:
            await session.say(whole)
            await session.end()
            async for chunk in session.audio():
                await anyio.to_thread.run_sync(file.add, chunk)  # encoded as it is made, off the event loop
        finally:
            session.close()
        return await anyio.to_thread.run_sync(file.end)

    def target(self, name: object) -> str:
        """The file name a call gave (`file`), refused before any work where it is no plain name in
        the output folder: a path, a name with a control character, one longer than MAX_NAME bytes.
        The file is written under it, or under the first free name like it (core.files.write_new):
        a file, link or FIFO already in the folder is never opened nor replaced."""
        if self.output_dir is None:
            raise ServiceError(
                errors.UNSUPPORTED_VALUE, "this server writes no files: start it with --output-dir DIR", "file"
            )
        plain = (
            isinstance(name, str)
            and name not in ("", ".", "..")
            and not any(c in name for c in "/\\")
            and not any(ord(c) < 32 or ord(c) == 127 for c in name)
        )
        if not plain:
            message = "file: give a file name, without folders or control characters (it goes to the output folder)"
            raise ServiceError(errors.BAD_PATH, message, "file")
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
            raise ServiceError(errors.BAD_PATH, f"file: a file name may be at most {MAX_NAME} bytes long", "file")
        try:
            check_folder(str(self.output_dir), "cannot write in the output folder")
        except PocketTTSError as e:
            raise ServiceError(errors.BAD_PATH, str(e), "file") from None
        return name

    def write(self, name: str, data: bytes) -> str:
        """`data` as a new file of the output folder under `name`, or the first free name like it;
        the path written."""
        try:
            return write_new(str(self.output_dir), name, data)
        except PocketTTSError as e:
            raise ServiceError(errors.BAD_PATH, str(e), "file") from None

    def voices(self) -> List[dict]:
        return [voice._asdict() for voice in self.engine.voices.listed(KEY_HOLDER)]

    def models(self) -> dict:
        hosted = self.engine.hosted
        loaded = dict(hosted.description, name=hosted.name, sample_rate=hosted.sample_rate)
        served = [listed._asdict() for listed in self.engine.models.listed()]
        return {"loaded": loaded, "served": served, "catalog": catalog.model_names()}


def build(speaker: Speaker, loudspeaker: Loudspeaker) -> Any:
    """The MCP server of `speaker`'s tools, and `loudspeaker`'s (its queue played by `loudspeaker.run`)."""
    from mcp.server.mcpserver import Audio, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(
        name="pocket-tts-numpy",
        instructions="Speak text aloud with Kyutai's Pocket TTS: `speak` returns the audio, or writes it to a file.",
    )

    async def refused(work: Any) -> Any:
        """The tool's result, or a tool error naming its code: a refusal's, or for a fault of ours
        internal_error alone (the operator's log, stderr, has the traceback)."""
        try:
            return await work
        except ServiceError as e:
            raise ToolError(f"{e.code}: {e.message}") from None
        except Exception as e:
            log.error("a tool call failed", exc_info=e)
            error = errors.unexpected(e, "call")
            raise ToolError(f"{error.code}: {error.message}") from None

    @server.tool()
    async def speak(
        text: str,
        voice: Optional[str] = None,
        speed: float = 1.0,
        format: Literal["wav", "mp3", "flac", "opus"] = "wav",  # noqa: A002 -- the tool's argument name
        file: Optional[str] = None,
        loudness: Optional[float] = None,
        language: Optional[str] = None,
        pronunciations: Optional[Dict[str, str]] = None,
    ) -> Any:
        """Speak `text` (up to 5000 characters; pause markup such as [pause:500ms] allowed) in
        `voice` (a name from list_voices; default: the server's) at `speed` (0.25-4). Returns the
        audio, or, with `file` (a file name), writes it to the server's output folder: under that
        name, or where a file has it already, the first free one like it (NAME-2.EXT, ...).
        `loudness` (LUFS, -40 to -5; -18 is usual) brings the voice to that level; `language`
        (en, fr, ...) picks the served model that speaks it (list_models); `pronunciations`
        ({"GIF": "jif"}) says those words otherwise."""

        async def work() -> Any:
            name = speaker.target(file) if file is not None else None
            data = await speaker.speak(text, voice, speed, format, loudness, language, pronunciations)
            if name is None:
                return Audio(data=data, format="mpeg" if format == "mp3" else format)
            path = await anyio.to_thread.run_sync(speaker.write, name, data)
            return f"wrote {path} ({len(data)} bytes, {format})"

        return await refused(work())

    @server.tool()
    async def speak_aloud(
        text: str,
        voice: Optional[str] = None,
        speed: float = 1.0,
        language: Optional[str] = None,
        loudness: Optional[float] = None,
    ) -> str:
        """Say `text` (as `speak` takes it) on this machine's speakers, after what is playing or
        queued: returns at once, with its place in the queue (0: playing now). `language`, where
        given, picks the served model that speaks it (list_models). stop_speaking cuts it."""

        async def work() -> str:
            return json.dumps({"position": await loudspeaker.say(text, voice, speed, language, loudness)})

        return await refused(work())

    @server.tool()
    async def stop_speaking() -> str:
        """Stop what speak_aloud is playing and drop what it has queued."""
        return json.dumps(loudspeaker.stop())

    @server.tool()
    async def list_voices() -> str:
        """Every voice `speak` may name: id (what to pass as voice), kind, and the language it was
        recorded in where known."""
        return json.dumps(await anyio.to_thread.run_sync(speaker.voices))

    @server.tool()
    async def list_models() -> str:
        """The default model this server speaks with (its language, parameters, sample rate,
        whether it times words), every model it serves (a call picks one by `language`), and the
        catalog's models (another one needs another server or --also-model)."""
        return json.dumps(speaker.models())

    return server


# The server's settings the MCP server takes (server/settings.py): the engine's.
SETTINGS = ("model", "adapter", "pronunciations", "voice", "max_concurrent", "voices_dir")


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
    loudspeaker = Loudspeaker(engine)

    async def serve() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(loudspeaker.run)
            await build(Speaker(engine, output_dir), loudspeaker).run_stdio_async()
            tasks.cancel_scope.cancel()

    with threads.serving():
        try:
            anyio.run(serve)
        except BaseException as e:
            if not _client_gone(e):
                raise
            # The client went away mid-call (its pipes closed): its call ends here, and so does its server,
            # quietly (Python would complain at exit of the stdout it cannot flush).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        finally:
            engine.close()
    return 0


def _client_gone(error: BaseException) -> bool:
    """Whether `error` is the client's pipe closed under a write, alone or in anyio's groups."""
    inner = getattr(error, "exceptions", None)
    if inner:
        return all(_client_gone(e) for e in inner)
    return isinstance(error, (BrokenPipeError, ConnectionResetError))


if __name__ == "__main__":
    sys.exit(main())
