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
is one line naming it, wherever it came from.

Wyoming's settings (wyoming, no_http, zeroconf) are python -m server's: the app that uvicorn or a
Serve replica runs is the HTTP front alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, get_type_hints
from urllib.parse import urlsplit

from core.portable import catalog

# What a server starts with unless told otherwise, whichever way it starts.
DEFAULT_MODEL = catalog.default_model()
MAX_CONCURRENT = 4  # requests served at once (each a generation, or an upload); more get 503
MAX_CONNECTIONS = 64  # connections open at once, every front's (server/pool.py)
# Seconds a client may leave the server waiting (server/connections.py; a connection's silence: server/session.py).
CLIENT_TIMEOUT = 30.0
BODY_SECONDS = 120.0  # a request's body, however it trickles in (server/guard.py)
ENVIRONMENT = "POCKET_TTS_"
CONFIG = ENVIRONMENT + "CONFIG"
MAX_FILE = 64 * 1024  # a settings file's bytes, at most  # the file's path, where no --config names one
FALSE, TRUE = ("0", "false", "no", "off", ""), ("1", "true", "yes", "on")


class SettingsError(ValueError):
    """A setting that cannot be used: its message names it and says why."""


def setting(default: Any, help: str, flag: str = "", metavar: Optional[str] = None) -> Any:  # noqa: A002
    """A field of Settings: its default, its help, its flag where it is not --NAME (a list's flag is
    repeated: --allow-origin A --allow-origin B)."""
    return field(default=default, metadata={"help": help, "flag": flag, "metavar": metavar})


@dataclass(frozen=True)
class Settings:
    model: str = setting(DEFAULT_MODEL, "catalog name, config .yaml/.json, or bundle folder (default: %(default)s)")
    voice: Optional[str] = setting(None, "default voice: predefined name, audio file or .safetensors state")
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
        "--guest-slots slots",
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
        if not 1 <= self.port <= 65535:
            raise SettingsError("--port must be between 1 and 65535")
        if self.guest_slots is not None and not 0 <= self.guest_slots <= self.max_concurrent:
            raise SettingsError("--guest-slots must be between 0 and --max-concurrent")
        for name in ("client_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise SettingsError(f"{_flag(name)} must be positive")
        if self.wyoming is None and (self.no_http or self.zeroconf is not None):
            raise SettingsError("--no-http and --zeroconf go with --wyoming URI")
        if self.wyoming is not None and urlsplit(self.wyoming).scheme not in ("tcp", "unix"):
            raise SettingsError(f"--wyoming takes tcp://HOST:PORT or unix://PATH, not {self.wyoming!r}")
        announced = urlsplit(self.wyoming or "")
        if self.zeroconf is not None and (announced.scheme != "tcp" or announced.port is None):
            raise SettingsError("--zeroconf announces a tcp://HOST:PORT Wyoming server")
        return self

    @property
    def hosts(self) -> List[str]:
        """The names the server answers to beside localhost: the one it listens on, and the others."""
        return [self.host, *self.allow_hosts]

    def updated(self, values: Mapping[str, Any], source: str) -> Settings:
        """These settings with `values` (by name, each a string or its own type), checked; `source`
        names where they came from in an error."""
        types = get_type_hints(Settings)
        known = {f.name for f in fields(self)}
        changes = {}
        for name, value in values.items():
            if name not in known:
                raise SettingsError(f"{source}: unknown setting {name!r} ({', '.join(sorted(known))})")
            try:
                changes[name] = _typed(value, types[name])
            except (TypeError, ValueError):
                raise SettingsError(f"{source}: {name} cannot be {value!r}") from None
        return dataclasses.replace(self, **changes).check()

    @classmethod
    def from_file(cls, path: Path, base: Optional[Settings] = None) -> Settings:
        """`base` (default: the defaults) with the settings of a YAML or JSON file: a regular file
        of at most MAX_FILE bytes (a FIFO, a device or a folder is refused, never waited on)."""
        try:
            if not Path(path).is_file():
                raise SettingsError(f"the settings file {path} is not a file")
            with open(path, "rb") as file:
                data = file.read(MAX_FILE + 1)
        except OSError as e:
            raise SettingsError(f"cannot read the settings file {path}: {e.strerror or e}") from None
        if len(data) > MAX_FILE:
            raise SettingsError(f"the settings file {path} holds more than {MAX_FILE // 1024} KB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SettingsError(f"the settings file {path} is not UTF-8 text") from None
        values = _parsed(text, str(path))
        if not isinstance(values, dict):
            raise SettingsError(f"{path}: a settings file holds a mapping of settings by name")
        return (base or cls()).updated(values, str(path))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ, base: Optional[Settings] = None) -> Settings:
        """`base` (default: the defaults, with POCKET_TTS_CONFIG's file) with each POCKET_TTS_ variable."""
        if base is None:
            base = cls.from_file(Path(environ[CONFIG])) if environ.get(CONFIG) else cls()
        values = {f.name: environ[_variable(f.name)] for f in fields(cls) if _variable(f.name) in environ}
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


def _typed(value: Any, kind: Any) -> Any:
    """`value` (a string from the environment or a flag, or a file's value) as a setting of `kind`."""
    if value is None and _inner(kind) is not kind:  # Optional[X]
        return None
    kind = _inner(kind)
    if _is_tuple(kind):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise TypeError(value)
        return tuple(str(item).strip() for item in items if str(item).strip())
    if kind is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() not in FALSE + TRUE:
            raise ValueError(value)
        return str(value).lower() in TRUE
    if kind in (int, float) and isinstance(value, bool):
        raise TypeError(value)
    if kind is int and isinstance(value, float):
        raise TypeError(value)
    return kind(value)


def _parsed(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SettingsError(f"{source} is neither YAML nor JSON: {e}") from None
