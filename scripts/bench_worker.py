"""One implementation under benchmark, driven by scripts/bench.py over stdin/stdout (JSON lines).

    python -m scripts.bench_worker ours MODEL_DIR_OR_BUNDLE VOICE_STATE VOICE_WAV [--server] [--numpy] [--kernels SET]
    python -m scripts.bench_worker official CONFIG_YAML VOICE_STATE VOICE_WAV [--quantize]

Each command line names a measurement; the answer is one JSON object of timings in milliseconds.
The official side runs as shipped (one torch thread plus its decoder thread); ours runs the
single-threaded core as the command line does (NumPy's BLAS uses its own threads), or with --server
the server's path: its scheduler's two threads (server/scheduler.py, started with one BLAS thread).
Both run on the backend core chooses (core/native.py: the compiled kernels where pip built them),
ours with --kernels on another instruction set this processor runs, or with --numpy on NumPy alone.
Its first line names what runs the products.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Callable, Dict, Iterator, Optional

FORCED_FRAMES = 125
STEP_SAMPLES = 20


class _Chunks:
    """What the scheduler hands a stream's audio to (a Relay's methods), as a plain iterator that
    is never full (the bench reads every chunk)."""

    full = False

    def __init__(self) -> None:
        import queue
        import threading

        self.queue: queue.Queue = queue.Queue()
        self.abandoned = threading.Event()

    def reserve(self) -> None:
        pass

    def skip(self) -> None:
        pass

    def put(self, audio) -> None:  # noqa: ANN001 - server.scheduler.Audio
        self.queue.put(audio.pcm)

    def note(self, said) -> None:  # noqa: ANN001 - a generation's end: nothing to hear
        pass

    def fail(self, error: BaseException) -> None:
        self.queue.put(error)

    def close(self) -> None:
        self.queue.put(None)

    def __iter__(self) -> Iterator:
        while (item := self.queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item


class Ours:
    def __init__(
        self, source: str, voice_state: str, voice_wav: str, server: bool, numpy_only: bool, kernels: Optional[str]
    ):
        from core import Runtime, TTSModel, host

        self.scheduler = None
        if server:
            from server.scheduler import Scheduler

        # NumPy only: the portable runtime (NumPy, the caller's thread); else this host's.
        self.model = TTSModel.load(source, runtime=Runtime() if numpy_only else host.runtime(kernels))
        self.backend = f"{self.model.runtime.backend.description} ({blas()})"
        if server:
            self.scheduler = Scheduler()
        self.voice = self.model.voice_state(voice_state)
        self.voice_wav = voice_wav
        self.sample_rate = self.model.sample_rate

    def stream(self, text: str, frames: int = 0) -> Iterator:
        options = {"eos_threshold": float("inf"), "max_frames": frames} if frames else {}
        if self.scheduler is None:
            return self.model.stream(text, self.voice, seed=0, **options)
        chunks = _Chunks()
        self.scheduler.submit(self.model.generation(text, self.voice, seed=0, **options), chunks)
        return iter(chunks)

    def settle(self) -> None:
        """Once its first streams ran: wait for the model's decoder process where they started one
        (the code of a revision before core.pipeline.decoder_process_ready, which scripts.ab runs
        this worker on, waits for the warm-up's streams alone: seconds, where the process takes one)."""
        from core import pipeline

        ready = getattr(pipeline, "decoder_process_ready", None)
        if ready is not None:
            ready(self.model, 60)

    def stages(self, text: str) -> Dict[str, float]:
        from core.portable.network import ops

        with ops.using(self.model.runtime.backend):  # the stages' parts run outside the model's entries
            return self._stages(text)

    def _stages(self, text: str) -> Dict[str, float]:
        import numpy as np

        from core.portable.network import flow_lm, mimi, transformer

        model = self.model
        spec, p = model.flow_spec, model.params["flow_lm"]
        tokens = model.tokenizer.encode(text)
        state = self.voice.transformer.copy()
        transformer.reserve(state, state.offset + len(tokens) + STEP_SAMPLES + 1)
        prompt = _time(lambda: flow_lm.prompt(spec, p, state, flow_lm.text_embeddings(p, tokens)))
        noise, times = np.zeros((1, spec.latent_dim), np.float32), model.time_terms(1)
        latents = [None]
        steps = [
            _time(lambda: latents.append(flow_lm.step(spec, p, [state], [latents[-1]], noise, times)[0][0]))
            for _ in range(STEP_SAMPLES)
        ]
        decoder = mimi.init_decoder_state(model.mimi_spec, model.params["mimi"])
        frames = [(latent * p["emb_std"] + p["emb_mean"])[None] for latent in latents[1:]]
        decodes = [
            _time(lambda f=f: mimi.decode_step(model.mimi_spec, model.params["mimi"], f, decoder)) for f in frames
        ]
        return {"text_prompt": prompt, "flow_step": statistics.median(steps), "mimi_frame": statistics.median(decodes)}

    def encode_voice(self) -> float:
        return _time(lambda: self.model.voice_state(self.voice_wav))


class Official:
    def __init__(self, config: str, voice_state: str, voice_wav: str, quantize: bool):
        from pathlib import Path

        import torch
        from pocket_tts import TTSModel

        os.chdir(Path(config).parent)  # the official package resolves relative paths from here
        self.model = TTSModel.load_model(config=config, quantize=quantize)
        self.backend = (
            f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()},"
            f" quantized engine {torch.backends.quantized.engine},"
            f" FBGEMM {os.environ.get('FBGEMM_ENABLE_INSTRUCTIONS', 'its own choice')})"
        )
        self.voice = self.model.get_state_for_audio_prompt(Path(voice_state))
        self.voice_wav = Path(voice_wav)
        self.sample_rate = self.model.sample_rate
        self.estimate = self.model._estimate_max_gen_len
        self.threshold = self.model.eos_threshold

    def stream(self, text: str, frames: int = 0) -> Iterator:
        model = self.model
        if frames:
            model.eos_threshold, model._estimate_max_gen_len = float("inf"), lambda _n: frames
        else:
            model.eos_threshold, model._estimate_max_gen_len = self.threshold, self.estimate
        return model.generate_audio_stream(self.voice, text)

    def settle(self) -> None:
        pass

    def stages(self, text: str) -> Dict[str, float]:
        import copy

        import torch
        from pocket_tts.modules.stateful_module import increment_steps, init_states

        model = self.model
        with torch.no_grad():
            tokens = model.flow_lm.conditioner.prepare(text)
            state = copy.deepcopy(self.voice)
            model._expand_kv_cache(state, model._flow_lm_current_end(state) + tokens.shape[1] + STEP_SAMPLES + 1)
            prompt = _time(lambda: model._run_flow_lm_and_increment_step(model_state=state, text_tokens=tokens))
            latents = [torch.full((1, 1, model.flow_lm.ldim), float("nan"))]
            steps = [
                _time(
                    lambda: latents.append(
                        model._run_flow_lm_and_increment_step(model_state=state, backbone_input_latents=latents[-1])[0]
                    )
                )
                for _ in range(STEP_SAMPLES)
            ]
            mimi_state = init_states(model.mimi, batch_size=1, sequence_length=1000)
            std, mean = model.flow_lm.emb_std, model.flow_lm.emb_mean

            def decode(latent: torch.Tensor) -> None:
                model.mimi.decode_from_latent(latent * std + mean, mimi_state)
                increment_steps(model.mimi, mimi_state, increment=16)

            decodes = [_time(lambda latent=latent: decode(latent)) for latent in latents[1:]]
        return {"text_prompt": prompt, "flow_step": statistics.median(steps), "mimi_frame": statistics.median(decodes)}

    def encode_voice(self) -> float:
        return _time(lambda: self.model.get_state_for_audio_prompt(self.voice_wav))


def blas() -> str:
    """The BLAS libraries NumPy loaded here, with the kernels each chose (OpenBLAS's: its core type)."""
    from threadpoolctl import threadpool_info

    return ", ".join(f"{pool['internal_api']} {pool.get('architecture')}" for pool in threadpool_info())


def _time(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return 1000 * (time.perf_counter() - start)


def measure_stream(impl, text: str, frames: int) -> Dict[str, float]:
    """Time to the first chunk and real-time factor of a whole stream (forced length when `frames`).

    Streams are always consumed to the end: an abandoned official stream keeps its generation
    thread running, which would slow down the next measurement.
    """
    start = time.perf_counter()
    first = None
    samples = 0
    for chunk in impl.stream(text, frames):
        if first is None:
            first = time.perf_counter() - start
        samples += chunk.shape[-1]
    total = time.perf_counter() - start
    return {"ttfc": 1000 * first, "rtf": total / (samples / impl.sample_rate)}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, it does not inherit the
    high-water mark of the process that started it)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    kind, source, voice_state, voice_wav = sys.argv[1:5]
    if kind == "ours":
        kernels = sys.argv[sys.argv.index("--kernels") + 1] if "--kernels" in sys.argv else None
        impl = Ours(source, voice_state, voice_wav, "--server" in sys.argv, "--numpy" in sys.argv, kernels)
    else:
        impl = Official(source, voice_state, voice_wav, quantize="--quantize" in sys.argv)
    print(json.dumps({"ready": True, "backend": impl.backend}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        if job["what"] == "warm":
            # A fresh worker's first streams: each text once (each takes some paths first), then
            # whatever they started (our decoder process) up, none of it measured.
            for text in job["texts"]:
                measure_stream(impl, text, 0)
            measure_stream(impl, job["texts"][-1], FORCED_FRAMES)
            impl.settle()
            result = {}
        elif job["what"] == "ttfc":
            result = measure_stream(impl, job["text"], 0)
        elif job["what"] == "rtf":
            result = measure_stream(impl, job["text"], FORCED_FRAMES)
        elif job["what"] == "stages":
            result = impl.stages(job["text"])
        elif job["what"] == "voice":
            result = {"voice_encode": impl.encode_voice()}
        else:
            result = {"peak_rss_mb": peak_rss_mb()}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
