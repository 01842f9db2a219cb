"""The Python half of the in-browser engine, run by worker.js inside Pyodide.

A worker has one role: "flow" (the flow LM and voice cloning: text to latent frames), "decoder"
(the Mimi decoder: frames to audio), or "both". It keeps its part of one model warm (and, for the
flow side, the voices), and does one frame per call, so that the worker hands each frame or chunk on
as soon as it exists and can stop between frames. Data crosses the JS boundary as JSON strings and
files in Pyodide's file system, which every Pyodide version handles the same way; a frame's latent
is a few dozen floats, exact through JSON.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

import numpy as np

from core import TTSModel
from core.portable import kernels, ops, params
from core.portable.errors import PocketTTSError
from core.portable.generation import Frame
from core.portable.options import GenerationOptions
from core.portable.voice_registry import VoiceRegistry

ROLES = {
    "flow": (params.FLOW_LM, params.VOICE_CLONING),
    "decoder": (params.DECODER,),
    "both": params.PARTS,
}


def install_kernels() -> None:
    """Run the model's products on the WebAssembly kernels the worker registered as `pocket_kernels`."""
    import pocket_kernels  # a JS module: the kernels' exports, on Pyodide's own memory

    functions = {name: getattr(pocket_kernels, name) for name in kernels.NAMES}
    ops.use(kernels.CompiledKernels(functions, "WebAssembly SIMD", "WebAssembly SIMD kernels with NumPy"))


class BrowserEngine:
    def __init__(self, bundle_dir: str, role: str):
        self.role = role
        self.model = TTSModel.load(bundle_dir, parts=ROLES[role])
        speaks = params.FLOW_LM in self.model.parts and self.model.default_voice is not None
        self.voices = VoiceRegistry(self.model) if speaks else None  # the default voice prepared now
        self.frames: Optional[Iterator[Frame]] = None
        self.decoder = self.model.decoder() if params.DECODER in self.model.parts else None
        self.chunks: Optional[Iterator[np.ndarray]] = None

    def info(self) -> str:
        return json.dumps(
            {
                "name": self.model.name,
                "role": self.role,
                "sample_rate": self.model.sample_rate,
                "frame_size": self.model.frame_size,
                "voices": self.voices.names() if self.voices else [],
                "default_voice": self.model.default_voice,
                "can_clone_voices": self.model.can_clone_voices,
                "backend": ops.current().name,
            }
        )

    def check_kernels(self) -> str:
        """JSON of browser/kernel_check.py's report on the kernels this worker runs, or {error}."""
        backend = ops.current()
        if not isinstance(backend, kernels.CompiledKernels):
            return json.dumps({"error": f"no kernels: the products run on {backend.name}"})
        from browser import kernel_check

        return json.dumps(kernel_check.run(backend))

    # The flow side

    def add_voice(self, samples_path: str, sample_rate: int) -> str:
        """A recording the page decoded (float32 samples in a file) -> JSON {voice} or {error}."""
        return _result("voice", lambda: self.voices.add(np.fromfile(samples_path, dtype="<f4"), int(sample_rate)))

    def start(self, text: str, voice: str, options_json: str) -> str:
        """Begin a generation -> JSON {started} or {error} (bad input fails now, before any audio)."""

        def begin() -> bool:
            options = GenerationOptions.of(json.loads(options_json))
            self.frames = self.model.frames(text, self.voices.get(voice or None), options)
            if self.decoder is not None:
                decoder = self.model.decoder()
                self.chunks = (decoder.decode([frame]) for frame in self.frames)
            return True

        return _result("started", begin)

    def next_frame(self) -> Optional[str]:
        """The next frame of the current generation as JSON {latent, silence, first}, or None at the end."""
        frame = next(self.frames, None) if self.frames is not None else None
        if frame is None:
            self.frames = None
            return None
        latent = None if frame.latent is None else frame.latent.tolist()
        return json.dumps({"latent": latent, "silence": frame.silence, "first": frame.first})

    def cancel(self) -> None:
        for stream in (self.chunks, self.frames):
            if stream is not None:
                stream.close()
        self.frames = self.chunks = None

    # The decoder side

    def decode(self, frame_json: str) -> np.ndarray:
        """A frame from the flow side (see next_frame) -> its audio, float32."""
        frame = json.loads(frame_json)
        latent = None if frame["latent"] is None else np.array(frame["latent"], dtype=np.float32)
        return self.decoder.decode([Frame(latent, int(frame["silence"]), bool(frame["first"]))])

    # Both in one worker

    def step(self) -> Optional[np.ndarray]:
        """The next chunk of the current generation (float32), or None when it is over."""
        chunk = next(self.chunks, None) if self.chunks is not None else None
        if chunk is None:
            self.cancel()
        return chunk


def _result(key: str, run: Any) -> str:
    """JSON {key: value} of run(), or {"error": message}: the core's own message for bad input."""
    try:
        return json.dumps({key: run()})
    except PocketTTSError as error:
        return json.dumps({"error": str(error)})
    except Exception as error:  # anything else still reaches the page as a message, not a hang
        return json.dumps({"error": f"{type(error).__name__}: {error}"})
