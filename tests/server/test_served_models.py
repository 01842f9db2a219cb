"""Several languages in one server (server/served_models.py, --also-model): a request picks a model
by name or language on every front; each other model loads on its first request (once, however
many ask at once) or at start (--preload); models whose Mimi codec is the same share its arrays
(checked by digest: a different codec is not shared); a memory budget lets go of the model used
least recently; streams of several models run side by side in the one scheduler, each the audio
its model makes alone. The models are the tiny fixtures copied under language names: tiny_german
is tiny_lsd's weights (the default's: its codec is shared), tiny_french tiny_gqa's (not)."""

from __future__ import annotations

import io
import json
import re
import shutil
import threading
from pathlib import Path
from typing import Callable, Dict, List

import httpx
import numpy as np
import pytest
import soundfile
from websockets.sync.client import connect
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from core import TTSModel
from core.portable.audio.pcm import pcm16
from core.portable.synthesis.options import GenerationOptions
from server.engine import ServerEngine, load_engine
from server.served_models import held_bytes
from server.settings import Settings
from tests.support.checks import pcm_close
from tests.support.paths import TINY_CONFIG, TINY_DIR, TOKENIZERS, VOICE_24K
from tests.support.serving import GUARD, as_served, serving, wyoming_serving
from tests.support.speech_socket import said

TEXT = "Bonjour, a sentence in every language."
OPTIONS = {"temperature": 0.0, "seed": 1}


def _copied(folder: Path, fixture: str, name: str) -> str:
    """The tiny fixture `fixture` under the folder name `name` (its language), its tokenizer found."""
    target = folder / name
    shutil.copytree(TINY_DIR / fixture, target)
    config = (target / "config.yaml").read_text()
    (target / "config.yaml").write_text(
        re.sub(r"tokenizer_path: \.\./\.\./tokenizers/", f"tokenizer_path: {TOKENIZERS}/", config)
    )
    return str(target / "config.yaml")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Dict[str, str]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "tiny_french": _copied(folder, "tiny_gqa", "tiny_french"),
        "tiny_german": _copied(folder, "tiny_lsd", "tiny_german"),
    }


class Counting:
    """TTSModel.load, counting each source's loads."""

    def __init__(self) -> None:
        self.loads: List[str] = []

    def __call__(self, source: str) -> TTSModel:
        self.loads.append(source)
        return TTSModel.load(source)


def engine_of(sources: Dict[str, str], load: Callable[[str], TTSModel] = TTSModel.load, **more) -> ServerEngine:
    model = TTSModel.load(str(TINY_CONFIG))
    return ServerEngine(model, str(VOICE_24K), 4, others=list(sources.values()), load=load, **more)


def alone(source: str, text: str = TEXT) -> np.ndarray:
    """The 16-bit samples a model makes of `text` by itself, with the server's default voice, made
    as the server makes them."""
    with as_served():
        pcm = TTSModel.load(source).generate(text, str(VOICE_24K), GenerationOptions(**OPTIONS))
    return np.frombuffer(pcm16(pcm), "<i2")


def wav_samples(content: bytes) -> np.ndarray:
    samples, _ = soundfile.read(io.BytesIO(content), dtype="int16")
    return samples


def test_a_request_picks_a_model_by_name_or_language_each_loaded_on_its_first(sources) -> None:
    load = Counting()
    engine = engine_of(sources, load)
    try:
        with serving(engine) as url:
            listed = httpx.get(url + "/health", timeout=GUARD).json()["models"]
            assert [(m["name"], m["language"], m["loaded"], m["default"]) for m in listed] == [
                ("tiny_lsd", "english", True, True),
                ("tiny_french", "french", False, False),
                ("tiny_german", "german", False, False),
            ]
            assert load.loads == []  # none loads before a request asks for it
            french = alone(sources["tiny_french"])
            for picked in ("fr", "fr-FR", "french", "tiny_french"):
                answer = httpx.post(url + "/generate", json={"text": TEXT, "model": picked, **OPTIONS}, timeout=GUARD)
                assert answer.status_code == 200, answer.text
                assert np.array_equal(wav_samples(answer.content), french), picked
            default = httpx.post(url + "/generate", json={"text": TEXT, **OPTIONS}, timeout=GUARD)
            assert np.array_equal(wav_samples(default.content), alone(str(TINY_CONFIG)))
            assert load.loads == [sources["tiny_french"]]
            cards = {card["id"]: card for card in httpx.get(url + "/v1/models", timeout=GUARD).json()["data"]}
            assert cards["tiny_french"]["loaded"] and cards["tiny_french"]["parameters"] > 0
            assert not cards["tiny_german"]["loaded"] and cards["tiny_german"]["parameters"] is None
            assert cards["tts-1"]["language"] == "english" and cards["tiny_german"]["object"] == "model"
            unknown = httpx.post(url + "/generate", json={"text": TEXT, "model": "xx"}, timeout=GUARD)
            assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_model"
            assert "tiny_french" in unknown.json()["error"]["message"]
            for hostile in ("x" * 10000, 5, ["fr"]):
                refused = httpx.post(url + "/generate", json={"text": TEXT, "model": hostile}, timeout=GUARD)
                assert refused.status_code == 400 and len(refused.json()["error"]["message"]) < 300, hostile
        assert engine.active == 0
    finally:
        engine.close()


def test_models_with_the_same_codec_share_it_and_others_do_not(sources) -> None:
    engine = engine_of(sources)
    try:
        default = engine.model.params["mimi"]
        german, french = engine.models.get("de"), engine.models.get("fr")
        assert german.model.params["mimi"] is default  # tiny_lsd's weights: the same codec
        assert french.model.params["mimi"] is not default  # tiny_gqa's: checked, not shared
        one = held_bytes([engine.model])
        assert held_bytes([engine.model, german.model]) < 2 * one  # german adds its flow LM alone
    finally:
        engine.close()


def test_the_first_requests_of_a_model_at_once_load_it_once(sources) -> None:
    load = Counting()
    engine = engine_of(sources, load)
    try:
        got, threads = [], [threading.Thread(target=lambda: got.append(engine.models.get("fr"))) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
        assert load.loads == [sources["tiny_french"]] and len({id(served) for served in got}) == 1
    finally:
        engine.close()


def test_a_memory_budget_lets_go_of_the_model_used_least_recently(sources) -> None:
    engine = engine_of(sources)
    try:
        pairs = [held_bytes([engine.model, engine.models.get(language).model]) for language in ("fr", "de")]
        budget = max(pairs) + 1  # the default and either other, not both
        engine.close()
        load = Counting()
        engine = engine_of(sources, load, memory_budget=budget)
        engine.models.get("fr")
        engine.models.get("de")  # over the budget: french, used least recently, is let go
        loaded = {listed.name: listed.loaded for listed in engine.models.listed()}
        assert loaded == {"tiny_lsd": True, "tiny_french": False, "tiny_german": True}
        assert engine.models.held_bytes() <= budget
        with serving(engine) as url:
            answer = httpx.post(url + "/generate", json={"text": TEXT, "model": "fr", **OPTIONS}, timeout=GUARD)
            assert np.array_equal(wav_samples(answer.content), alone(sources["tiny_french"]))  # loaded again
        assert load.loads == [sources["tiny_french"], sources["tiny_german"], sources["tiny_french"]]
        assert engine.models.loaded("tiny_german") is None
    finally:
        engine.close()


def test_streams_of_three_models_at_once_are_each_their_models_audio(sources) -> None:
    """One scheduler steps each model's generations together and decodes together the frames of
    models that share a codec: english and german (one codec) and french, side by side."""
    engine = engine_of(sources)
    try:
        with serving(engine) as url:
            results: Dict[str, bytes] = {}

            def ask(model: str) -> None:
                body = {"text": TEXT, "model": model, **OPTIONS}
                results[model] = httpx.post(url + "/stream", json=body, timeout=GUARD).content

            threads = [threading.Thread(target=ask, args=(m,)) for m in ("en", "fr", "de", "fr")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(GUARD)
        for model, source in (("en", str(TINY_CONFIG)), ("fr", sources["tiny_french"]), ("de", sources["tiny_german"])):
            # Batched, a product's rounding differs from one stream's: the same audio to a sample step.
            assert pcm_close(results[model], alone(source).tobytes()), model
        assert engine.active == 0
    finally:
        engine.close()


def test_every_front_routes_by_its_own_field(sources) -> None:
    """OpenAI's `model` (a served name or a language; its own names are the default), the
    WebSocket's start `model`, LiveKit's config `language`, Wyoming's voice language and the
    describe that lists each model's voice."""
    engine = engine_of(sources)
    french = alone(sources["tiny_french"]).tobytes()
    try:
        with serving(engine) as url:
            speech = {"input": TEXT, "voice": "alloy", "response_format": "pcm"}
            picked = httpx.post(url + "/v1/audio/speech", json={**speech, "model": "fr"}, timeout=GUARD)
            assert picked.status_code == 200 and len(picked.content) == len(french)
            theirs = httpx.post(url + "/v1/audio/speech", json={**speech, "model": "tts-1"}, timeout=GUARD)
            assert theirs.status_code == 200
            ws = url.replace("http", "ws")
            assert said(url, {"model": "french", **OPTIONS}, TEXT) == french
            with connect(ws + "/tts/ws", open_timeout=GUARD) as socket:
                socket.send(json.dumps({"type": "config", "data": {"language": "es"}}))
                refused = json.loads(socket.recv(GUARD))
                assert refused["type"] == "error" and "en, fr, de" in json.dumps(refused)

        async def wyoming(port: int):
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(Describe().event())
                info = Info.from_event(await client.read_event())
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(language="fr")).event())
                chunks = b""
                while True:
                    event = await client.read_event()
                    if event.type == "audio-chunk":
                        chunks += event.payload
                    if event.type in ("audio-stop", "error"):
                        return info, event.type, chunks

        info, last, chunks = wyoming_serving(engine, wyoming, GenerationOptions(**OPTIONS), GUARD)
        languages = {voice.name: voice.languages for voice in info.tts[0].voices}
        assert languages["tiny_french"] == ["fr"] and languages["tiny_german"] == ["de"]
        assert last == "audio-stop" and chunks == french
        assert engine.active == 0
    finally:
        engine.close()


def test_the_settings_serve_more_models_and_preload_them(sources) -> None:
    settings = Settings(model=str(TINY_CONFIG), voice=str(VOICE_24K), also_models=tuple(sources.values()), preload=True)
    engine = load_engine(settings)
    try:
        assert all(listed.loaded for listed in engine.models.listed())
    finally:
        engine.close()
    for wrong, message in (
        ({"preload": True}, "--preload goes with --also-model"),
        ({"memory_budget": 0}, "--memory-budget"),
    ):
        with pytest.raises(ValueError, match=message):
            Settings(model=str(TINY_CONFIG), **wrong).check()


def test_a_model_that_cannot_load_is_one_line_and_the_others_still_speak(sources, tmp_path) -> None:
    engine = ServerEngine(
        TTSModel.load(str(TINY_CONFIG)), str(VOICE_24K), 4, others=[str(tmp_path / "tiny_italian" / "config.yaml")]
    )
    try:
        with serving(engine) as url:
            broken = httpx.post(url + "/generate", json={"text": TEXT, "model": "it"}, timeout=GUARD)
            assert broken.status_code == 503 and broken.json()["error"]["code"] == "model_unavailable"
            assert "\n" not in broken.json()["error"]["message"]
            assert httpx.post(url + "/generate", json={"text": TEXT}, timeout=GUARD).status_code == 200
        assert engine.active == 0
    finally:
        engine.close()


def test_hostile_picks_leave_no_slot_connection_or_model_behind(sources) -> None:
    """A WebSocket start naming no served model, or too many pronunciations, is refused and closed;
    eight requests at once for models the budget cannot hold together all speak; afterwards no
    slot or connection is held, and the budget holds."""
    engine = engine_of(sources)
    pairs = [held_bytes([engine.model, engine.models.get(language).model]) for language in ("fr", "de")]
    engine.close()
    engine = engine_of(sources, memory_budget=max(pairs) + 1)
    try:
        with serving(engine) as url:
            ws = url.replace("http", "ws") + "/v1/audio/speech/stream"
            for start, code in (
                ({"model": "klingon"}, "unknown_model"),
                ({"pronunciations": {f"w{n}": "x" for n in range(1001)}}, "invalid_value"),
            ):
                with connect(ws, open_timeout=GUARD) as socket:
                    socket.send(json.dumps({"type": "start", **start}))
                    refused = json.loads(socket.recv(GUARD))
                    assert refused["type"] == "error" and refused["error"]["code"] == code, refused
            answers: List[int] = []

            def ask(model: str) -> None:
                body = {"text": "Hi.", "model": model, **OPTIONS}
                answers.append(httpx.post(url + "/generate", json=body, timeout=GUARD).status_code)

            threads = [threading.Thread(target=ask, args=(m,)) for m in ("fr", "de") * 4]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(GUARD)
            assert len(answers) == 8 and set(answers) <= {200, 503} and 200 in answers  # busy past 4 slots, no fault
        assert engine.active == 0 and engine.connections.open == 0
        assert engine.models.held_bytes() <= max(pairs) + 1
    finally:
        engine.close()
