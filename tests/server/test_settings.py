"""The server's settings (server/settings.py), declared once and read alike by every way the server
starts: each has a flag, an environment variable and a file key; a file, then the environment,
then the flags override the defaults; a bad value is one line naming it, wherever it came from."""

from __future__ import annotations

import dataclasses
import json
import os
import string
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import List

import pytest

from server.settings import ENVIRONMENT, MAX_FILE, MAX_KEY_FILE, Settings, SettingsError
from tests.support.paths import LOCAL, ROOT, TINY_CONFIG, VOICE_24K

# A value of each setting that is not its default, as a file gives it, and as text (a flag, a variable).
VALUES = {
    "model": ("other", "other"),
    "also_models": (["french", "german"], "french,german"),
    "preload": (True, "true"),
    "also_adapters": (["mine=voices/mine"], "mine=voices/mine"),
    "memory_budget": (2000, "2000"),
    "adapter": ("my-voice", "my-voice"),
    "pronunciations": ("names.txt", "names.txt"),
    "loudness": (-18.0, "-18"),
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

FLAGS = {
    "allow_origins": "--allow-origin",
    "allow_hosts": "--allow-host",
    "also_models": "--also-model",
    "also_adapters": "--also-adapter",
}  # repeated
# A key that looks like one, to be found in no message (the settings give it one way: api_key_file
# is asked apart from VALUES, which give api_key).
SECRET = "sk-live-7d1f0c9e5b3a"


def test_every_setting_is_a_file_key_a_variable_and_a_flag(tmp_path: Path) -> None:
    names = [f.name for f in dataclasses.fields(Settings)]
    assert sorted(names) == sorted([*VALUES, "api_key_file"])
    names.remove("api_key_file")
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps({name: value for name, (value, _) in VALUES.items()}))
    from_file = Settings.from_file(settings_file)
    from_environment = Settings.from_environment(
        {ENVIRONMENT + name.upper(): text for name, (_, text) in VALUES.items()}
    )
    flags = []
    for name, (value, text) in VALUES.items():
        flag = FLAGS.get(name, "--" + name.replace("_", "-"))
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
        ({ENVIRONMENT + "PORT": "nope"}, "the environment: port must be an integer"),
        ({ENVIRONMENT + "PORT": "8.5"}, "the environment: port must be an integer"),
        ({ENVIRONMENT + "MAX_CONCURRENT": "0"}, "--max-concurrent must be at least 1"),
        ({ENVIRONMENT + "NO_HTTP": "maybe"}, "the environment: no_http must be true or false"),
        ({ENVIRONMENT + "BODY_TIMEOUT": "inf"}, "the environment: body_timeout must be a number"),
        ({ENVIRONMENT + "SITE": ""}, "the environment: site must be a path"),
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
        "typed.json": ('{"max_concurrent": true}', "max_concurrent must be an integer"),
        "fraction.json": ('{"port": 80.5}', "port must be an integer"),
        "broken.yaml": ("model: [\n", "is neither YAML nor JSON: line 2, column 1: expected the node content"),
        "date.yaml": ("model: 2024-13-45\n", "holds a date or a number out of range"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(SettingsError, match=message):
            Settings.from_file(tmp_path / name)
    with pytest.raises(SettingsError, match="cannot read the settings file .*missing.yaml: No such file"):
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
        (["--api-key", ""], {}, "the command line: api_key is empty"),  # not an open server
        ([], {ENVIRONMENT + "API_KEY": " "}, "the environment: api_key is empty"),
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


def refusal(flags: List[str], capsys: pytest.CaptureFixture) -> str:
    """What python -m server's command line says of these flags, up to the parenthesis that follows
    some messages; it exits with argparse's status for a usage error."""
    with pytest.raises(SystemExit) as exited:
        Settings.from_arguments(flags)
    assert exited.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said.startswith("python -m server: error: "), said
    return said[len("python -m server: error: ") :].split(" (")[0]


def alias_bomb(levels: int) -> str:
    """A settings file whose one value, once its aliases are expanded, holds 9**levels strings: each
    line an anchored list of nine aliases of the line before."""
    lines = ["max_concurrent:", f"  - &a [{','.join('x' * 9)}]"]
    for level in range(1, levels):
        before, name = string.ascii_lowercase[level - 1 : level + 1]
        lines.append(f"  - &{name} [{','.join(['*' + before] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels, issue_bytes", [(7, 291), (9, 377)])
def test_anchors_and_aliases_are_refused_before_any_value_is_built(
    tmp_path: Path, levels: int, issue_bytes: int
) -> None:
    """The issue's files, of 291 and 377 bytes, made 56 MB and 1.4 GB of error: ours, no larger,
    expand to 9**7 (4.8 million) and 9**9 (387 million) strings. Refused by their first anchor's
    line, at the cost of reading a few hundred bytes."""
    bomb = tmp_path / "settings.yaml"
    bomb.write_text("port: 9000\n")
    Settings.from_file(bomb)  # PyYAML imported before the count
    bomb.write_text(alias_bomb(levels))
    assert bomb.stat().st_size <= issue_bytes
    tracemalloc.start()
    try:
        with pytest.raises(SettingsError) as refused:
            Settings.from_file(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(refused.value) == f"{bomb}: line 2: anchors and aliases are not allowed"
    assert peak < 512 * 1024, peak
    for text, line in (("voice: &v alba\n", 1), ("port: 8000\nvoice: *v\n", 2)):  # an anchor alone, an alias alone
        bomb.write_text(text)
        with pytest.raises(SettingsError, match=f"line {line}: anchors and aliases are not allowed"):
            Settings.from_file(bomb)


@pytest.mark.parametrize("name, text", [("deep.yaml", "allow_hosts: " + "[" * 30000), ("deep.json", "[" * 30000)])
def test_values_nested_past_any_setting_are_refused_by_their_line(tmp_path: Path, name: str, text: str) -> None:
    """30,000 brackets (half the file's limit) were a RecursionError's traceback, JSON's or PyYAML's."""
    (tmp_path / name).write_text(text)
    with pytest.raises(SettingsError, match="line 1: settings nest at most 2 deep"):
        Settings.from_file(tmp_path / name)


@pytest.mark.parametrize(
    "values, said",
    [
        ({"voice": True}, "voice must be a string"),
        ({"model": 8}, "model must be a string"),
        ({"api_key": 12345}, "api_key must be a string"),
        ({"allow_hosts": [1, 2]}, "allow_hosts must be a list of strings"),
        ({"allow_hosts": "a.lan,b.lan"}, "allow_hosts must be a list of strings"),
        ({"port": "8000"}, "port must be an integer"),
        ({"max_concurrent": True}, "max_concurrent must be an integer"),
        ({"client_timeout": float("inf")}, "client_timeout must be a number"),
        ({"body_timeout": 10**400}, "body_timeout must be a number"),
        ({"no_http": "yes"}, "no_http must be true or false"),
        ({"site": ""}, "site must be a path"),
        ({"voices_dir": ["voices"]}, "voices_dir must be a path"),
    ],
)
def test_a_files_values_are_taken_as_their_own_type_never_converted(tmp_path: Path, values: dict, said: str) -> None:
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps(values))
    with pytest.raises(SettingsError) as refused:
        Settings.from_file(settings_file)
    assert str(refused.value) == f"{settings_file}: {said}"


def test_an_error_names_the_setting_never_its_value_and_shows_a_name_bounded(tmp_path: Path) -> None:
    settings_file = tmp_path / "settings.json"
    for values, said in (
        ({"port": "x" * 60000}, "port must be an integer"),
        ({"wyoming": "ftp://" + "x" * 60000}, "--wyoming takes tcp://HOST:PORT or unix://PATH"),
        ({"y" * 60000: 1}, "unknown setting '" + "y" * 40 + "'..."),
    ):
        settings_file.write_text(json.dumps(values))
        with pytest.raises(SettingsError) as refused:
            Settings.from_file(settings_file)
        assert said in str(refused.value) and len(str(refused.value)) < 500  # the settings' names, listed
    settings_file.write_text("1: 2\n")
    with pytest.raises(SettingsError, match="unknown setting of type int"):
        Settings.from_file(settings_file)


@pytest.mark.parametrize(
    "line, said",
    [
        (f"api_key: {SECRET}: oops", "line 1, column 30: mapping values are not allowed here"),
        (f'api_key: "{SECRET}\\q"', "line 1, column 32: found unknown escape character"),
        (f"api_key: !{SECRET}!x y", "line 1, column 10: found undefined tag handle"),
        (f"api_key: `{SECRET}", "line 1, column 10: found character that cannot start any token"),
        (f"api_key: {SECRET}\x01", "line 1, column 30: special characters are not allowed"),
        (f"api_key: [{SECRET}", "line 2, column 1: expected ',' or ']', but got '<stream end>'"),
    ],
)
def test_a_syntax_error_says_where_and_what_never_the_lines_text(tmp_path: Path, line: str, said: str) -> None:
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text(line + "\n")
    with pytest.raises(SettingsError) as refused:
        Settings.from_file(settings_file)
    message = str(refused.value)
    assert message.startswith(f"{settings_file} is neither YAML nor JSON: {said}"), message
    assert SECRET[3:] not in message and "api_key" not in message, message


@pytest.mark.parametrize("text", ["", "  ", "\n", " \t\n"])
def test_an_empty_key_is_refused_from_every_source(tmp_path: Path, text: str, capsys) -> None:
    """An empty key was a server open to all, silently."""
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps({"api_key": text}))
    key_file = tmp_path / "key"
    key_file.write_text(text)
    assert refusal(["--api-key", text], capsys) == "the command line: api_key is empty"
    with pytest.raises(SettingsError, match="^the environment: api_key is empty"):
        Settings.from_environment({ENVIRONMENT + "API_KEY": text})
    with pytest.raises(SettingsError, match=f"^{settings_file}: api_key is empty"):
        Settings.from_file(settings_file)
    assert refusal(["--api-key-file", str(key_file)], capsys) == f"the API key file {key_file} is empty"
    settings_file.write_text("api_key:\n")  # a blank a template left: no key is no value, not None
    with pytest.raises(SettingsError, match="api_key is empty"):
        Settings.from_file(settings_file)


def test_the_key_from_a_file_by_flag_variable_or_settings_file(tmp_path: Path) -> None:
    """A key file keeps the key out of the process list (/proc/PID/cmdline), where a flag puts it."""
    key_file = tmp_path / "key"
    key_file.write_text(f"  {SECRET}\n")
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text(f"api_key_file: {key_file}\n")
    for settings in (
        Settings.from_arguments(["--api-key-file", str(key_file)]),
        Settings.from_environment({ENVIRONMENT + "API_KEY_FILE": str(key_file)}),
        Settings.from_file(settings_file),
    ):
        assert (settings.api_key, settings.api_key_file) == (SECRET, key_file)
        assert SECRET not in repr(settings)
    later = Settings.from_file(settings_file).updated({"api_key": "another"}, "the command line")
    assert (later.api_key, later.api_key_file) == ("another", None)  # a layer's key over the file's layer
    (tmp_path / "sesame").write_text("a file that happens to share the key's name")
    assert Settings.from_arguments(["--api-key", "sesame"]).api_key == "sesame"  # the key is never a file's name


def test_a_key_file_is_a_regular_file_of_one_short_line(tmp_path: Path, capsys) -> None:
    key_file = tmp_path / "key"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a read would wait for a writer forever
    for path in (tmp_path, Path("/dev/zero"), fifo):
        assert refusal(["--api-key-file", str(path)], capsys) == f"the API key file {path} is not a file"
    for content, said in (
        (SECRET.encode() + b"\xe9", "is not UTF-8 text"),
        (SECRET.encode() + b" " * MAX_KEY_FILE, "holds more than 4 KB"),
        (SECRET.encode() + b"\nsecond line\n", "must be printable ASCII, without spaces at either end"),
        (SECRET.encode() + b"\x00", "must be printable ASCII, without spaces at either end"),
    ):
        key_file.write_bytes(content)
        assert refusal(["--api-key-file", str(key_file)], capsys) == f"the API key file {key_file} {said}"
    with pytest.raises(SettingsError, match="^cannot read the API key file .*missing: No such file"):
        Settings.from_environment({ENVIRONMENT + "API_KEY_FILE": str(tmp_path / "missing")})
    key_file.write_text(SECRET)
    both = ["--api-key", SECRET, "--api-key-file", str(key_file)]
    assert refusal(both, capsys) == "the command line: api_key or api_key_file, not both"


def test_the_key_is_in_no_error(tmp_path: Path) -> None:
    """Wherever the key is when a setting is refused, the message names the setting, never the key."""
    settings_file = tmp_path / "settings.yaml"
    for text in (
        f"api_key: {SECRET}\nport: nope\n",
        f"api_key: {SECRET}\u0001\n",
        f"api_key: ' {SECRET}'\n",
        f"api_key: [{SECRET}]\n",
        f"api_key: &{SECRET} x\n",
        f"api_key: {SECRET}\n\t- x\n",
        f"api_key: {SECRET}\napi_key_file: {settings_file}\n",
    ):
        settings_file.write_text(text)
        with pytest.raises(SettingsError) as refused:
            Settings.from_file(settings_file)
        assert SECRET[3:] not in str(refused.value), str(refused.value)
    for flags in (["--api-key", SECRET + "\n"], ["--api-key", SECRET, "--max-concurrent", "0"]):
        with pytest.raises(SettingsError) as refused:
            Settings.from_environment().updated(vars(Settings.parser("x").parse_args(flags)), "the command line")
        assert SECRET[3:] not in str(refused.value), str(refused.value)


def test_a_server_started_with_a_key_file_requires_its_key(tmp_path: Path) -> None:
    from litestar.testing import TestClient

    from server.app import create_app
    from server.engine import load_engine

    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    flags = ["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), "--api-key-file", str(key_file)]
    settings = Settings.from_arguments(flags)
    engine = load_engine(settings)
    try:
        with TestClient(app=create_app(engine, settings), base_url=LOCAL) as client:
            assert client.get("/v1/models").status_code == 401
            assert client.get("/v1/models", headers={"authorization": "Bearer wrong"}).status_code == 401
            assert client.get("/v1/models", headers={"authorization": f"Bearer {SECRET}"}).status_code == 200
    finally:
        engine.close()
