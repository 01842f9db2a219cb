"""The OpenVoiceOS / Neon TTS plugin (server/ovos_tts.py), loaded as those hosts load it: by
ovos-plugin-manager's own loader, from this package's entry points; it speaks a sentence into the
host's file (a WAV of its true length, at the config's rate), refuses what it cannot say in one
line, and never writes through a link planted at the host's path."""

from __future__ import annotations

import pytest
import soundfile

from core import PocketTTSError
from core.portable.synthesis.options import MAX_TEXT
from tests.support.paths import TINY_CONFIG, VOICE_24K

ovos = pytest.importorskip("ovos_plugin_manager.tts", reason="the 'ovos' extra")
NAME = "ovos-tts-plugin-pocket-tts-numpy"


@pytest.fixture(scope="module")
def plugin():
    loaded = ovos.load_tts_plugin(NAME)
    assert loaded is not None and NAME in ovos.find_tts_plugins()
    return loaded(config={"lang": "en-US", "model": str(TINY_CONFIG), "voice": str(VOICE_24K), "sample_rate": 16000})


def test_the_host_loads_it_and_it_speaks_into_the_hosts_file(plugin, tmp_path) -> None:
    assert {"en", "fr", "de", "es", "it", "pt", "nl"} == type(plugin).available_languages
    out = tmp_path / "sentence.wav"
    assert plugin.get_tts("Hello there, from a voice assistant.", str(out)) == (str(out), None)
    info = soundfile.info(str(out))
    samples, rate = soundfile.read(str(out))
    assert info.format == "WAV" and rate == 16000 and info.frames == samples.shape[0] > 0 and abs(samples).max() > 0


def test_what_it_cannot_say_is_one_line(plugin, tmp_path) -> None:
    out = tmp_path / "x.wav"
    for sentence, lang, message in (
        ("   ", None, "the text to speak is empty"),
        ("x" * (MAX_TEXT + 1), None, f"longer than {MAX_TEXT} characters"),
        ("Hallo.", "xx-YY", "'xx-YY': no model speaks it"),
    ):
        with pytest.raises(PocketTTSError, match=message) as caught:
            plugin.get_tts(sentence, str(out), lang=lang)
        assert "\n" not in str(caught.value)
    assert not out.exists()


def test_a_link_at_the_hosts_path_is_replaced_not_written_through(plugin, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"the user's own file")
    link = tmp_path / "sentence.wav"
    link.symlink_to(elsewhere)
    plugin.get_tts("Hi there.", str(link))
    assert elsewhere.read_bytes() == b"the user's own file" and not link.is_symlink()
    assert soundfile.info(str(link)).frames > 0


def test_a_host_calling_from_several_threads_gets_each_sentence(plugin, tmp_path) -> None:
    """Hosts call from their own threads (a skill, the audio service): sentences at once each get
    their file whole, and the second language's model is loaded once."""
    import threading

    outs = [tmp_path / f"{n}.wav" for n in range(4)]
    failures = []

    def say(out) -> None:
        try:
            plugin.get_tts(f"Sentence for {out.stem}.", str(out))
        except Exception as e:  # noqa: BLE001 - collected, asserted below
            failures.append(e)

    threads = [threading.Thread(target=say, args=(out,)) for out in outs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == [] and all(soundfile.info(str(out)).frames > 0 for out in outs)
    assert len(plugin._models) == 1


class Bus:
    """The host's message bus, as the streaming callbacks use it: what they emit, by type."""

    def __init__(self) -> None:
        self.emitted = []

    def emit(self, message) -> None:
        self.emitted.append(message.msg_type)


class Playback:
    """ovos-audio's playback thread, as TTS.init uses it (the streaming path does not play through it)."""

    enclosure = "the host's"

    def set_bus(self, bus) -> None:
        pass

    def is_alive(self) -> bool:
        return True


COPY_STDIN = "import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open(sys.argv[1], 'wb'))"


def test_a_streaming_host_plays_each_chunk_as_it_is_made(tmp_path) -> None:
    """The host's own streaming path (StreamingTTS.generate_audio with its StreamingTTSCallbacks)
    pipes our WAV stream into its player (here a copy of stdin) and writes it to its file: both get
    the same bytes, a stream's header at the config's rate then whole 16-bit samples, and the
    stream comes in several pieces, the first of them the header alone."""
    import asyncio
    import sys

    from ovos_plugin_manager.templates.tts import StreamingTTSCallbacks

    config = {"lang": "en-US", "model": str(TINY_CONFIG), "voice": str(VOICE_24K), "sample_rate": 16000}
    plugin = ovos.load_tts_plugin(NAME)(config={**config, "enable_streaming": True})
    played, out, bus = tmp_path / "played.wav", tmp_path / "sentence.wav", Bus()
    plugin.init(bus, Playback(), StreamingTTSCallbacks(bus, play_args=[sys.executable, "-c", COPY_STDIN, str(played)]))
    asyncio.run(plugin.generate_audio("Hello there, from a streaming host.", str(out), play_streaming=True))
    data = out.read_bytes()
    assert played.read_bytes() == data
    assert data[:4] == b"RIFF" and int.from_bytes(data[24:28], "little") == 16000
    assert len(data) > 44 and (len(data) - 44) % 2 == 0
    assert "recognizer_loop:audio_output_start" in bus.emitted and "recognizer_loop:audio_output_end" in bus.emitted

    async def pieces():
        return [piece async for piece in plugin.stream_tts("Hello there, in pieces.")]

    streamed = asyncio.run(pieces())
    assert len(streamed[0]) == 44 and len(streamed) > 3 and all(len(piece) % 2 == 0 for piece in streamed)


def test_a_host_that_does_not_stream_needs_no_player(plugin, monkeypatch, tmp_path) -> None:
    """Without `enable_streaming`, the host's start asks for no audio player (the streaming
    callbacks would refuse a machine without ffplay, paplay or aplay)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    plugin.init(Bus(), Playback())
    assert getattr(plugin, "callbacks", None) is None
    out = tmp_path / "sentence.wav"
    plugin.get_tts("Still speaking.", str(out))
    assert soundfile.info(str(out)).frames > 0


def test_a_stream_the_host_drops_ends_its_generation(plugin) -> None:
    """A host that stops reading (its loop closed, the sentence interrupted) closes our stream;
    the next sentence streams whole."""
    import asyncio

    async def first_then_drop():
        stream = plugin.stream_tts("A long sentence that the host stops hearing after its first words, for sure.")
        header, first = await stream.__anext__(), await stream.__anext__()
        await stream.aclose()
        return header, first

    header, first = asyncio.run(first_then_drop())
    assert len(header) == 44 and len(first) > 0

    async def whole():
        return b"".join([piece async for piece in plugin.stream_tts("Next.")])

    assert len(asyncio.run(whole())) > 44
