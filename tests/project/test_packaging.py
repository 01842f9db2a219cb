"""A non-editable install (what `pip install .` puts in site-packages) is complete: its server
serves the web UI and the API from the installed files alone, and its command (`pocket-tts-numpy`)
is the command line's, with the server's and the site builder's commands (entry points)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from core import native
from e2e import harness
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K

pytestmark = pytest.mark.slow  # each test installs the package into a fresh venv

WEB = ROOT / "web"  # the UI's files, which an install serves from its own copy (core/web/)
# What a source distribution holds, and a copy of the sources builds from.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
PACKAGES = ("core", "server", "browser", "web")


def copy_of_the_sources(into: Path, native: bool) -> Path:
    """The sources a wheel is built from, copied (setuptools would otherwise reuse what an earlier
    build left in build/); without setup.py where `native` is false: a pure-Python wheel, built in
    seconds, which runs on NumPy."""
    into.mkdir()
    for name in SOURCES if native else [name for name in SOURCES if name != "setup.py"]:
        shutil.copy(ROOT / name, into / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return into


def pure_wheel(out: Path) -> Path:
    """This package as `pip wheel` builds it without the compiled kernels."""
    source = copy_of_the_sources(out / "source", native=False)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source)], check=True
    )
    (wheel,) = out.glob("*-py3-none-any.whl")
    return wheel


def test_an_installed_server_serves_the_page(tmp_path: Path) -> None:
    wheel = pure_wheel(tmp_path)
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
        for name in sorted(path.name for path in WEB.iterdir()):  # every file of the UI, its manifest and icon
            response = httpx.get(f"{url}/{name}")
            assert response.status_code == 200 and response.content == (WEB / name).read_bytes(), name
        page = httpx.get(url + "/")
        assert page.status_code == 200 and page.content == (WEB / "index.html").read_bytes()
        speech = httpx.post(url + "/tts", data={"text": "Hello."}, timeout=60)
        assert speech.status_code == 200 and speech.content[:4] == b"RIFF"


def test_the_installed_command_is_the_command_line_and_the_server(tmp_path: Path) -> None:
    wheel = pure_wheel(tmp_path)
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
    # The commands of the parts above core, found as the installed package's entry points.
    listed = subprocess.run(command + ["--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and {"build-site", "serve", "mcp", "generate"} <= set(
        re.findall(r"[\w-]+", listed.stdout)
    )
    site = subprocess.run(command + ["build-site", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert site.returncode == 0 and "usage: pocket-tts-numpy build-site" in site.stdout
    served = subprocess.run(command + ["serve", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert served.returncode == 0 and "usage: pocket-tts-numpy serve" in served.stdout
    assert "--max-concurrent" in served.stdout
    bad = subprocess.run(command + ["serve", "--port", "nope"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid int value" in bad.stderr


def test_a_wheel_built_here_runs_its_kernels_in_a_fresh_environment_without_a_compiler(tmp_path: Path) -> None:
    """`python -m build` makes an sdist and a wheel whose kernels choose their instruction set when
    they load: installed in a new virtual environment, with no compiler anywhere on its PATH, the
    wheel runs the kernels this processor runs best, and the command line says so."""
    source = copy_of_the_sources(tmp_path / "source", native=True)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(source)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    assert "py3-none-any" not in wheel.name and sdist.name == "pocket_tts_numpy-0.1.0.tar.gz"
    with zipfile.ZipFile(wheel) as contents:  # only the product's names at the top level of site-packages
        top = {name.split("/")[0] for name in contents.namelist()}
    assert top == {"core", "server", "pocket_tts_numpy-0.1.0.dist-info"}, top
    with zipfile.ZipFile(wheel) as contents:  # browser/ as core.browser, web/ as core/web/ (package data)
        names = set(contents.namelist())
    assert {"core/web/index.html", "core/browser/engine.py", "core/browser/worker.js"} <= names
    assert {"core/browser/site/patches/numpy.patch", "core/browser/site/compile_page.py"} <= names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[cli]"],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    no_compiler = {"PATH": str(venv / "bin") + ":/nonexistent", "HOME": str(tmp_path)}
    best = native.instruction_sets()[0]
    done = subprocess.run(
        [str(python), "-m", "core.cli", "generate", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
        + ["--text", "Hello.", "--max-frames", "2", "-o", str(tmp_path / "out.wav")],
        cwd=tmp_path,
        env=no_compiler,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"(on this processor's {best} kernels)" in done.stderr.splitlines()[0]
    assert (tmp_path / "out.wav").stat().st_size == 44 + 2 * 2 * 1920
