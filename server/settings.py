"""The server's settings, declared once: each with its default, its meaning, its flag and its
environment variable. Every way the server starts builds them here:

    python -m server --model english --api-key KEY        # flags (python -m server, pocket-tts-numpy serve)
    POCKET_TTS_MODEL=english uvicorn --factory server.app:create_app     # the environment
    python -m server --config settings.yaml                # a file (YAML or JSON; POCKET_TTS_CONFIG too)
    applications: [{args: {model: english, ...}}]          # Ray Serve's config (server/cluster.py)

A setting is read from, in order, each overriding the last: its default, the file, the
environment (POCKET_TTS_ and its name in capitals: POCKET_TTS_MAX_CONCURRENT; a list comma
separated), the command line. A file's keys, and Serve's application arguments, are the settings'
names (max_concurrent, allow_hosts: [a, b]). Every value is checked in one place (`check`): a bad one
is one line naming it, wherever it came from, and never showing it (the key is a secret; a file's
value may be as long as the file).

A file's values are taken as their own type, never converted: a list of strings for a list, an
integer for an integer (not true, not 8.0), a string for a string (not 8, not yes). YAML's anchors,
aliases and tags are refused before any value is built: a few hundred bytes of aliases expand to
gigabytes. The API key may come from a file of its own (api_key_file), which keeps it out of the
process list (`ps`, /proc/PID/cmdline) where --api-key puts it.

Wyoming's settings (wyoming, no_http, zeroconf) are python -m server's: the app that uvicorn or a
Serve replica runs is the HTTP front alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, get_type_hints
from urllib.parse import urlsplit

from core.portable.synthesis.options import LOUDNESS_RANGE
from core.portable.weights import catalog

# What a server starts with unless told otherwise, whichever way it starts.
DEFAULT_MODEL = catalog.default_model()
MAX_CONCURRENT = 4  # requests served at once (each a generation, or an upload); more get 503
MAX_CONNECTIONS = 64  # connections open at once, every front's (server/pool.py)
# Seconds a client may leave the server waiting (server/connections.py; a connection's silence: server/session.py).
CLIENT_TIMEOUT = 30.0
BODY_SECONDS = 120.0  # a request's body, however it trickles in (server/guard.py)
ENVIRONMENT = "POCKET_TTS_"
CONFIG = ENVIRONMENT + "CONFIG"
MAX_FILE = 64 * 1024  # a settings file's bytes, at most
MAX_KEY_FILE = 4096  # an API key file's bytes, at most (a key is tens of characters)
# A settings file is a mapping, some of its values lists: nothing nested deeper is a setting, and
# PyYAML builds nested values by recursion (30,000 brackets would be a RecursionError).
MAX_DEPTH = 2
KEYS = ("api_key", "api_key_file")  # the settings that give the API key, one or the other
SHOWN = 40  # characters of a file's name for a setting that an error shows, at most
FALSE, TRUE = ("0", "false", "no", "off", ""), ("1", "true", "yes", "on")


class SettingsError(ValueError):
    """A setting that cannot be used: its message names it and says why."""


def setting(
    default: Any,
    help: str,  # noqa: A002
    flag: str = "",
    metavar: Optional[str] = None,
    secret: bool = False,
) -> Any:
    """A field of Settings: its default, its help, its flag where it is not --NAME (a list's flag is
    repeated: --allow-origin A --allow-origin B); a `secret` one is left out of the settings' repr."""
    return field(default=default, repr=not secret, metadata={"help": help, "flag": flag, "metavar": metavar})


@dataclass(frozen=True)
class Settings:
    model: str = setting(DEFAULT_MODEL, "catalog name, config .yaml/.json, or bundle folder (default: %(default)s)")
    also_models: Tuple[str, ...] = setting(
        (),
        "another model to serve beside --model, the default (repeatable: one a language): a request picks one by "
        "its name or its language; each is loaded on its first request (or at start: --preload)",
        flag="--also-model",
        metavar="MODEL",
    )
    also_adapters: Tuple[str, ...] = setting(
        (),
        "a LoRA fine-tune of --model served beside it as the model NAME (repeatable): a request picks it by "
        "`model`; it shares every weight of the model it adapts (its low-rank pairs alone are its own)",
        flag="--also-adapter",
        metavar="NAME=PATH",
    )
    preload: bool = setting(False, "load every --also-model at start, not on its first request")
    memory_budget: Optional[int] = setting(
        None,
        "megabytes the loaded models may hold together: past it, the --also-model used least recently is let "
        "go, and loaded again when next asked for (default: no bound)",
        metavar="MB",
    )
    adapter: Optional[Path] = setting(
        None, "a LoRA fine-tune of the model (a PEFT folder or a .safetensors file), merged at load", metavar="PATH"
    )
    pronunciations: Optional[Path] = setting(
        None, "words to say otherwise, in every request: a text file of `word = respelling` lines", metavar="FILE"
    )
    voice: Optional[str] = setting(None, "default voice: predefined name, audio file or .safetensors state")
    loudness: Optional[float] = setting(
        None,
        "bring every voice to this loudness, in LUFS (-40 to -5; -18 is usual), where a request asks for none "
        "(every front, Wyoming's included); default: as the model makes it",
        metavar="LUFS",
    )
    host: str = setting("127.0.0.1", "the address to listen on (python -m server; default: %(default)s)")
    port: int = setting(8000, "the port to listen on (python -m server; default: %(default)s)")
    site: Optional[Path] = setting(
        None, "serve this built site (pocket-tts-numpy build-site: both engines) instead of the UI's own files"
    )
    max_concurrent: int = setting(
        MAX_CONCURRENT,
        "requests served at once (each a generation, or an upload); more get 503 (default: %(default)s)",
    )
    max_connections: int = setting(
        MAX_CONNECTIONS,
        "open connections at once, every front's (HTTP, WebSockets, Wyoming); one more is refused when it is "
        "accepted (a JSON 503 over HTTP), beyond a few kept for /health and key holders (default: %(default)s)",
    )
    client_timeout: float = setting(
        CLIENT_TIMEOUT,
        "seconds a client may take to send a request's headers, between pieces of its body, and to take each "
        "piece of an answer, and a WebSocket client may stay silent while nothing is spoken, before its "
        "connection is closed (default: %(default)s)",
    )
    body_timeout: float = setting(
        BODY_SECONDS, "seconds a request's whole body may take to arrive, however it trickles in (default: %(default)s)"
    )
    allow_origins: Tuple[str, ...] = setting(
        (),
        "a web page origin (https://app.example) allowed to use the API beside this server's own page "
        "(repeatable; * for any)",
        flag="--allow-origin",
        metavar="ORIGIN",
    )
    allow_hosts: Tuple[str, ...] = setting(
        (),
        "a host name clients reach the server under, beside localhost and --host (a reverse proxy's, the "
        "machine's own name on a network; repeatable): requests naming any other Host get 421",
        flag="--allow-host",
        metavar="NAME",
    )
    api_key: Optional[str] = setting(
        None,
        "require Authorization: Bearer KEY on every route but those marked public (the page, /health) and the "
        "WebSockets; Wyoming's callers, who carry none, are then guests: no uploaded voice, at most "
        "--guest-slots slots. Every local user reads a flag in the process list: prefer --api-key-file or "
        f"{ENVIRONMENT}API_KEY",
        metavar="KEY",
        secret=True,
    )
    api_key_file: Optional[Path] = setting(
        None,
        f"the API key as the one line of this file (a regular file of at most {MAX_KEY_FILE // 1024} KB, read "
        "once, at start): --api-key kept out of the process list",
        metavar="PATH",
    )
    guest_slots: Optional[int] = setting(
        None,
        "with --api-key, the slots callers without the key (Wyoming's) may hold at once (default: half of "
        "--max-concurrent, rounded down)",
        metavar="N",
    )
    voices_dir: Optional[Path] = setting(
        None,
        "recordings (wav, flac, ogg, mp3) offered as voices by file name on every front, each cloned once",
        metavar="DIR",
    )
    wyoming: Optional[str] = setting(
        None,
        "also answer Home Assistant's Wyoming protocol at tcp://HOST:PORT (or unix://PATH), from the same "
        "engine: every front's generations step together",
        metavar="URI",
    )
    no_http: bool = setting(False, "the Wyoming server alone (needs --wyoming)")
    zeroconf: Optional[str] = setting(
        None,
        "announce the Wyoming server by multicast DNS, as Home Assistant discovers them (NAME: the service's; "
        "default: the machine's MAC address); off by default",
        metavar="NAME",
    )

    def check(self) -> Settings:
        """These settings, or a SettingsError for the first that cannot be used."""
        for name in ("max_concurrent", "max_connections"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{_flag(name)} must be at least 1")
        if self.memory_budget is not None and self.memory_budget < 1:
            raise SettingsError("--memory-budget must be at least 1 (MB)")
        if self.preload and not self.also_models:
            raise SettingsError("--preload goes with --also-model MODEL")
        for pair in self.also_adapters:
            name, _, path = pair.partition("=")
            if not name or not path or not re.fullmatch(r"[\w.-]{1,64}", name):
                raise SettingsError("--also-adapter takes NAME=PATH (NAME: letters, digits, . _ -, at most 64)")
        if not 1 <= self.port <= 65535:
            raise SettingsError("--port must be between 1 and 65535")
        if self.guest_slots is not None and not 0 <= self.guest_slots <= self.max_concurrent:
            raise SettingsError("--guest-slots must be between 0 and --max-concurrent")
        for name in ("client_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise SettingsError(f"{_flag(name)} must be positive")
        low, high = LOUDNESS_RANGE
        if self.loudness is not None and not low <= self.loudness <= high:
            raise SettingsError(f"--loudness must be between {low:g} and {high:g} LUFS")
        if self.wyoming is None and (self.no_http or self.zeroconf is not None):
            raise SettingsError("--no-http and --zeroconf go with --wyoming URI")
        if self.wyoming is not None and urlsplit(self.wyoming).scheme not in ("tcp", "unix"):
            raise SettingsError("--wyoming takes tcp://HOST:PORT or unix://PATH")
        announced = urlsplit(self.wyoming or "")
        if self.zeroconf is not None and (announced.scheme != "tcp" or announced.port is None):
            raise SettingsError("--zeroconf announces a tcp://HOST:PORT Wyoming server")
        return self

    @property
    def hosts(self) -> List[str]:
        """The names the server answers to beside localhost: the one it listens on, and the others."""
        return [self.host, *self.allow_hosts]

    def updated(self, values: Mapping[Any, Any], source: str) -> Settings:
        """These settings with `values` (by name, each of its own type: a file's, or a flag's as
        argparse made it), checked; `source` names where they came from in an error. A key file's
        key replaces the key, and a key given replaces an earlier key file's."""
        types = get_type_hints(Settings)
        known = {f.name for f in fields(self)}
        changes = {}
        for name, value in values.items():
            if name not in known:
                raise SettingsError(f"{source}: unknown setting {_shown(name)} ({', '.join(sorted(known))})")
            if value is None and name in KEYS:  # `api_key:` left blank, as a template may leave it
                raise SettingsError(f"{source}: {name} is empty (leave it out for a server without a key)")
            try:
                changes[name] = _typed(value, types[name])
            except ValueError as e:
                raise SettingsError(f"{source}: {name} must be {e}") from None
        if "api_key_file" in changes:
            if "api_key" in changes:
                raise SettingsError(f"{source}: {' or '.join(KEYS)}, not both")
            changes["api_key"] = _key_of(changes["api_key_file"])
        elif "api_key" in changes:
            _check_key(changes["api_key"], f"{source}: api_key")
            changes["api_key_file"] = None
        return dataclasses.replace(self, **changes).check()

    @classmethod
    def from_file(cls, path: Path, base: Optional[Settings] = None) -> Settings:
        """`base` (default: the defaults) with the settings of a YAML or JSON file: a regular file
        of at most MAX_FILE bytes (a FIFO, a device or a folder is refused, never waited on)."""
        text = _text_of(Path(path), MAX_FILE, "the settings file")
        values = _parsed(text, str(path))
        if not isinstance(values, dict):
            raise SettingsError(f"{path}: a settings file holds a mapping of settings by name")
        return (base or cls()).updated(values, str(path))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ, base: Optional[Settings] = None) -> Settings:
        """`base` (default: the defaults, with POCKET_TTS_CONFIG's file) with each POCKET_TTS_ variable."""
        if base is None:
            base = cls.from_file(Path(environ[CONFIG])) if environ.get(CONFIG) else cls()
        types = get_type_hints(Settings)
        variables = {f.name: _variable(f.name) for f in fields(cls)}
        values = {
            name: _from_text(environ[variable], types[name])
            for name, variable in variables.items()
            if variable in environ
        }
        return base.updated(values, "the environment")

    @classmethod
    def from_arguments(cls, argv: Optional[Sequence[str]] = None, prog: str = "python -m server") -> Settings:
        """The settings of a command line: its --config file (or POCKET_TTS_CONFIG's), the
        environment, then its flags; a bad one is argparse's usage error (exit status 2)."""
        parser = cls.parser(prog)
        given = vars(parser.parse_args(argv))
        try:
            config = given.pop("config", None)
            base = cls.from_file(config) if config is not None else None
            return cls.from_environment(base=base).updated(given, "the command line")
        except SettingsError as e:
            parser.error(str(e))
            raise  # parser.error exits

    @classmethod
    def parser(cls, prog: str, names: Optional[Sequence[str]] = None, description: str = "") -> argparse.ArgumentParser:
        """A command line of the settings (`names`: of these only), where only the flags given are
        in the parsed namespace (the others keep the file's, the environment's or the default)."""
        about = "Pocket TTS HTTP server. Each setting also comes from a --config file or the environment "
        about += f"({ENVIRONMENT}NAME: {ENVIRONMENT}MAX_CONCURRENT=8); a flag overrides both."
        parser = argparse.ArgumentParser(prog=prog, description=description or about)
        cls.add_arguments(parser, names)
        if names is None:
            parser.add_argument(
                "--config",
                type=Path,
                default=argparse.SUPPRESS,
                help=f"a YAML or JSON file of settings by name (default: the {CONFIG} environment variable's)",
            )
        return parser

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, names: Optional[Sequence[str]] = None) -> None:
        """The flags of the settings (`names`: of these only) on `parser`."""
        types = get_type_hints(Settings)
        for f in fields(cls):
            if names is not None and f.name not in names:
                continue
            kind = _inner(types[f.name])
            options: Dict[str, Any] = {"default": argparse.SUPPRESS, "dest": f.name, "help": f.metadata["help"]}
            options["help"] = options["help"].replace("%(default)s", str(f.default))
            if kind is bool:
                options["action"] = "store_true"
            elif _is_tuple(kind):
                options["action"] = "append"
            else:
                options["type"] = kind  # argparse's own message for a value of the wrong type
            if f.name == "zeroconf":  # a flag alone: on, with the default name
                options.update(nargs="?", const="")
            if f.metadata["metavar"]:
                options["metavar"] = f.metadata["metavar"]
            parser.add_argument(f.metadata["flag"] or _flag(f.name), **options)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _variable(name: str) -> str:
    return ENVIRONMENT + name.upper()


def _is_tuple(kind: Any) -> bool:
    return getattr(kind, "__origin__", None) is tuple


def _inner(kind: Any) -> Any:
    """X of Optional[X], else `kind`."""
    arguments = getattr(kind, "__args__", ())
    return next(a for a in arguments if a is not type(None)) if type(None) in arguments else kind


def _from_text(text: str, kind: Any) -> Any:
    """A variable's text as a value of `kind` where it reads as one, else the text (which `_typed`
    then refuses, naming what it must be)."""
    kind = _inner(kind)
    if _is_tuple(kind):
        return text.split(",")
    if kind is bool:
        word = text.strip().lower()
        return word in TRUE if word in TRUE + FALSE else text
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            return text
    return text


def _typed(value: Any, kind: Any) -> Any:
    """`value` as a setting of `kind`, taken only where it is of that type (an integer for a number
    too); else a ValueError saying what it must be. Never str(): a file's value is not shown or
    expanded."""
    if value is None and _inner(kind) is not kind:  # Optional[X]
        return None
    kind = _inner(kind)
    if _is_tuple(kind):
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            raise ValueError("a list of strings")
        return tuple(item.strip() for item in value if item.strip())
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError("true or false")
        return value
    if kind is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError("an integer")
        return value
    if kind is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not _finite(value):
            raise ValueError("a number")
        return float(value)
    if kind is Path:
        if not isinstance(value, (str, Path)) or value == "":
            raise ValueError("a path")
        return Path(value)
    if not isinstance(value, str):
        raise ValueError("a string")
    return value


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer past any float
        return False


def _check_key(key: str, what: str) -> None:
    """A SettingsError unless `key` can be sent as Authorization: Bearer KEY: an empty key would
    leave the server open to all, and one with a space at either end or outside printable ASCII could
    never be sent whole (HTTP trims a header's spaces)."""
    if not key.strip():
        raise SettingsError(f"{what} is empty (leave it out for a server without a key)")
    if key != key.strip() or not all(" " <= character <= "~" for character in key):
        raise SettingsError(f"{what} must be printable ASCII, without spaces at either end")


def _key_of(path: Path) -> str:
    """The API key in the file at `path`: its text, less the spaces and line break around it."""
    key = _text_of(path, MAX_KEY_FILE, "the API key file").strip()
    _check_key(key, f"the API key file {_clipped(str(path))}")
    return key


def _text_of(path: Path, limit: int, what: str) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; anything else a SettingsError
    naming `what` and the file, never its content. A FIFO or a device is opened without waiting
    (O_NONBLOCK) and refused, never read."""
    shown = _clipped(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise SettingsError(f"cannot read {what} {shown}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SettingsError(f"{what} {shown} is not a file")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(limit + 1)
        except OSError as e:
            raise SettingsError(f"cannot read {what} {shown}: {e.strerror or e}") from None
    if len(data) > limit:
        raise SettingsError(f"{what} {shown} holds more than {limit // 1024} KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{what} {shown} is not UTF-8 text") from None


def _clipped(text: str) -> str:
    """`text` as an error shows it: at most a few lines' worth."""
    return text if len(text) <= 4 * SHOWN else text[: 4 * SHOWN] + "..."


def _shown(name: Any) -> str:
    """A file's name for a setting as an error shows it: at most SHOWN characters of it."""
    if not isinstance(name, str):
        return f"of type {type(name).__name__}"
    return repr(name) if len(name) <= SHOWN else repr(name[:SHOWN]) + "..."


def _parsed(text: str, source: str) -> Any:
    """The values of a settings file's text, JSON or YAML (without anchors, aliases or tags)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON (or nested past Python's stack): YAML's reading says where
        pass
    import yaml

    try:
        refused = _refused(yaml.parse(text, Loader=yaml.SafeLoader))
        values = None if refused else yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SettingsError(f"{source} is neither YAML nor JSON: {_where(e, text)}") from None
    except ValueError:  # a date or an integer that Python cannot make (2024-13-45, 5,000 digits)
        raise SettingsError(f"{source} holds a date or a number out of range") from None
    if refused:
        raise SettingsError(f"{source}: {refused}")
    return values


def _refused(events: Any) -> Optional[str]:
    """Why a YAML stream's events are no settings file (its line, and what is not allowed there), or
    None. Read before any value is built: an alias's cost is only paid when its value is."""
    import yaml

    depth = 0
    for event in events:
        line = event.start_mark.line + 1
        if getattr(event, "anchor", None) is not None:  # an alias's anchor is the name it repeats
            return f"line {line}: anchors and aliases are not allowed"
        if getattr(event, "tag", None) is not None:
            return f"line {line}: tags are not allowed"
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return f"line {line}: settings nest at most {MAX_DEPTH} deep (a mapping of lists)"
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


# A quoted part of PyYAML's message. What it found is a piece of the file (a character, a tag
# handle) unless it names a token ('<scalar>'); what it expected is its own syntax (',' or ']').
_QUOTED = re.compile(r"""( ?)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_TOKEN = re.compile(r"'<[a-z ]+>'")
_MARK = re.compile(r"'[^\w\\]'")


def _unquoted(problem: str) -> str:
    """PyYAML's `problem` without the pieces of the file it quotes."""
    expected, found, rest = problem.partition("found")
    return _kept(expected, (_TOKEN, _MARK)) + found + _kept(rest, (_TOKEN,))


def _kept(text: str, kinds: Tuple[Any, ...]) -> str:
    """`text` with only its quoted parts of these kinds."""
    return _QUOTED.sub(lambda quoted: quoted[0] if any(kind.fullmatch(quoted[2]) for kind in kinds) else "", text)


def _where(error: Any, text: str) -> str:
    """A YAML error's line, column and problem, without the text it quotes (a key may be there)."""
    import yaml

    if isinstance(error, yaml.reader.ReaderError):  # a character YAML refuses, by its position
        before = text[: error.position]
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        return f"line {line}, column {column}: {error.reason}"
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem, context = getattr(error, "problem", None), getattr(error, "context", None)
    problem = f"{problem} ({context})" if problem and context else problem or context or "not readable"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + _clipped(_unquoted(problem))
