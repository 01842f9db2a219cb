"""Every front of the product held to the same rules, tried as a hostile user would.

FRONTS lists every way in: each HTTP route of the app (by method and path, as the app has them),
the two WebSockets, Wyoming, the MCP server, each command of the command line, uvicorn's factory and
Ray Serve. Four rules, and for each front either the check that tries it here or the reason the rule
has nothing to hold on it:

- TEXT: text over the limit is refused (`text_too_long`) before anything reads it: nothing of a
  refused request reaches the text preparation (normalizing, segmenting, tokenizing), and a stream
  has read no more than its allowance when it is refused.
- SLOT: a client that stops reading, or vanishes, gives back its generation slot (and its
  connection's place).
- FILES: nothing is ever written through a link planted where a file goes, and no file that is not
  the product's is replaced (core/files.py).
- ERRORS: every refusal is typed (a code of the one vocabulary, server/errors.py; a one-line
  `error:` and a non-zero exit on the command line), with no traceback, no path of the server's and
  never the API key.
- SHUTDOWN: a request that reaches an engine shutting down is refused `shutting_down` (503, a
  WebSocket's close `try again later`), never a fault of ours.

test_every_front_is_listed fails on a route, a WebSocket, a command or an entry point of the
package that FRONTS does not name, so the next front starts with the rules. Nothing is timed: GUARD
only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Union

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from core import PocketTTSError
from core.portable.synthesis.text_stream import TextStream
from server import errors
from server.access import Access
from server.app import create_app
from server.engine import ServerEngine
from server.session import MAX_STREAM_TEXT, MAX_TEXT
from server.settings import Settings
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.processes import uvicorn_factory
from tests.support.serving import GUARD, serving, unread_request, until, wyoming_serving

KEY = "correct-horse-battery-staple"
AUTHORIZATION = {"authorization": f"Bearer {KEY}"}
LONG = "Hello there. " * (MAX_TEXT // 13 + 1)  # one character over a text's limit, and more
CODES = {value.code for value in vars(errors).values() if isinstance(value, errors.Kind)}
# Where a refusal's text could leak the server's own layout: the checkout (the model, the voice, the
# code) and the Python running it.
SERVER_PATHS = (str(ROOT), sys.prefix)
NEVER_ENDS = {"eos_threshold": 100.0, "temperature": 0.0}
PIECE = 2000  # characters of a streamed text piece


Check = Callable[["World"], None]
Rule = Union[Check, str]  # a check, or why the rule has nothing to hold on the front


class Front(NamedTuple):
    text: Rule
    slot: Rule
    files: Rule
    errors: Rule
    shutdown: Rule


@dataclasses.dataclass
class World:
    """The server every in-process check shares (the tiny model, two slots, an API key, a client
    timeout of 1 s, every generation one that never ends by itself), the text its sessions read, and
    a folder of the test's own."""

    engine: ServerEngine
    url: str
    read: List[int]  # the length of every text handed to the text preparation
    tmp: Path
    shut: ServerEngine  # an engine of the same model that has shut down, served at `shut_url`
    shut_url: str

    def post(self, path: str, headers: Optional[Dict[str, str]] = None, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers={**AUTHORIZATION, **(headers or {})}, timeout=GUARD, **kw)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, headers=AUTHORIZATION, timeout=GUARD)

    def ws(self, path: str) -> ClientConnection:
        return connect(
            self.url.replace("http://", "ws://") + path, additional_headers=AUTHORIZATION, open_timeout=GUARD
        )

    def free(self) -> None:
        until(lambda: self.engine.active == 0, "every slot is free again")
        until(lambda: self.engine.connections.open == 0, "every connection's place is back")


@pytest.fixture(scope="module")
def server(model):
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, access=Access(KEY))
    read: List[int] = []
    say, push, text_stream = TextStream.say, TextStream.push, engine.text_stream

    def never_ending(voice, options, *args):  # every generation runs until its client lets go
        return text_stream(voice, dataclasses.replace(options, **NEVER_ENDS), *args)

    def reading(method):
        def read_text(self, text, *args):
            read.append(len(text))
            return method(self, text, *args)

        return read_text

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TextStream, "say", reading(say))
        patch.setattr(TextStream, "push", reading(push))
        patch.setattr(engine, "text_stream", never_ending)
        with serving(engine, client_timeout=1.0) as url:
            yield engine, url, read
    engine.close()


@pytest.fixture(scope="module")
def shut_server(model):
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, access=Access(KEY))
    engine.close()
    with serving(engine) as url:
        yield engine, url


@pytest.fixture
def world(server, shut_server, tmp_path) -> Iterator[World]:
    engine, url, read = server
    read.clear()
    world = World(engine, url, read, tmp_path, *shut_server)
    yield world
    world.free()


# What a refusal must be


def typed_json(
    answer: httpx.Response, status: Optional[int] = None, code: Optional[str] = None, sent: Iterable[str] = ()
) -> dict:
    """The JSON error of an HTTP answer, checked: OpenAI's shape, a code of ours, nothing it must not say."""
    said = (answer.status_code, str(answer.request.url)[:100], answer.text[:200])
    assert 400 <= answer.status_code < 500 and (status is None or answer.status_code == status), said
    error = answer.json()["error"]
    assert error["code"] in CODES and (code is None or error["code"] == code), error
    says_nothing_of_the_server(answer.text, sent)
    return error


def says_nothing_of_the_server(text: str, sent: Iterable[str] = ()) -> None:
    """No traceback, no path of the server's (but in what the client sent itself), never the key."""
    assert "Traceback" not in text and KEY not in text, text
    for echoed in sent:
        text = text.replace(echoed, "")
    for path in SERVER_PATHS:
        assert path not in text, text


def one_line(done: subprocess.CompletedProcess, sent: str = "") -> str:
    """A command's refusal: non-zero, one line on stderr beginning `error:` (or argparse's usage
    and its `error:` line), no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and lines and "Traceback" not in done.stderr, done.stderr
    assert lines[-1].startswith("error:") or ": error: " in lines[-1], done.stderr
    assert KEY not in done.stderr
    return lines[-1]


def cli(*args: str, stdin: Optional[bytes] = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core.cli", *args], input=stdin, capture_output=True, cwd=cwd, timeout=GUARD * 3
    )


def text_of(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    done.stderr = done.stderr.decode("utf-8", "replace")
    return done


# TEXT


def json_text(path: str, field: str = "text", **fields: Any) -> Check:
    def check(world: World) -> None:
        typed_json(world.post(path, json={field: LONG, **fields}), 400, "text_too_long")
        assert world.read == []

    return check


def form_text(world: World) -> None:
    typed_json(world.post("/tts", data={"text": LONG}), 400, "text_too_long")
    assert world.read == []


def streamed_text(open_frames: List[dict], text: Callable[[str], dict], error_code: Callable[[dict], str]) -> Check:
    """Pieces of text past a stream's allowance: refused at the piece that crosses it, which is not read."""

    def check(world: World) -> None:
        with world.ws(PATHS[open_frames[0]["type"]]) as ws:
            for frame in open_frames:
                ws.send(json.dumps(frame))
            refused = None
            for _ in range(MAX_STREAM_TEXT // PIECE + 1):
                ws.send(json.dumps(text("x" * (PIECE - 1) + " ")))
            with contextlib.suppress(ConnectionClosed):
                while refused is None:
                    frame = ws.recv(timeout=GUARD)
                    if isinstance(frame, str) and json.loads(frame)["type"] == "error":
                        refused = json.loads(frame)
            assert refused is not None and error_code(refused) == "text_too_long", refused
            says_nothing_of_the_server(json.dumps(refused))
        assert sum(world.read) <= MAX_STREAM_TEXT

    return check


PATHS = {"start": "/v1/audio/speech/stream", "config": "/tts/ws"}


def wyoming(world: World, body: Callable[[int], Any]) -> Any:
    """`body(port)` against a Wyoming server of the world's engine (guests: no key), in this thread."""
    return wyoming_serving(world.engine, body, timeout=1.0)


async def wyoming_exchange(port: int, events: List[Any], until_type: str = "error") -> List[Any]:
    from wyoming.client import AsyncTcpClient

    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event.event() if hasattr(event, "event") else event)
        answers = []
        while True:
            answer = await client.read_event()
            if answer is None:
                return answers
            answers.append(answer)
            if answer.type in (until_type, "error"):
                return answers


def wyoming_text(world: World) -> None:
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart

    whole = wyoming(world, lambda port: wyoming_exchange(port, [Synthesize(text=LONG)]))
    assert whole[-1].type == "error" and whole[-1].data["code"] == "text_too_long", whole[-1]
    assert world.read == []
    pieces = [SynthesizeStart()] + [SynthesizeChunk(text="x" * (PIECE - 1) + " ")] * (MAX_STREAM_TEXT // PIECE + 1)
    streamed = wyoming(world, lambda port: wyoming_exchange(port, pieces))
    assert streamed[-1].type == "error" and streamed[-1].data["code"] == "text_too_long", streamed[-1]
    assert sum(world.read) <= MAX_STREAM_TEXT
    says_nothing_of_the_server(json.dumps([answer.data for answer in whole + streamed]))


def mcp_call(arguments: Dict[str, Any], *options: str, tool: str = "speak") -> Any:
    """`tool` calls to `pocket-tts-numpy mcp` through the MCP SDK's own client."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def session() -> Any:
        command = ["-m", "core.cli", "mcp", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), *options]
        parameters = StdioServerParameters(command=sys.executable, args=command, cwd=str(ROOT))
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                return [await client.call_tool(tool, call) for call in arguments]

    return asyncio.run(asyncio.wait_for(session(), GUARD * 2))


def mcp_refusals(calls: List[Dict[str, Any]], *options: str, tool: str = "speak") -> List[str]:
    pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10")
    results = mcp_call(calls, *options, tool=tool)
    said = []
    for result in results:
        text = result.content[0].text
        assert result.is_error, text
        code = re.search(r"(\w+): ", text.replace(f"Error executing tool {tool}: ", ""))
        assert code is not None and code.group(1) in CODES, text
        says_nothing_of_the_server(text, sent=[v for call in calls for v in call.values() if isinstance(v, str)])
        said.append(code.group(1))
    return said


def mcp_text(world: World) -> None:
    assert mcp_refusals([{"text": LONG}]) == ["text_too_long"]
    assert mcp_refusals([{"text": LONG}], tool="speak_aloud") == ["text_too_long"]


def command_text(command: str, streams_stdin: bool = False) -> Check:
    """Refused before the model is even looked for: the model named does not exist. Where the
    command speaks stdin as it arrives (generate), piped text is refused once it passes the limit,
    the model loaded by then, and nothing written."""

    def check(world: World) -> None:
        done = text_of(cli(command, "--model", str(world.tmp / "no-model.yaml"), "--text", LONG))
        said = one_line(done)
        assert f"longer than {MAX_TEXT} characters" in said, said
        model = (
            ["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
            if streams_stdin
            else ["--model", str(world.tmp / "no-model.yaml")]
        )
        out = world.tmp / "piped.wav"
        piped = text_of(
            cli(command, *model, "--text", "-", *(["-o", str(out)] if streams_stdin else []), stdin=LONG.encode())
        )
        assert f"longer than {MAX_TEXT} characters" in one_line(piped)
        assert not out.exists()

    return check


def batch_text(world: World) -> None:
    lines = world.tmp / "lines.jsonl"
    lines.write_text(
        json.dumps({"id": "long", "text": LONG})
        + "\n"
        + json.dumps({"id": "short", "text": "Hi.", "max_frames": 2})
        + "\n"
    )
    done = text_of(batch(lines, world.tmp / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    entries = {e["id"]: e for e in map(json.loads, (world.tmp / "out" / "manifest.jsonl").read_text().splitlines())}
    assert f"longer than {MAX_TEXT} characters" in entries["long"]["error"] and entries["short"]["error"] is None


def batch(lines: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    command = ["batch", str(lines), "--out", str(out), "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    return cli(*command, "--workers", "1", "--quiet", *args)


# SLOT


def raw_request(world: World, path: str, body: bytes, content_type: str) -> socket.socket:
    port = int(world.url.rsplit(":", 1)[1])
    client = socket.create_connection(("127.0.0.1", port))
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
    client.sendall(f"{head}Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return client


def vanishing(world: World, client: socket.socket) -> None:
    """The client's generation runs; the client vanishes (its socket closed, unread); its slot is back."""
    try:
        until(lambda: world.engine.active == 1, "the generation started")
    finally:
        client.close()
    world.free()


def http_slot(path: str, body: Dict[str, Any]) -> Check:
    def check(world: World) -> None:
        vanishing(world, raw_request(world, path, json.dumps(body).encode(), "application/json"))
        # 10 MB of audio: more than the sockets' buffers hold, so that a whole file's sending waits too.
        reader = unread_request(world.url, path, {**body, "max_frames": 2500}, AUTHORIZATION)
        try:
            until(lambda: world.engine.active == 1, "the generation started")
            until(lambda: world.engine.active == 0, "a client that takes nothing is dropped and its slot freed")
        finally:
            reader.close()

    return check


def form_slot(world: World) -> None:
    vanishing(world, raw_request(world, "/tts", b"text=Hello+there.", "application/x-www-form-urlencoded"))


def ws_slot(open_frames: List[dict], speak: List[dict]) -> Check:
    def check(world: World) -> None:
        for stops_reading in (False, True):
            with contextlib.ExitStack() as stack:
                ws = stack.enter_context(world.ws(PATHS[open_frames[0]["type"]]))
                stack.callback(ws.socket.close)  # vanishes: no close frame (then the closing handshake fails)
                stack.enter_context(contextlib.suppress(ConnectionClosed, OSError))
                for frame in open_frames + speak:
                    ws.send(json.dumps(frame))
                until(lambda: world.engine.active == 1, "the generation started")
                if stops_reading:  # nothing taken: the server drops it after the client timeout
                    until(lambda: world.engine.active == 0, "a client that takes nothing is dropped")
            world.free()

    return check


def wyoming_slot(world: World) -> None:
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    async def until_active(count: int, what: str) -> None:
        for _ in range(int(GUARD / 0.01)):
            if world.engine.active == count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never happened: {what}")

    async def clients(port: int) -> None:
        for vanishes in (True, False):
            client = AsyncTcpClient("127.0.0.1", port)
            await client.connect()
            await client.write_event(Synthesize(text="Hello there.").event())
            await until_active(1, "the synthesis started")
            if vanishes:
                await client.disconnect()
            await until_active(0, "the slot of a client that vanished, or took nothing, is back")
            await client.disconnect()

    wyoming(world, clients)


@contextlib.contextmanager
def running(command: List[str], **pipes: Any) -> Iterator[subprocess.Popen]:
    """`command` as a process of its own from the checkout; killed if the block leaves it running."""
    process = subprocess.Popen(command, cwd=ROOT, **pipes)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def mcp_slot(world: World) -> None:
    """The MCP server is its client's process: a client that vanishes mid-call (its pipes closed)
    ends it, and its session with it."""
    command = [sys.executable, "-m", "core.cli", "mcp", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "speak", "arguments": {"text": "Hello there. " * 300}},
        },
    ]
    with running(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        process.stdin.flush()
        assert process.stdout.readline(), "the MCP server did not answer initialize"
        process.stdin.close()
        process.stdout.close()
        process.wait(GUARD)
        assert b"Traceback" not in process.stderr.read()


def generate_slot(world: World) -> None:
    """A reader of `generate --stream` that goes away: the command ends (no traceback), its work with it."""
    command = [sys.executable, "-m", "core.cli", "generate", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    command += ["--text", "Hello there. " * 300, "--stream", "--quiet"]
    with running(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout.read(4096)
        process.stdout.close()
        process.wait(GUARD)
        assert b"Traceback" not in process.stderr.read()


def factory_slot(world: World) -> None:
    with uvicorn_factory() as (url, _):
        client = unread_request(url, "/stream", {"text": "Nobody reads this.", "max_frames": 7500, **NEVER_ENDS})
        try:
            active = lambda: httpx.get(url + "/health", timeout=GUARD).json()["active_generations"]  # noqa: E731
            until(lambda: active() == 1, "the generation started")
            until(lambda: active() == 0, "the app drops a client that takes nothing")
        finally:
            client.close()


def batch_slot(world: World) -> None:
    """SIGTERM (kill's default, systemd's stop) ends a batch job with its workers."""
    lines = world.tmp / "lines.jsonl"
    lines.write_text(
        "".join(json.dumps({"id": f"l{i}", "text": "Hi.", "max_frames": 7500, **NEVER_ENDS}) + "\n" for i in range(2))
    )
    command = [sys.executable, "-m", "core.cli", "batch", str(lines), "--out", str(world.tmp / "out")]
    command += ["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), "--workers", "2", "--quiet"]
    with running(command, stderr=subprocess.PIPE) as process:
        until(lambda: len(children(process.pid)) >= 2, "the workers started")
        workers = children(process.pid)
        process.send_signal(signal.SIGTERM)
        process.wait(GUARD)
        until(lambda: not any(alive(pid) for pid in workers), "the workers ended with the job")
        assert process.returncode != 0 and b"Traceback" not in process.stderr.read()


def children(pid: int) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


# FILES


@contextlib.contextmanager
def planted(world: World) -> Iterator[Path]:
    """A folder where a hostile process planted links: `link` to a file elsewhere, `dangling` to
    nothing yet; yields it, then checks that neither was written through."""
    folder, elsewhere = world.tmp / "folder", world.tmp / "elsewhere"
    folder.mkdir()
    elsewhere.write_bytes(b"the user's own file")
    for name in ("link.wav", "link.json", "link.vtt", "link.safetensors"):
        (folder / name).symlink_to(elsewhere)
    (folder / "dangling.wav").symlink_to(world.tmp / "made-through-the-link")
    yield folder
    assert elsewhere.read_bytes() == b"the user's own file"
    assert not (world.tmp / "made-through-the-link").exists()


def generate_files(world: World) -> None:
    """Paths the user named: a link there is replaced by the file, never written through."""
    with planted(world) as folder:
        done = cli(
            "generate",
            "--model",
            str(TINY_CONFIG),
            "--voice",
            str(VOICE_24K),
            "--text",
            "Hi.",
            "--quiet",
            "--max-frames",
            "2",
            "-o",
            str(folder / "link.wav"),
        )
        assert done.returncode == 0, done.stderr
        assert not (folder / "link.wav").is_symlink()
        done = cli(
            "export-voice", "--model", str(TINY_CONFIG), str(VOICE_24K), str(folder / "link.safetensors"), "--quiet"
        )
        assert done.returncode == 0, done.stderr
        assert not (folder / "link.safetensors").is_symlink()


def export_files(world: World) -> None:
    """A bundle's folder is replaced only where it is the product's: a link to the user's folder is refused."""
    mine = world.tmp / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (world.tmp / "bundle").symlink_to(mine)
    said = one_line(text_of(cli("export", "--model", str(TINY_CONFIG), "--out", str(world.tmp / "bundle"))))
    assert "is not a folder" in said and (mine / "thesis.tex").read_text() == "years of work"


def build_site_files(world: World) -> None:
    mine = world.tmp / "mine"
    mine.mkdir()
    (mine / "site.json").write_text("{}")
    (mine / "thesis.tex").write_text("years of work")
    for out in (mine, world.tmp / "link"):
        if out.name == "link":
            out.symlink_to(mine)
        said = one_line(text_of(cli("build-site", "--model", str(TINY_CONFIG), "--out", str(out))))
        assert "is not a folder" in said and sorted(p.name for p in mine.iterdir()) == ["site.json", "thesis.tex"]


def batch_files(world: World) -> None:
    """A line's file name taken by a planted link: that line's error; the link and its target untouched."""
    with planted(world) as folder:
        lines = world.tmp / "lines.jsonl"
        lines.write_text(
            json.dumps({"id": "link", "text": "Hi.", "max_frames": 2})
            + "\n"
            + json.dumps({"id": "fresh", "text": "Hi.", "max_frames": 2})
            + "\n"
        )
        done = text_of(batch(lines, folder))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert (folder / "link.wav").is_symlink() and (folder / "fresh.wav").is_file()


def mcp_files(world: World) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10")
    with planted(world) as folder:
        results = mcp_call(
            [{"text": "Hi.", "file": name} for name in ("link.wav", "dangling.wav")], "--output-dir", str(folder)
        )
        assert not any(result.is_error for result in results)
        assert (folder / "link-2.wav").is_file() and (folder / "dangling-2.wav").is_file()


SERVER_WRITES_NOTHING = (
    "the server writes no file but the uploads it keeps with --voices-dir (POST /voices' check; "
    "tests/project/test_conformance.py test_the_server_fronts_write_no_file)"
)


@contextlib.contextmanager
def keeping_voices(world: World) -> Iterator[tuple]:
    """A server of the same model keeping its uploads in a voices folder of the test's own, where
    a hostile process planted links: the record and the file of the upload to come, each to a file
    elsewhere; yields (url, its .uploads folder, the id the upload will get), then checks that
    neither link was written through."""
    from core.portable.audio import pcm as audio
    from core.portable.voice_registry import recording_id

    voices, elsewhere = Path(tempfile.mkdtemp(dir=world.tmp)), world.tmp / "elsewhere.bin"
    (voices / ".uploads").mkdir()
    elsewhere.write_bytes(b"the user's own file")
    samples, rate = audio.read(VOICE_24K.read_bytes(), "the test voice")
    key = recording_id(samples, rate)
    engine = ServerEngine(world.engine.hosted.model, str(VOICE_24K), 2, access=Access(KEY), voices_dir=voices)
    try:
        with serving(engine) as url:
            yield url, voices / ".uploads", key
    finally:
        engine.close()
    assert elsewhere.read_bytes() == b"the user's own file"


def upload_files(world: World) -> None:
    """The uploads kept with --voices-dir: never written through a link planted where the voice's
    file or the record goes (the voice is then kept in memory only), and kept where nothing is."""
    upload = {"files": {"voice_wav": ("mine.wav", VOICE_24K.read_bytes())}, "headers": AUTHORIZATION}
    for planted_name in ("voices.json", "{key}.safetensors"):
        with keeping_voices(world) as (url, uploads, key):
            (uploads / planted_name.format(key=key[len("upload:") :])).symlink_to(world.tmp / "elsewhere.bin")
            answer = httpx.post(url + "/voices", timeout=GUARD, **upload)
            assert answer.status_code == 200 and answer.json()["voice"] == key, answer.text
            assert sorted(p.name for p in uploads.iterdir() if not p.is_symlink()) == [], planted_name
    with keeping_voices(world) as (url, uploads, key):
        assert httpx.post(url + "/voices", timeout=GUARD, **upload).status_code == 200
        assert sorted(p.name for p in uploads.iterdir()) == [key[len("upload:") :] + ".safetensors", "voices.json"]


def delete_files(world: World) -> None:
    """DELETE removes the file the server saved, and never one put in its place since."""
    upload = {"files": {"voice_wav": ("mine.wav", VOICE_24K.read_bytes())}, "headers": AUTHORIZATION}
    with keeping_voices(world) as (url, uploads, key):
        assert httpx.post(url + "/voices", timeout=GUARD, **upload).status_code == 200
        saved = uploads / (key[len("upload:") :] + ".safetensors")
        saved.unlink()
        saved.write_bytes(b"the user's own file")
        answer = httpx.delete(f"{url}/v1/audio/voices/{key}", headers=AUTHORIZATION, timeout=GUARD)
        assert answer.status_code == 204 and saved.read_bytes() == b"the user's own file"


def delete_errors(world: World) -> None:
    for voice in ("upload:0123456789abcdef01234567", "alba", "default", "..%2F..%2Fetc%2Fpasswd", "x" * 300):
        typed_json(httpx.delete(f"{world.url}/v1/audio/voices/{voice}", headers=AUTHORIZATION, timeout=GUARD))
    typed_json(httpx.delete(f"{world.url}/v1/audio/voices/upload:x", timeout=GUARD), 401, "unauthorized")


# ERRORS


def json_errors(path: str, body: Dict[str, Any], unknown_fields: bool = True) -> Check:
    """Malformed, mistyped and probing bodies: each typed; a voice named by a path of the server's
    is refused the same whether the file is there or not (no oracle of the server's files).
    `unknown_fields`: whether a field the route does not know is refused (OpenAI's route ignores
    them, as OpenAI's own does: its clients send fields of newer versions)."""

    def check(world: World) -> None:
        typed_json(world.post(path, content=b"{", headers={"content-type": "application/json"}))
        mistakes = [("voice", 7), ("speed", "fast")] + ([("nonsense", 1)] if unknown_fields else [])
        for field, value in mistakes:
            typed_json(world.post(path, json={**body, field: value}))
        there, absent = str(VOICE_24K), str(VOICE_24K.with_name("absent.wav"))
        answers = [typed_json(world.post(path, json={**body, "voice": v}), sent=[v]) for v in (there, absent)]
        assert answers[0]["code"] == answers[1]["code"], answers
        assert answers[0]["message"].replace(there, "X") == answers[1]["message"].replace(absent, "X"), answers

    return check


def form_errors(world: World) -> None:
    for voice in ("/etc/passwd", str(VOICE_24K)):
        typed_json(world.post("/tts", data={"text": "Hi.", "voice_url": voice}), sent=[voice])
    typed_json(world.post("/tts", data={"text": "Hi.", "speed": "fast"}))
    typed_json(world.post("/tts", files={"voice_wav": ("a.wav", b"not audio")}, data={"text": "Hi."}))


def upload_errors(world: World) -> None:
    typed_json(world.post("/voices", files={"voice_wav": ("a.wav", b"RIFF....WAVEjunk")}))
    typed_json(world.post("/voices", files={"other": ("a.wav", b"x")}))


def get_errors(path: str) -> Check:
    def check(world: World) -> None:
        answer = httpx.get(world.url + path, timeout=GUARD)  # without the key: refused, typed
        if answer.status_code != 200:
            typed_json(answer, 401, "unauthorized")
        typed_json(world.get(path + "/../../etc/passwd" if path != "/" else "/etc/passwd"), 404)

    return check


def model_errors(world: World) -> None:
    typed_json(world.get("/v1/models/" + "x" * 300), 404, "model_not_found")
    typed_json(world.get("/v1/models/" + str(TINY_CONFIG)), 404, "model_not_found")


def page_errors(world: World) -> None:
    for path in ("/app.js/x", "/" + "a" * 300, "/nothing.js", "/%2e%2e/%2e%2e/etc/passwd"):
        typed_json(world.get(path), 404)


def ws_errors(open_frames: List[dict], error_code: Callable[[dict], str]) -> Check:
    def check(world: World) -> None:
        path = PATHS[open_frames[0]["type"]]
        with world.ws(path) as ws:
            for frame in open_frames:
                ws.send(json.dumps(frame))
            for bad in (b"\x00binary", "{", json.dumps({"type": "nonsense"}), json.dumps({"type": "text"}), "[]"):
                ws.send(bad)
                while True:
                    answer = json.loads(ws.recv(timeout=GUARD))
                    if answer["type"] == "error":
                        break
                assert error_code(answer) in CODES, answer
                says_nothing_of_the_server(json.dumps(answer))
            ws.send("x" * (1 << 17))  # a frame too large ends the connection, typed
            closing = []
            with contextlib.suppress(ConnectionClosed):
                while True:
                    closing.append(ws.recv(timeout=GUARD))
            assert any(isinstance(f, str) and error_code(json.loads(f)) == "frame_too_large" for f in closing), closing

    return check


def wyoming_errors(world: World) -> None:
    from wyoming.event import Event
    from wyoming.tts import Synthesize, SynthesizeVoice

    answers = []
    for events in (
        [Synthesize(text="Hi.", voice=SynthesizeVoice(name=str(VOICE_24K)))],
        [Event(type="synthesize-chunk", data={"text": "no start"})],
        [Event(type="synthesize", data={"text": 7})],
    ):
        answers.append(wyoming(world, lambda port, events=events: wyoming_exchange(port, events))[-1])
    for answer in answers:
        assert answer.type == "error" and answer.data.get("code") in CODES, answer
        says_nothing_of_the_server(json.dumps(answer.data), sent=[str(VOICE_24K)])


def mcp_errors(world: World) -> None:
    calls = [
        {"text": "Hi.", "voice": str(VOICE_24K)},
        {"text": " "},
        {"text": "Hi.", "speed": 9},
        {"text": "Hi.", "file": "x\x00"},
    ]
    assert mcp_refusals(calls, "--output-dir", str(world.tmp)) == [
        "unknown_voice",
        "empty_text",
        "invalid_value",
        "bad_path",
    ]
    aloud = [{"text": " "}, {"text": "Hi.", "speed": 9}, {"text": "Hi.", "language": "fr"}]
    assert mcp_refusals(aloud, tool="speak_aloud") == ["empty_text", "invalid_value", "unsupported_value"]


def command_errors(*argvs: List[str]) -> Check:
    def check(world: World) -> None:
        for argv in argvs:
            one_line(text_of(cli(*[a.replace("TMP", str(world.tmp)) for a in argv])))

    return check


def batch_errors(world: World) -> None:
    lines = world.tmp / "lines.jsonl"
    lines.write_bytes(b"\xff\xfe\n{\n" + json.dumps({"text": "Hi.", "voice": "/etc/passwd"}).encode() + b"\n[]\n")
    done = text_of(batch(lines, world.tmp / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    entries = [json.loads(line) for line in (world.tmp / "out" / "manifest.jsonl").read_text().splitlines()]
    assert len(entries) == 4 and all(entry["error"] for entry in entries), entries


# SHUTDOWN


def shutting_down(answer: httpx.Response) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text[:200])
    assert answer.json()["error"]["code"] == "shutting_down" and answer.headers["retry-after"], answer.text
    says_nothing_of_the_server(answer.text)


def http_shutdown(method: str, path: str, **kw: Any) -> Check:
    def check(world: World) -> None:
        headers = {**AUTHORIZATION, **kw.pop("headers", {})}
        shutting_down(httpx.request(method, world.shut_url + path, headers=headers, timeout=GUARD, **kw))

    return check


def ws_shutdown(open_frames: List[dict], speak: List[dict], error_code: Callable[[dict], str]) -> Check:
    """Accepted, then refused in the WebSocket's own words: an error frame, a close `try again later`."""

    def check(world: World) -> None:
        url = world.shut_url.replace("http://", "ws://") + PATHS[open_frames[0]["type"]]
        with connect(url, additional_headers=AUTHORIZATION, open_timeout=GUARD) as ws:
            for frame in open_frames + speak:
                with contextlib.suppress(ConnectionClosed):
                    ws.send(json.dumps(frame))
            frames = []
            with contextlib.suppress(ConnectionClosed):
                while True:
                    frames.append(json.loads(ws.recv(timeout=GUARD)))
        assert [error_code(f) for f in frames if f["type"] == "error"] == ["shutting_down"], frames
        assert ws.close_code == errors.TRY_LATER, ws.close_code

    return check


def wyoming_shutdown(world: World) -> None:
    from wyoming.tts import Synthesize

    answers = wyoming_serving(
        world.shut, lambda port: wyoming_exchange(port, [Synthesize(text="Hello there.")]), timeout=1.0
    )
    assert answers[-1].type == "error" and answers[-1].data["code"] == "shutting_down", answers


def mcp_shutdown(world: World) -> None:
    """The MCP server is its client's process (its engine closes when the client leaves, and no
    call comes after); its tools on an engine that has shut down refuse a call, typed."""
    pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10")
    from mcp.server.mcpserver.exceptions import ToolError

    from server.loudspeaker import Loudspeaker
    from server.mcp_server import Speaker, build

    tools = build(Speaker(world.shut, None), Loudspeaker(world.shut))
    for tool in ("speak", "speak_aloud"):
        with pytest.raises(ToolError, match=rf"^Error executing tool {tool}: shutting_down: "):
            asyncio.run(asyncio.wait_for(tools.call_tool(tool, {"text": "Hello there."}), GUARD))


def ovos_plugin(world: World) -> Any:
    """The OpenVoiceOS plugin as its host loads it (ovos-plugin-manager's loader), on the tiny model."""
    loader = pytest.importorskip("ovos_plugin_manager.tts", reason="the 'ovos' extra")
    plugin = loader.load_tts_plugin("ovos-tts-plugin-pocket-tts-numpy")
    return plugin(config={"lang": "en", "model": str(TINY_CONFIG), "voice": str(VOICE_24K)})


def ovos_text(world: World) -> None:
    """Refused before the text preparation (planning.plan) reads any of it."""
    from core.portable.synthesis import planning

    plugin, planned = ovos_plugin(world), []
    with pytest.MonkeyPatch.context() as patch:
        plan = planning.plan
        patch.setattr(planning, "plan", lambda reader, text, *args: planned.append(text) or plan(reader, text, *args))
        with pytest.raises(PocketTTSError, match=f"longer than {MAX_TEXT} characters"):
            plugin.get_tts(LONG, str(world.tmp / "x.wav"))
        plugin.get_tts("Hi.", str(world.tmp / "y.wav"))
    assert planned == ["Hi."] and not (world.tmp / "x.wav").exists()


def ovos_files(world: World) -> None:
    """The host names the file (a path the user named, to core/files.py): a link there is replaced."""
    with planted(world) as folder:
        ovos_plugin(world).get_tts("Hi.", str(folder / "link.wav"))
        assert not (folder / "link.wav").is_symlink()


def ovos_errors(world: World) -> None:
    """Its refusals are one-line PocketTTSErrors (the host logs them), naming no path of ours."""
    plugin = ovos_plugin(world)
    for sentence, lang in (("  ", None), ("Hi.", "xx"), (LONG, None)):
        with pytest.raises(PocketTTSError) as caught:
            plugin.get_tts(sentence, str(world.tmp / "x.wav"), lang=lang)
        assert "\n" not in str(caught.value)
        says_nothing_of_the_server(str(caught.value))


OVOS_HOST = "a plugin in its host's process, called one sentence at a time: no slot, no shutdown of ours"


# The fronts


SPEAKS = {"text": "Hello there.", "max_frames": 7500}
OPENAI = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "response_format": "pcm"}
STREAM_OPEN = [{"type": "start", **NEVER_ENDS}]
STREAM_SPEAK = [{"type": "text", "text": "Hello there. "}, {"type": "flush"}]
LIVEKIT_OPEN = [{"type": "config", "data": {}}]
LIVEKIT_SPEAK = [{"type": "text", "data": {"text": "Hello there. "}}, {"type": "flush"}]
stream_code = lambda frame: frame["error"]["code"]  # noqa: E731
livekit_code = lambda frame: frame["data"]["code"]  # noqa: E731
NO_TEXT = "takes no text"
NO_SLOT = "takes no generation slot: its answer is a few bytes, read whole"
NO_FILES = "writes no file"
ITS_OWN = "its own front: the page's worker, not the server's (tests/browser)"
A_PROCESS = "a process of its own: its work ends with it, no request comes while it shuts down"
SERVER_FRONTS = "the server's fronts, listed above"
get_shutdown = lambda path: http_shutdown("GET", path)  # noqa: E731
post_shutdown = lambda path, **kw: http_shutdown("POST", path, **kw)  # noqa: E731

FRONTS: Dict[str, Front] = {
    "GET /health": Front(NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/health"), get_shutdown("/health")),
    "GET /voices": Front(NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/voices"), get_shutdown("/voices")),
    "POST /voices": Front(
        NO_TEXT,
        "holds its slot only while its upload, read whole first, is cloned",
        upload_files,
        upload_errors,
        post_shutdown("/voices", files={"voice_wav": ("a.wav", VOICE_24K.read_bytes())}),
    ),
    "POST /generate": Front(
        json_text("/generate"),
        http_slot("/generate", SPEAKS),
        SERVER_WRITES_NOTHING,
        json_errors("/generate", SPEAKS),
        post_shutdown("/generate", json=SPEAKS),
    ),
    "POST /stream": Front(
        json_text("/stream"),
        http_slot("/stream", SPEAKS),
        SERVER_WRITES_NOTHING,
        json_errors("/stream", SPEAKS),
        post_shutdown("/stream", json=SPEAKS),
    ),
    "POST /generate/words": Front(
        json_text("/generate/words"),
        "the tiny model has no timestamp heads: POST /generate's session, words=True (tests/server/test_server.py)",
        SERVER_WRITES_NOTHING,
        json_errors("/generate/words", SPEAKS),
        post_shutdown("/generate/words", json=SPEAKS),
    ),
    "POST /stream/words": Front(
        json_text("/stream/words"),
        "the tiny model has no timestamp heads: POST /stream's session, words=True (tests/server/test_server.py)",
        SERVER_WRITES_NOTHING,
        json_errors("/stream/words", SPEAKS),
        post_shutdown("/stream/words", json=SPEAKS),
    ),
    "POST /tts": Front(
        form_text, form_slot, SERVER_WRITES_NOTHING, form_errors, post_shutdown("/tts", data={"text": "Hello there."})
    ),
    "GET /site.json": Front(
        NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/site.json"), get_shutdown("/site.json")
    ),
    "POST /v1/audio/speech": Front(
        json_text("/v1/audio/speech", "input", model="tts-1", voice="alloy"),
        http_slot("/v1/audio/speech", OPENAI),
        SERVER_WRITES_NOTHING,
        json_errors("/v1/audio/speech", OPENAI, unknown_fields=False),
        post_shutdown("/v1/audio/speech", json=OPENAI),
    ),
    "GET /v1/audio/voices": Front(
        NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/v1/audio/voices"), get_shutdown("/v1/audio/voices")
    ),
    "DELETE /v1/audio/voices/{voice_id:str}": Front(
        NO_TEXT,
        NO_SLOT,
        delete_files,
        delete_errors,
        http_shutdown("DELETE", "/v1/audio/voices/upload:0123456789abcdef01234567"),
    ),
    "GET /v1/models": Front(
        NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/v1/models"), get_shutdown("/v1/models")
    ),
    "GET /v1/models/{model_id:path}": Front(
        NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, model_errors, get_shutdown("/v1/models/tts-1")
    ),
    "GET /{file_path:path}": Front(NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, page_errors, get_shutdown("/app.js")),
    "GET /": Front(NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/"), get_shutdown("/")),
    "GET /schema*": Front(NO_TEXT, NO_SLOT, SERVER_WRITES_NOTHING, get_errors("/schema"), get_shutdown("/schema")),
    "WS /v1/audio/speech/stream": Front(
        streamed_text(STREAM_OPEN, lambda t: {"type": "text", "text": t}, stream_code),
        ws_slot(STREAM_OPEN, STREAM_SPEAK),
        SERVER_WRITES_NOTHING,
        ws_errors(STREAM_OPEN, stream_code),
        ws_shutdown(STREAM_OPEN, STREAM_SPEAK, stream_code),
    ),
    "WS /tts/ws": Front(
        streamed_text(LIVEKIT_OPEN, lambda t: {"type": "text", "data": {"text": t}}, livekit_code),
        ws_slot(LIVEKIT_OPEN, LIVEKIT_SPEAK),
        SERVER_WRITES_NOTHING,
        ws_errors(LIVEKIT_OPEN, livekit_code),
        ws_shutdown(LIVEKIT_OPEN, LIVEKIT_SPEAK, livekit_code),
    ),
    "wyoming": Front(wyoming_text, wyoming_slot, SERVER_WRITES_NOTHING, wyoming_errors, wyoming_shutdown),
    "mcp": Front(mcp_text, mcp_slot, mcp_files, mcp_errors, mcp_shutdown),
    "ovos": Front(ovos_text, OVOS_HOST, ovos_files, ovos_errors, OVOS_HOST),
    "uvicorn --factory": Front(
        "the app's own routes, listed above",
        factory_slot,
        SERVER_WRITES_NOTHING,
        "the app's own routes, listed above",
        SERVER_FRONTS,
    ),
    "ray serve": Front(
        "the app's own routes, listed above",
        "the app's own bounds (server/bounds.py), as under uvicorn's factory; Serve's proxy is Ray's",
        SERVER_WRITES_NOTHING,
        "the app's own routes, listed above",
        SERVER_FRONTS,
    ),
    "cli generate": Front(
        command_text("generate", streams_stdin=True),
        generate_slot,
        generate_files,
        command_errors(
            ["generate", "--speed", "9", "--text", "Hi.", "--model", str(TINY_CONFIG)],
            ["generate", "--text", "Hi.", "-o", "TMP", "--model", str(TINY_CONFIG)],
            ["generate", "--text", "Hi.", "--model", "TMP/nothing.yaml"],
            ["generate", "--text", "Hi.", "--format", "aac"],
        ),
        A_PROCESS,
    ),
    "cli normalize": Front(
        command_text("normalize"),
        "speaks nothing: prints the text as it will be read",
        NO_FILES,
        command_errors(["normalize", "--language", "klingon", "--text", "Hi."]),
        A_PROCESS,
    ),
    "cli export-voice": Front(
        NO_TEXT,
        "speaks nothing",
        generate_files,
        command_errors(
            ["export-voice", "--model", str(TINY_CONFIG), str(VOICE_24K), "TMP/out.wav"],
            ["export-voice", "--model", str(TINY_CONFIG), "TMP/nothing.wav", "TMP/out.safetensors"],
        ),
        A_PROCESS,
    ),
    "cli export": Front(
        NO_TEXT,
        "speaks nothing",
        export_files,
        command_errors(["export", "--model", "TMP/nothing.yaml", "--out", "TMP/b"]),
        A_PROCESS,
    ),
    "cli batch": Front(batch_text, batch_slot, batch_files, batch_errors, A_PROCESS),
    "cli models": Front(NO_TEXT, "speaks nothing", NO_FILES, command_errors(["models", "--nonsense"]), A_PROCESS),
    "cli voices": Front(
        NO_TEXT, "speaks nothing", NO_FILES, command_errors(["voices", "--model", "TMP/nothing.yaml"]), A_PROCESS
    ),
    "cli serve": Front(
        "the server's fronts, listed above",
        "the server's fronts, listed above",
        NO_FILES,
        command_errors(["serve", "--max-concurrent", "0"], ["serve", "--api-key", " "]),
        A_PROCESS,
    ),
    "cli mcp": Front(
        "the mcp front, listed above",
        "the mcp front, listed above",
        "the mcp front, listed above",
        command_errors(["mcp", "--output-dir", "TMP/nothing"]),
        A_PROCESS,
    ),
    "cli build-site": Front(
        NO_TEXT,
        "speaks nothing",
        build_site_files,
        command_errors(["build-site", "--model", str(TINY_CONFIG), "--voice", "TMP/nothing.wav", "--out", "TMP/site"]),
        A_PROCESS,
    ),
}


def listed(rule: str) -> List[Any]:
    """The fronts a rule is tried on; those that run as processes of their own are slow."""
    return [
        pytest.param(name, marks=pytest.mark.slow) if name.startswith("cli ") or name in PROCESSES else name
        for name, front in FRONTS.items()
        if callable(getattr(front, rule))
    ]


PROCESSES = ("mcp", "uvicorn --factory")


@pytest.mark.parametrize("front", listed("text"))
def test_text_over_the_limit_is_refused_before_anything_reads_it(front, world) -> None:
    FRONTS[front].text(world)


@pytest.mark.parametrize("front", listed("slot"))
@pytest.mark.slow
def test_a_client_that_stops_reading_or_vanishes_gives_its_slot_back(front, world) -> None:
    FRONTS[front].slot(world)


@pytest.mark.parametrize("front", listed("files"))
def test_no_file_is_written_through_a_link_or_in_place_of_the_users(front, world) -> None:
    FRONTS[front].files(world)


@pytest.mark.parametrize("front", listed("errors"))
def test_every_refusal_is_typed_without_a_traceback_a_path_or_the_key(front, world) -> None:
    FRONTS[front].errors(world)


@pytest.mark.parametrize("front", listed("shutdown"))
def test_a_request_during_shutdown_is_refused_shutting_down(front, world) -> None:
    FRONTS[front].shutdown(world)


def test_every_front_is_listed() -> None:
    """Every route and WebSocket of the app, every command, and every entry point of the package
    is a front of FRONTS, each rule of each front a check or a reason; FRONTS names nothing else."""
    from importlib.metadata import distribution

    from core import cli as command_line

    app = create_app(None, Settings())
    fronts = set()
    for route in app.routes:
        if route.path.startswith("/schema"):
            fronts.add("GET /schema*")
        elif not route.methods:
            fronts.add(f"WS {route.path}")
        else:
            fronts.update(f"{m} {route.path}" for m in route.methods if m not in ("OPTIONS", "HEAD"))
    parser = command_line.parser(handed=command_line.handed_commands())
    commands = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)).choices
    fronts.update(f"cli {name}" for name in commands)
    fronts.update({"wyoming", "mcp", "uvicorn --factory", "ray serve", "ovos"})
    assert fronts == set(FRONTS), (sorted(fronts - set(FRONTS)), sorted(set(FRONTS) - fronts))
    points = {(point.group, point.name) for point in distribution("pocket-tts-numpy").entry_points}
    handed = {("pocket_tts_numpy.commands", name) for name in commands}
    plugins = {(group, "ovos-tts-plugin-pocket-tts-numpy") for group in ("opm.tts", "mycroft.plugin.tts")}
    assert points == {("console_scripts", "pocket-tts-numpy")} | (handed & points) | plugins, points
    for name, front in FRONTS.items():
        for rule in Front._fields:
            value = getattr(front, rule)
            assert callable(value) or (isinstance(value, str) and value), (name, rule)


def test_the_server_fronts_write_no_file() -> None:
    """No module of the server writes a file but the MCP server, the uploads kept with --voices-dir
    and the OpenVoiceOS plugin (its host's file), through core/files.py: the server's fronts keep
    what they are sent in memory."""
    writes = re.compile(
        r"open\([^)]*[\"'][wax]b?\+?[\"']|\.write_(bytes|text)\(|core\.files|from core import files|soundfile\.write"
    )
    for path in sorted((ROOT / "server").glob("*.py")):
        found = writes.search(path.read_text())
        if path.name in ("mcp_server.py", "saved_voices.py", "ovos_tts.py"):
            assert found and "from core.files import" in path.read_text()
        else:
            assert found is None, (path.name, found and found.group(0))
