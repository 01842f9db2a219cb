"""The server's settings (server/settings.py), declared once and read alike by every way the server
starts: each has a flag, an environment variable and a file key; a file, then the environment,
then the flags override the defaults; a bad value is one line naming it, wherever it came from."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.settings import ENVIRONMENT, MAX_FILE, Settings, SettingsError
from tests.support.paths import ROOT

# A value of each setting that is not its default, as a file gives it, and as text (a flag, a variable).
VALUES = {
    "model": ("other", "other"),
    "voice": ("alba", "alba"),
    "host": ("0.0.0.0", "0.0.0.0"),
    "port": (9000, "9000"),
    "site": ("build/site", "build/site"),
    "max_concurrent": (8, "8"),
    "max_connections": (16, "16"),
    "client_timeout": (2.5, "2.5"),
    "body_timeout": (9.0, "9"),
    "allow_origins": (["https://a.example", "https://b.example"], "https://a.example,https://b.example"),
    "allow_hosts": (["tts.lan"], "tts.lan"),
    "api_key": ("sesame", "sesame"),
    "guest_slots": (1, "1"),
    "voices_dir": ("voices", "voices"),
    "wyoming": ("tcp://0.0.0.0:10200", "tcp://0.0.0.0:10200"),
    "no_http": (True, "true"),
    "zeroconf": ("kitchen", "kitchen"),
}

FLAGS = {"allow_origins": "--allow-origin", "allow_hosts": "--allow-host"}  # repeated, one value each


def test_every_setting_is_a_file_key_a_variable_and_a_flag(tmp_path: Path) -> None:
    names = [f.name for f in dataclasses.fields(Settings)]
    assert sorted(names) == sorted(VALUES)
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps({name: value for name, (value, _) in VALUES.items()}))
    from_file = Settings.from_file(settings_file)
    from_environment = Settings.from_environment(
        {ENVIRONMENT + name.upper(): text for name, (_, text) in VALUES.items()}
    )
    flags = []
    for name, (value, text) in VALUES.items():
        flag = {"allow_origins": "--allow-origin", "allow_hosts": "--allow-host"}.get(
            name, "--" + name.replace("_", "-")
        )
        if isinstance(value, list):
            flags += [part for item in value for part in (flag, item)]
        else:
            flags += [flag] if value is True else [flag, text]
    from_flags = Settings.from_arguments(flags)
    for name in names:
        assert getattr(from_file, name) == getattr(from_environment, name) == getattr(from_flags, name), name
        assert getattr(from_file, name) != getattr(Settings(), name), name
    assert from_file.allow_origins == ("https://a.example", "https://b.example") and from_file.port == 9000
    assert from_file.site == Path("build/site") and from_file.no_http is True


def test_a_file_then_the_environment_then_the_flags(tmp_path: Path, monkeypatch) -> None:
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text("max_concurrent: 3\nvoice: from-the-file\nport: 9001\n")
    monkeypatch.setenv(ENVIRONMENT + "CONFIG", str(settings_file))
    monkeypatch.setenv(ENVIRONMENT + "MAX_CONCURRENT", "5")
    monkeypatch.setenv(ENVIRONMENT + "VOICE", "from-the-environment")
    settings = Settings.from_arguments(["--voice", "from-the-flags"])
    assert (settings.max_concurrent, settings.voice, settings.port) == (5, "from-the-flags", 9001)
    assert Settings.from_environment().voice == "from-the-environment"
    other = tmp_path / "other.json"
    other.write_text('{"port": 9002}')
    assert Settings.from_arguments(["--config", str(other)]).port == 9002  # --config over the variable's file


@pytest.mark.parametrize(
    "source, message",
    [
        ({ENVIRONMENT + "PORT": "nope"}, "the environment: port cannot be 'nope'"),
        ({ENVIRONMENT + "MAX_CONCURRENT": "0"}, "--max-concurrent must be at least 1"),
        ({ENVIRONMENT + "NO_HTTP": "maybe"}, "the environment: no_http cannot be 'maybe'"),
        ({ENVIRONMENT + "ZEROCONF": "x"}, "--no-http and --zeroconf go with --wyoming URI"),
        ({ENVIRONMENT + "WYOMING": "http://x"}, "--wyoming takes tcp://HOST:PORT or unix://PATH"),
        ({ENVIRONMENT + "CLIENT_TIMEOUT": "-1"}, "--client-timeout must be positive"),
    ],
)
def test_a_bad_variable_is_refused_naming_it(source: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("?", r"\?")):
        Settings.from_environment(source)


def test_a_bad_file_is_refused_naming_it(tmp_path: Path) -> None:
    cases = {
        "unknown.yaml": ("max_concurent: 3\n", "unknown setting 'max_concurent'"),
        "list.yaml": ("- model\n", "holds a mapping of settings by name"),
        "typed.json": ('{"max_concurrent": true}', "max_concurrent cannot be True"),
        "fraction.json": ('{"port": 80.5}', "port cannot be 80.5"),
        "broken.yaml": ("model: [\n", "is neither YAML nor JSON"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(SettingsError, match=message):
            Settings.from_file(tmp_path / name)
    with pytest.raises(SettingsError, match="is not a file"):
        Settings.from_file(tmp_path / "missing.yaml")
    for path in (tmp_path, Path("/dev/zero")):  # a folder, a device that never ends: refused, not read
        with pytest.raises(SettingsError, match="is not a file"):
            Settings.from_file(path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a read would wait for a writer forever
    with pytest.raises(SettingsError, match="is not a file"):
        Settings.from_file(fifo)
    (tmp_path / "huge.yaml").write_text("model: x\n" + "#" * (MAX_FILE + 1))
    with pytest.raises(SettingsError, match="holds more than 64 KB"):
        Settings.from_file(tmp_path / "huge.yaml")
    (tmp_path / "latin.yaml").write_bytes(b"voice: \xe9\n")
    with pytest.raises(SettingsError, match="is not UTF-8 text"):
        Settings.from_file(tmp_path / "latin.yaml")


def test_the_servers_command_line_says_a_bad_setting_in_one_line_before_loading(tmp_path: Path) -> None:
    (tmp_path / "settings.yaml").write_text("max_concurent: 3\n")
    for arguments, environment, said in (
        (["--config", str(tmp_path / "settings.yaml")], {}, "unknown setting 'max_concurent'"),
        ([], {ENVIRONMENT + "GUEST_SLOTS": "9"}, "--guest-slots must be between 0 and --max-concurrent"),
        (["--port", "nope"], {}, "argument --port: invalid int value: 'nope'"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "server", *arguments],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", **environment},
            timeout=60,
        )
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 2 and "Traceback" not in done.stderr and "loading" not in done.stderr, done.stderr
        assert last.startswith("python -m server: error: ") and said in last, last
