"""Command line: `python -m core.cli generate --text "Hello" -o hello.wav`.

Every user error (missing file, empty text, unknown model or voice, unreadable audio) is one line
on stderr and exit status 1; output files are written atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import wave
from typing import List, Optional

import numpy as np

from .errors import PocketTTSError
from .model import TTSModel

DEFAULT_MODEL = "english"


def write_wav(path: str, pcm: np.ndarray, sample_rate: int) -> None:
    """16-bit mono WAV, written to a temporary file then renamed: no half-written output."""
    samples = (np.clip(pcm, -1.0, 1.0) * 32767).astype("<i2")
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with wave.open(tmp, "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(sample_rate)
            f.writeframes(samples.tobytes())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _generate(args: argparse.Namespace) -> None:
    model = TTSModel.load(args.model)
    if args.voice is None:
        raise PocketTTSError("--voice is required: an audio file or a .safetensors voice state")
    voice = model.voice_state(args.voice)
    text = sys.stdin.read() if args.text == "-" else args.text
    start = time.perf_counter()
    first: Optional[float] = None
    chunks: List[np.ndarray] = []
    for chunk in model.stream(
        text,
        voice,
        temperature=args.temperature,
        eos_threshold=args.eos_threshold,
        max_frames=args.max_frames,
        frames_after_eos=args.frames_after_eos,
        lsd_decode_steps=args.lsd_decode_steps,
        seed=args.seed,
        max_tokens=args.max_tokens,
    ):
        if first is None:
            first = time.perf_counter() - start
        chunks.append(chunk)
    elapsed = time.perf_counter() - start
    pcm = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    write_wav(args.output, pcm, model.sample_rate)
    seconds = pcm.shape[0] / model.sample_rate
    if not args.quiet:
        print(
            f"wrote {args.output}: {seconds:.2f} s of audio, first chunk after {1000 * (first or 0):.0f} ms, "
            f"real-time factor {elapsed / max(seconds, 1e-9):.2f}",
            file=sys.stderr,
        )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m core.cli", description="Pocket TTS in NumPy")
    commands = top.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="speak a text into a WAV file")
    gen.add_argument("--text", required=True, help="text to speak, or - to read it from stdin")
    gen.add_argument("--voice", help="audio file to clone, or a .safetensors voice state")
    gen.add_argument("--model", default=DEFAULT_MODEL, help="model config .yaml (default: %(default)s)")
    gen.add_argument("-o", "--output", default="tts_output.wav", help="output WAV path (default: %(default)s)")
    gen.add_argument("--temperature", type=float, help="sampling temperature (default: the model's, 0.3)")
    gen.add_argument("--lsd-decode-steps", type=int, help="flow head steps per frame (default: 1)")
    gen.add_argument("--eos-threshold", type=float, help="end-of-speech threshold (default: the model's)")
    gen.add_argument("--frames-after-eos", type=int, help="frames kept after end of speech")
    gen.add_argument("--max-tokens", type=int, default=50, help="tokens per text chunk (default: %(default)s)")
    gen.add_argument("--max-frames", type=int, help="cap on the generated 80 ms frames")
    gen.add_argument("--seed", type=int, help="random seed of the sampling noise")
    gen.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    gen.set_defaults(run=_generate)
    return top


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
