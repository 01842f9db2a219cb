"""Audio out in the formats users ask for, at the rates they ask for: raw 16-bit PCM and the
telephone codecs G.711 mu-law and A-law (which stream), WAV (a stream's header, or a whole file's),
and the compressed formats soundfile's libsndfile can write (FLAC, MP3, Ogg/Opus), whole files; at
the model's rate or any of RATES, resampled with soxr, each stream keeping its resampler's state
(`Output`). A whole file (`WholeFile`) is encoded a chunk at a time too, so what it holds is the
file so far, never the samples. The server's answers and the command line's files are written
here. AAC is not among them: libsndfile has no AAC encoder, and an encoder of our own or ffmpeg's
is not worth its weight for one of OpenAI's six. And audio out on this machine's own speakers
(`played`: `generate --play`), through sounddevice and PortAudio."""

from __future__ import annotations

import io
import os
from typing import Any, Iterator, List, Optional

import numpy as np

from .portable.audio.loudness import leveled_whole
from .portable.audio.pcm import pcm16, wav_header
from .portable.errors import PocketTTSError

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mulaw": "audio/basic",
    "alaw": "audio/x-alaw-basic",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
# soundfile (container, subtype) of the compressed formats.
_SOUNDFILE = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}
# A file's extension -> the format written to it.
EXTENSIONS = {
    ".wav": "wav",
    ".flac": "flac",
    ".mp3": "mp3",
    ".ogg": "opus",
    ".opus": "opus",
    ".pcm": "pcm",
    ".raw": "pcm",
    ".ulaw": "mulaw",
    ".mulaw": "mulaw",
    ".alaw": "alaw",
}
FILE_FORMATS = ("wav", "flac", "mp3", "opus", "pcm", "mulaw", "alaw")
STREAMED = ("pcm", "mulaw", "alaw")  # sent as they are made, a chunk at a time
# The rates audio may be asked at (telephone, wideband, the model's, CD, studio).
RATES = (8000, 16000, 22050, 24000, 44100, 48000)
# Those of RATES that Opus encodes at (it has no 22.05 or 44.1 kHz).
OPUS_RATES = (8000, 16000, 24000, 48000)
# What a client is told each streamed format is (the X-Sample-Format header).
SAMPLE_FORMATS = {"pcm": "s16le", "mulaw": "mulaw", "alaw": "alaw"}


def available(fmt: str) -> bool:
    """Whether this machine can write `fmt` (MP3 needs a libsndfile built with LAME)."""
    if fmt in ("wav",) + STREAMED:
        return True
    import soundfile

    container, subtype = _SOUNDFILE[fmt]
    return container in soundfile.available_formats() and subtype in soundfile.available_subtypes(container)


def writable() -> List[str]:
    """The formats this machine writes."""
    return [fmt for fmt in FILE_FORMATS if available(fmt)]


def format_of(path: Optional[str], fmt: Optional[str]) -> str:
    """The format of an output file: `fmt` where given, else its extension's (a name without one,
    stdout and a device get a WAV); a PocketTTSError naming what can be written where neither can be."""
    extension = os.path.splitext(path or "")[1].lower()
    if fmt is not None and path not in (None, "-") and EXTENSIONS.get(extension, fmt) != fmt:
        raise PocketTTSError(
            f"{path} is named {extension} but --format is {fmt}: name it {_extension_of(fmt)}, or leave --format out"
        )
    if fmt is None:
        if path in (None, "-") or not extension:
            fmt = "wav"
        elif extension not in EXTENSIONS:
            raise PocketTTSError(
                f"cannot write {extension} files ({path}): name a {', '.join(sorted(EXTENSIONS))} file, "
                "or choose one with --format"
            )
        else:
            fmt = EXTENSIONS[extension]
    if fmt not in FILE_FORMATS:
        raise PocketTTSError(f"unknown format {fmt!r}: use one of {', '.join(FILE_FORMATS)}")
    if not available(fmt):
        raise PocketTTSError(
            f"this machine's libsndfile cannot write {fmt} (MP3 needs libsndfile 1.1 or later, built with LAME): "
            f"use one of {', '.join(writable())}"
        )
    return fmt


def _extension_of(fmt: str) -> str:
    """The first extension that names `fmt`."""
    return next(extension for extension, named in EXTENSIONS.items() if named == fmt)


def check_rate(rate: int) -> int:
    """`rate` where it is one of RATES; a PocketTTSError naming them otherwise."""
    if rate not in RATES:
        raise PocketTTSError(f"sample rate {rate} is not offered: use one of {', '.join(map(str, RATES))}")
    return rate


def mulaw(pcm: np.ndarray) -> bytes:
    """G.711 mu-law of float32 samples in [-1, 1] (as 16-bit samples first: pcm16's rounding), one
    byte each (ITU-T G.711, as the reference g711.c computes it)."""
    x = np.frombuffer(pcm16(pcm), "<i2").astype(np.int32) >> 2  # [n] 14-bit
    mask = np.where(x < 0, 0x7F, 0xFF)
    x = np.minimum(np.abs(x), 8159) + 0x21
    segment = np.searchsorted(_MULAW_ENDS, x)  # the first end >= x; 8 past the last (the loudest)
    value = np.where(segment >= 8, 0x7F, (segment << 4) | ((x >> np.minimum(segment + 1, 8)) & 0xF))
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


def alaw(pcm: np.ndarray) -> bytes:
    """G.711 A-law of float32 samples in [-1, 1] (as 16-bit samples first), one byte each."""
    x = np.frombuffer(pcm16(pcm), "<i2").astype(np.int32) >> 3  # [n] 13-bit
    mask = np.where(x >= 0, 0xD5, 0x55)
    x = np.where(x >= 0, x, -x - 1)
    segment = np.searchsorted(_ALAW_ENDS, x)
    mantissa = np.where(segment < 2, x >> 1, x >> np.maximum(segment, 1)) & 0xF
    value = np.where(segment >= 8, 0x7F, (segment << 4) | mantissa)
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


_MULAW_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ALAW_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])
_CODECS = {"pcm": pcm16, "mulaw": mulaw, "alaw": alaw}


def encode(pcm: np.ndarray, fmt: str) -> bytes:
    """Samples as `fmt` (one of STREAMED, or "wav") holds them: 16-bit PCM (a WAV's too), or G.711
    a byte each."""
    return _CODECS["pcm" if fmt == "wav" else fmt](pcm)


class Output:
    """One stream's audio out: in `fmt` (a streamed one: STREAMED, or "wav", a header then 16-bit
    PCM) at `rate`, from chunks at the model's `source_rate`. The resampler's state goes from chunk
    to chunk, so the chunks join exactly as the whole signal resampled at once; `end` gives what
    the resampler still holds."""

    def __init__(self, fmt: str, source_rate: int, rate: Optional[int] = None):
        self.fmt = fmt
        self.source_rate = source_rate
        self.rate = check_rate(rate) if rate is not None else source_rate
        self._resampler = None
        if self.rate != source_rate:
            import soxr

            self._resampler = soxr.ResampleStream(source_rate, self.rate, 1, dtype="float32", quality="HQ")

    def samples(self, count: int) -> int:
        """The samples out for `count` samples in (a stream's whole length, once it has ended)."""
        return count if self._resampler is None else round(count * self.rate / self.source_rate)

    def samples_in(self, data: bytes) -> int:
        """The samples of what `chunk` or `end` gave (16-bit PCM, a WAV's too: 2 bytes each; G.711: 1)."""
        return len(data) // (1 if self.fmt in ("mulaw", "alaw") else 2)

    def header(self) -> bytes:
        """What comes first: a WAV stream's header (its length unknown), else nothing."""
        return wav_header(self.rate) if self.fmt == "wav" else b""

    def chunk(self, pcm: np.ndarray) -> bytes:
        return encode(self._resampled(pcm, last=False), self.fmt)

    def end(self) -> bytes:
        return encode(self._resampled(np.zeros(0, np.float32), last=True), self.fmt)

    def _resampled(self, pcm: np.ndarray, last: bool) -> np.ndarray:
        if self._resampler is None:
            return pcm
        return self._resampler.resample_chunk(np.asarray(pcm, np.float32), last=last)


class WholeFile:
    """A whole file in `fmt` (one of FILE_FORMATS) at `rate` (None: `source_rate`, the model's),
    of chunks at `source_rate` given one at a time (`add`): each is resampled (the resampler's
    state going from chunk to chunk, as a stream's), encoded and appended as it comes, so what is
    held is the file so far and a chunk, never the samples. Its bytes are those of the whole signal
    resampled and encoded at once (but for an Ogg stream's serial number, which libsndfile draws at
    random). Opus at a rate it has not is a PocketTTSError, before any work. With a `loudness`
    (LUFS), the chunks are held until `end`, which brings the whole to it by its own measure
    (audio.loudness.leveled_whole): a file waits for its gain, where a stream takes the voice's."""

    def __init__(self, fmt: str, source_rate: int, rate: Optional[int] = None, loudness: Optional[float] = None):
        self.fmt = fmt
        self.loudness = loudness
        self._held: List[np.ndarray] = []  # the chunks, until `end`, where a loudness is asked
        self._output = Output(fmt if fmt in STREAMED + ("wav",) else "pcm", source_rate, rate)
        self.rate = self._output.rate
        if fmt == "opus" and self.rate not in OPUS_RATES:
            rates = ", ".join(map(str, OPUS_RATES))
            raise PocketTTSError(f"opus is not written at {self.rate} Hz: use one of {rates}")
        self._file = io.BytesIO()
        self._compressed = None
        if fmt in _SOUNDFILE:
            import soundfile

            container, subtype = _SOUNDFILE[fmt]
            self._compressed = soundfile.SoundFile(self._file, "w", self.rate, 1, subtype, format=container)
        else:
            self._file.write(self._output.header())  # a WAV's says "as long as it gets" until `end`

    def add(self, pcm: np.ndarray) -> None:
        if self.loudness is not None:
            self._held.append(pcm)
        else:
            self._append(self._output.chunk(pcm))

    def end(self) -> bytes:
        """The whole file, what the resampler still held last and a WAV's header now saying its
        length; the one copy there is of it (this file takes no more chunks)."""
        if self.loudness is not None:
            for pcm in leveled_whole(self._held, self._output.source_rate, self.loudness):
                self._append(self._output.chunk(pcm))
            self._held = []
        self._append(self._output.end())
        if self._compressed is not None:
            self._compressed.close()
        elif self.fmt == "wav":
            length = self._file.tell() - len(self._output.header())
            self._file.seek(0)
            self._file.write(wav_header(self.rate, length))
        data = self._file.getvalue()  # the buffer itself, not a copy of it
        self._file.close()
        return data

    def _append(self, data: bytes) -> None:
        if self._compressed is not None:
            self._compressed.write(np.frombuffer(data, "<i2"))  # [n] the WAV's samples: FLAC holds exactly them
        else:
            self._file.write(data)


PLAY_HINT = "pip install 'pocket-tts-numpy[play]', and the PortAudio library (Debian: apt install libportaudio2)"


def speakers() -> Any:
    """The sounddevice module where this machine's default output device can play; a
    PocketTTSError saying why not otherwise (no sounddevice, no PortAudio, no output device), to be
    asked before any model is loaded."""
    try:
        import sounddevice
    except ModuleNotFoundError:
        raise PocketTTSError(f"--play needs sounddevice: {PLAY_HINT}") from None
    except OSError as e:  # sounddevice is there, PortAudio is not
        raise PocketTTSError(f"--play needs the PortAudio library ({e}): {PLAY_HINT}") from None
    try:
        sounddevice.query_devices(kind="output")
    except Exception as e:  # PortAudio's own errors, or no default output device (a ValueError)
        raise PocketTTSError(f"--play: no audio output device to play on ({e})") from None
    return sounddevice


def played(chunks: Iterator[np.ndarray], sample_rate: int) -> Iterator[np.ndarray]:
    """The chunks, each also written to the default output device as it comes (waiting while the
    device's buffer is full: the stream is made no faster than it is heard); ends once the last has
    been heard."""
    sounddevice = speakers()
    with sounddevice.OutputStream(samplerate=sample_rate, channels=1, dtype="float32") as stream:
        for chunk in chunks:
            stream.write(np.ascontiguousarray(chunk, dtype=np.float32).reshape(-1, 1))
            yield chunk
