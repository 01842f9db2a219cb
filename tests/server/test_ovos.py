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
