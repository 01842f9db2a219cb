"""A non-editable install (what `pip install .` puts in site-packages) is complete: its server
serves the web UI and the API from the installed files alone, and its command (`pocket-tts-numpy`)
is the command line's and the server's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from e2e import harness
from scripts.build_site import build_wheel

from conftest import ROOT, TINY_CONFIG, VOICE_24K


def test_an_installed_server_serves_the_page(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)  # the site's wheel: pip wheel of a copy of the sources
    site = tmp_path / "site-packages"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run(
        [sys.executable, "-c", "import server.app; print(server.app.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site)
    with harness.server(["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)], cwd=tmp_path, env=env) as url:
        for name in ("index.html", "app.js", "protocol.js", "worklet.js", "style.css"):
            response = httpx.get(f"{url}/{name}")
            assert response.status_code == 200 and response.content == (ROOT / "web" / name).read_bytes(), name
        page = httpx.get(url + "/")
        assert page.status_code == 200 and page.content == (ROOT / "web" / "index.html").read_bytes()
        speech = httpx.post(url + "/tts", data={"text": "Hello."}, timeout=60)
        assert speech.status_code == 200 and speech.content[:4] == b"RIFF"


def test_the_installed_command_is_the_command_line_and_the_server(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    site = tmp_path / "site-packages"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)], check=True
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    speak = ["generate", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), "--text", "Hello.", "--seed", "3"]
    command = [sys.executable, str(site / "bin" / "pocket-tts-numpy")]
    for name, program in (("installed.wav", command), ("module.wav", [sys.executable, "-m", "core.cli"])):
        done = subprocess.run(program + speak + ["-o", name], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "installed.wav").read_bytes() == (tmp_path / "module.wav").read_bytes()
    served = subprocess.run(command + ["serve", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert served.returncode == 0 and "usage: pocket-tts-numpy serve" in served.stdout
    assert "--max-concurrent" in served.stdout
    bad = subprocess.run(command + ["serve", "--port", "nope"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid int value" in bad.stderr
