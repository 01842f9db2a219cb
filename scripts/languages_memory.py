"""Memory of three languages served by one process (--also-model) against three processes, one
language each, on this machine: each server started, every language asked for one sentence, then
each process's resident memory read (VmRSS, Linux).

    .venv/bin/python -m scripts.languages_memory

Needs build/reference (scripts/test.sh): english's architecture with its random weights, copied
(the weights linked, not copied) under the names french and german, as a catalog's language models
are the same architecture; their Mimi codecs are therefore equal, which the server checks and
shares (server/served_models.py), while each keeps its own flow LM. Written into
docs/measurements.md#languages-in-one-process.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import httpx

from core.files import write_atomically
from e2e import measured
from e2e.harness import free_port
from scripts.bundles import OUT, REFERENCE

LANGUAGES = ("english", "french", "german")
TEXT = "One sentence, to load what a request needs."


def models() -> List[str]:
    """Config paths: english's fixture, and its copies under the other languages' names."""
    paths = [str(REFERENCE / "english" / "config.yaml")]
    for language in LANGUAGES[1:]:
        folder = OUT / "languages" / language
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("model.safetensors", "voice_state.safetensors"):
            target = folder / name
            if not target.exists():
                target.symlink_to((REFERENCE / "english" / name).resolve())
        config = (REFERENCE / "english" / "config.yaml").read_text()  # its relative paths made absolute
        write_atomically(str(folder / "config.yaml"), re.sub(r"(tokenizer_path: )(\S+)", _absolute, config).encode())
        paths.append(str(folder / "config.yaml"))
    return paths


def _absolute(match: re.Match[str]) -> str:
    return match.group(1) + str((REFERENCE / "english" / match.group(2)).resolve())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def served(configs: List[str], languages: List[str]) -> float:
    """A server of `configs` (the first the default), each of `languages` asked once: its RSS in MB."""
    port = free_port()
    voice = str(REFERENCE / "english" / "voice_state.safetensors")
    command = [sys.executable, "-m", "server", "--port", str(port), "--model", configs[0], "--voice", voice]
    for config in configs[1:]:
        command += ["--also-model", config]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start")
            time.sleep(0.2)
        for language in languages:
            body = {"text": TEXT, "model": language, "max_frames": 10}
            answer = httpx.post(url + "/generate", json=body, timeout=300)
            if answer.status_code != 200:
                raise RuntimeError(f"{language}: {answer.text}")
        return rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(30)


def main() -> int:
    configs = models()
    print(f"on {measured.machine()}", file=sys.stderr)
    print("  one process, three languages", file=sys.stderr)
    together = served(configs, list(LANGUAGES))
    apart = []
    for config, language in zip(configs, LANGUAGES):
        print(f"  one process, {language}", file=sys.stderr)
        apart.append(served([config], [language]))
    table = "\n".join(
        [
            "| servers | resident memory (MB) |",
            "|---|---|",
            f"| one process: english, french, german (`--also-model` twice) | {together:.0f} |",
            *(f"| one process: {language} alone | {mb:.0f} |" for language, mb in zip(LANGUAGES, apart)),
            f"| three processes, one language each (sum) | {sum(apart):.0f} |",
        ]
    )
    print(table)
    measured.record("measurements.md", "languages in one process", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
