"""The Python half of the in-browser engine, run by worker.js inside Pyodide.

A worker has one role: "flow" (the flow LM and voice cloning: text to latent frames), "decoder"
(the Mimi decoder: frames to audio at the generation's speed), or "both". It keeps its part of one
model warm (and, for the flow side, the voices), and does one frame per call, so that the worker
hands each frame or chunk on as soon as it exists and can stop between frames.

The flow side speaks a queue of generations, one after another: a request's text is one
generation; a text stream (text arriving in pieces: an LLM's reply, a user typing) adds one per
segment as each is complete (core.portable.synthesis.text_stream.TextStream). Each generation starts with a
segment event (its text, the text it is read as, its speed), then its frames. Text and flags cross
the JS boundary as JSON strings, which every Pyodide version handles the same way; numbers as
float32 arrays in Python's memory, never JSON: the flow side's frame floats (a NumPy array the
worker reads through its buffer) and the decoder side's (written by the worker where
`frame_room` says) and the audio, and a recording as a file in Pyodide's file system.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
from typing import Any, Deque, Dict, Iterator, List, Optional

import numpy as np

from core.portable.errors import PocketTTSError
from core.portable.model import Runtime, TTSModel
from core.portable.network import kernels
from core.portable.synthesis.decoding import FrameDecoder
from core.portable.synthesis.generation import Frame, alone
from core.portable.synthesis.options import GenerationOptions
from core.portable.synthesis.text_stream import Segment, TextStream
from core.portable.synthesis.timestamps import WordStart
from core.portable.text.words import ChunkWords, Unit, Word
from core.portable.voice_registry import VoiceRegistry
from core.portable.weights import params, sources

# The parts each role loads at boot. Voice cloning (the Mimi encoder and the speaker projection) is
# not among them: the flow side adds it when the first voice is uploaded (`add_cloning`), so that a
# visit that never uploads one neither downloads nor loads it.
ROLES = {
    "flow": (params.FLOW_LM,),
    "decoder": (params.DECODER,),
    "both": (params.FLOW_LM, params.DECODER),
}


def linked_kernels() -> kernels.CompiledKernels:
    """The WebAssembly kernels the worker linked and registered as the JS module `pocket_kernels`
    (an ImportError where it linked none, an error of the binding where one is missing): the
    backend of the worker's model (runtime)."""
    import pocket_kernels  # a JS module: the kernels' exports, on Pyodide's own memory

    functions = {name: getattr(pocket_kernels, name) for name in kernels.NAMES}
    return kernels.CompiledKernels(functions, "WebAssembly SIMD", "WebAssembly SIMD kernels with NumPy")


def runtime() -> Runtime:
    """The worker's runtime: its model's products on the kernels it linked (NumPy where it linked
    none), on the worker's one thread, nothing downloaded (the site's files are the worker's to fetch)."""
    try:
        return Runtime(backend=linked_kernels())
    except ImportError:
        return Runtime()


# The weights files the worker copied straight into this Python's memory (path -> their bytes), for
# the next BrowserEngine: one copy of each downloaded file, where writing it to the file system and
# reading it back made two, and kept the file system's copy (~100 MB for english) for good.
_reserved: Dict[str, np.ndarray] = {}


def reserve(path: str, size: int) -> int:
    """Room for the `size` bytes of the file at `path` -> its address in the WebAssembly memory,
    where the worker writes them (the BrowserEngine made next reads them there)."""
    _reserved[path] = np.empty(size, np.uint8)
    return int(_reserved[path].__array_interface__["data"][0])


class BrowserEngine:
    def __init__(self, bundle_dir: str, role: str):
        self.role = role
        files = sources.resolve(bundle_dir)
        in_memory = {path: _reserved.pop(path) for path in list(_reserved)}
        self.model = TTSModel.from_files(files, parts=ROLES[role], in_memory=in_memory, runtime=runtime())
        speaks = params.FLOW_LM in self.model.parts
        # Whether the flow side can clone, from the bundle's manifest (the part itself comes later).
        self.can_clone = bool(speaks and files.voice_cloning and params.VOICE_CLONING in files.weights)
        self.voices = VoiceRegistry(self.model) if speaks else None  # the default voice prepared now
        if speaks:  # normalization's rules are compiled on first use: now, not in the first request
            self.model.spoken("")
        # The flow side: what is left to say (each generation with its text), the frames of the one
        # being said, and the text stream that adds to the queue (None for a single request).
        self.queue: Deque[Segment] = collections.deque()
        self.frames: Optional[Iterator[Frame]] = None
        self.text: Optional[TextStream] = None
        # The floats of the frame next_frame described last (flow side), or of the frame the worker
        # writes for `decode` (decoder side): its latent, then its word scores.
        self.numbers = np.zeros(0, np.float32)
        # The decoder side: the decoder of the generation being decoded, and its chunk's units.
        self.decoder: Optional[FrameDecoder] = None
        self.chunk_words: Optional[ChunkWords] = None

    def info(self) -> str:
        return json.dumps(
            {
                "name": self.model.name,
                "role": self.role,
                "sample_rate": self.model.sample_rate,
                "frame_size": self.model.frame_size,
                "language": self.model.language,
                "voices": self.voices.names() if self.voices else [],
                "default_voice": self.model.default_voice,
                "can_clone_voices": self.can_clone,
                "word_timestamps": self.model.config.timestamp_heads is not None,
                "backend": self.model.runtime.backend.name,
            }
        )

    def check_kernels(self) -> str:
        """JSON of browser/kernel_check.py's report on the kernels this worker runs, or {error}."""
        backend = self.model.runtime.backend
        if not isinstance(backend, kernels.CompiledKernels):
            return json.dumps({"error": f"no kernels: the products run on {backend.name}"})
        from core.browser import kernel_check

        return json.dumps(kernel_check.run(backend))

    def normalize(self, text: str) -> str:
        """JSON {text}: `text` as the model will speak it with normalization on (or {error})."""
        return _result("text", lambda: self.model.spoken(text))

    # The flow side

    def add_cloning(self) -> str:
        """Load the voice-cloning part, whose file the worker has just written to the bundle folder
        -> JSON {parts} or {error}."""
        return _result("parts", lambda: self.model.add_parts([params.VOICE_CLONING]) or list(self.model.parts))

    def add_voice(self, samples_path: str, sample_rate: int) -> str:
        """A recording the page decoded (float32 samples in a file) -> JSON {voice} or {error}."""
        return _result("voice", lambda: self.voices.add(np.fromfile(samples_path, dtype="<f4"), int(sample_rate)))

    def start(self, text: str, voice: str, options_json: str, words: bool = False) -> str:
        """Begin saying `text` (its words timed if `words`) -> JSON {started} or {error} (bad input
        fails now, before any audio)."""

        def begin() -> bool:
            options = GenerationOptions.of(json.loads(options_json))
            first_word = 0 if words else None
            generation = self.model.generation(text, self.voices.get(voice or None), options, first_word=first_word)
            self.cancel()
            self.queue.append(Segment(text, self.model.spoken(text, options.normalize), generation))
            return True

        return _result("started", begin)

    def open_stream(self, voice: str, options_json: str, words: bool = False) -> str:
        """Begin a text stream (its words timed if `words`): nothing to say until `push` or
        `flush` completes a segment -> JSON {started} or {error} (a bad voice or option fails now)."""

        def begin() -> bool:
            options = GenerationOptions.of(json.loads(options_json))
            text = self.model.text_stream(self.voices.get(voice or None), options, words=words)
            self.cancel()
            self.text = text
            return True

        return _result("started", begin)

    def push(self, text: str) -> str:
        """More text of the stream -> JSON {segments: how many it completed} or {error}."""
        return _result("segments", lambda: self._queue(self.text.push(text)))

    def flush(self) -> str:
        """Say the text buffered now (at the end of the text, or when the writer pauses) -> as `push`."""
        return _result("segments", lambda: self._queue(self.text.flush()))

    def _queue(self, segments: List[Segment]) -> int:
        self.queue.extend(segments)
        return len(segments)

    def next_frame(self) -> Optional[str]:
        """What to hand on next, as JSON: {segment, spoken, speed, gain_db} when a generation begins
        (the text as given, the text it is read as, the speed of its audio, its gain to the loudness
        asked: null where none is, else from its voice's loudness, measured once on this side, which
        holds both halves of the model), then its frames {silence, first,
        end, latent, scores} (END last), whose floats `frame_numbers` gives: `latent` of them (0 for
        silence and the END), then `scores`, the frame's score of each unit where its words are timed
        (a chunk's first frame also has `units`: the chunk's units as JSON); None when nothing is
        queued (a text stream: until more text completes a segment)."""
        frame = next(self.frames, None) if self.frames is not None else None
        if frame is not None:
            latent = np.zeros(0, np.float32) if frame.latent is None else frame.latent.astype(np.float32)
            timed = frame.scores is not None and frame.words is not None
            scores = frame.scores.astype(np.float32) if timed else np.zeros(0, np.float32)
            self.numbers = np.concatenate([latent, scores])  # [latent_dim + units]
            out: Dict[str, Any] = {"silence": frame.silence, "first": frame.first, "end": frame.end}
            out.update(latent=int(latent.size), scores=int(scores.size))
            if timed and frame.first:
                out["units"] = json.dumps(_units_json(frame.words))
            return json.dumps(out)
        self.frames = None
        if not self.queue:
            return None
        segment = self.queue.popleft()
        self.frames = alone(self.model, segment.generation)
        generation = segment.generation
        return json.dumps(
            {
                "segment": segment.text,
                "spoken": segment.spoken,
                "speed": generation.speed,
                "gain_db": generation.gain_db,
            }
        )

    def frame_numbers(self) -> np.ndarray:
        """The floats of the frame next_frame described last, float32 (see next_frame)."""
        return self.numbers

    def cancel(self) -> None:
        """Drop what is being said and what is queued (the text stream too)."""
        if self.frames is not None:
            self.frames.close()
        self.frames = self.text = None
        self.queue.clear()

    # The decoder side

    def begin(self, speed: float, gain_json: str = "null") -> None:
        """The next frames are a new generation's, at `speed`, with its gain (JSON: dB, or null)."""
        gain_db = json.loads(gain_json)
        self.decoder = self.model.decoder(float(speed), None if gain_db is None else float(gain_db))
        self.chunk_words = None

    def frame_room(self, size: int) -> int:
        """Room for the `size` floats of the next frame to decode -> their address in the WebAssembly
        memory, where the worker writes them (as next_frame's frame_numbers gave them)."""
        self.numbers = np.empty(size, np.float32)
        return int(self.numbers.__array_interface__["data"][0])

    def decode(self, silence: int, first: bool, end: bool, latent: int, units: str) -> Optional[np.ndarray]:
        """A frame from the flow side (next_frame's fields; its floats written at frame_room, `units`
        "" where it has none) -> its audio, float32; None where it has none (the speed change
        gathering its first few ms; the END gives what it held back). Its word events wait for
        `take_words`."""
        numbers = self.numbers
        if units:
            self.chunk_words = _units_of(json.loads(units))
        scores = numbers[latent:].copy() if numbers.size > latent else None
        words = self.chunk_words if scores is not None else None
        frame = Frame(numbers[:latent].copy() if latent else None, int(silence), bool(first), bool(end), words, scores)
        return self.decoder.decode(frame)

    def take_words(self) -> str:
        """JSON of the word events decoded since the last call, in the one shape of every wire
        (docs/word-timestamps.md): {type: "word", word, index, start_sample} where a word begins
        and {type: "word_end", word, index, start_sample, end_sample} where it ends, in samples
        of the generation's audio at the output rate."""
        events = self.decoder.take_words() if self.decoder is not None else []
        return json.dumps(
            [
                {"type": "word", "word": e.word, "index": e.index, "start_sample": e.sample}
                if isinstance(e, WordStart)
                else {
                    "type": "word_end",
                    "word": e.word,
                    "index": e.index,
                    "start_sample": e.start,
                    "end_sample": e.end,
                }
                for e in events
            ]
        )


def _units_json(words: ChunkWords) -> Dict[str, Any]:
    """A chunk's units and the user's words they are said for, as the decoder side needs them."""
    units = [[u.text, u.begin, u.end, u.word and [u.word.text, u.word.index], u.synthetic] for u in words.units]
    return {"units": units, "users": [[i, w.text, w.index] for i, w in words.users.items()]}


def _units_of(data: Dict[str, Any]) -> ChunkWords:
    units = tuple(
        Unit(text, begin, end, None if word is None else Word(word[0], word[1], 0, 0), synthetic)
        for text, begin, end, word, synthetic in data["units"]
    )
    users = {int(i): Word(text, int(index), 0, 0) for i, text, index in data["users"]}
    return ChunkWords(units, np.zeros((0, len(units)), np.float32), users)


def _result(key: str, run: Any) -> str:
    """JSON {key: value} of run(), or {"error": message}: the core's own message for bad input."""
    try:
        return json.dumps({key: run()})
    except PocketTTSError as error:
        return json.dumps({"error": str(error)})
    except Exception as error:  # anything else still reaches the page as a message, not a hang
        return json.dumps({"error": f"{type(error).__name__}: {error}"})


def compiled_modules() -> str:
    """How the modules compiled ahead of time (browser/site/compiled.py: checked-hash .pyc files, PEP 552)
    served the imported ones: JSON {"used": modules run from one, "stale": modules whose source
    differs from the one it was compiled from, "source": modules that had none (both compiled
    from source)}. Python's start may write .pyc files of its own (timestamped, not checked-hash:
    those modules count as compiled from source); the worker turns that off before it imports
    anything, so every checked-hash .pyc here is one the site shipped."""
    used = stale = source = 0
    for module in list(sys.modules.values()):
        path, cached = getattr(module, "__file__", None), getattr(module, "__cached__", None)
        if not path or not cached or not path.endswith(".py"):
            continue
        try:
            with open(cached, "rb") as f:
                header = f.read(16)
        except OSError:
            header = b""
        if len(header) < 16 or int.from_bytes(header[4:8], "little") != 0b11:  # none, or not checked-hash
            source += 1
            continue
        with open(path, "rb") as f:
            if importlib.util.source_hash(f.read()) == header[8:16]:
                used += 1
            else:
                stale += 1
    return json.dumps({"used": used, "stale": stale, "source": source})
