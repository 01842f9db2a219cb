"""What runs a model is chosen by whoever loads it (core.portable.model.Runtime), not set for the
process: importing core changes nothing, two models with different backends run side by side (in
one thread, interleaved, and from other threads), and core.TTSModel gives CPython's by default."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any, List

import numpy as np

import core
from core import Runtime, TTSModel, host
from core.portable.model import TTSModel as PortableModel
from core.portable.model import one_thread
from core.portable.network import ops
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K

OPTIONS = {"temperature": 0.0, "max_frames": 6, "eos_threshold": 1e9}


class Counting(ops.NumpyBackend):
    """NumPy's backend, counting its matrix products and the threads they ran on."""

    def __init__(self) -> None:
        super().__init__("counting")
        self.products = 0
        self.threads: List[int] = []

    def linear(self, x: np.ndarray, weight: Any, bias: Any) -> np.ndarray:
        self.products += 1
        self.threads.append(threading.get_ident())
        return super().linear(x, weight, bias)


def test_importing_core_sets_nothing_for_the_process() -> None:
    code = (
        "import core\n"
        "from core.portable import model\n"
        "from core.portable.network import ops\n"
        "from core.portable.weights import sources\n"
        "assert ops.current() is ops.NUMPY, ops.current()\n"
        "assert not hasattr(sources, 'use_fetcher') and not hasattr(model, 'use_runner')\n"
        "assert model.Runtime().backend is ops.NUMPY and model.Runtime().runner is model.one_thread\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_each_model_runs_on_the_backend_it_was_loaded_with() -> None:
    mine, theirs = Counting(), Counting()
    a = PortableModel.load(str(TINY_CONFIG), runtime=Runtime(mine))
    b = PortableModel.load(str(TINY_CONFIG), runtime=Runtime(theirs))
    voice = a.voice_state(str(VOICE_24K))  # cloned on `mine`
    cloned = mine.products
    assert cloned > 0 and theirs.products == 0
    first, second = a.stream("One model.", voice, **OPTIONS), b.stream("The other.", voice, **OPTIONS)
    for _ in range(3):  # interleaved in one thread: each product on its own model's backend
        before = theirs.products
        next(first)
        assert theirs.products == before
        before = mine.products
        next(second)
        assert mine.products == before
    assert ops.current() is ops.NUMPY  # nothing of it stays with the caller between chunks
    done: List[np.ndarray] = []
    worker = threading.Thread(target=lambda: done.append(a.generate("From a thread.", voice, **OPTIONS)))
    worker.start()
    worker.join()
    assert worker.ident in mine.threads and worker.ident not in theirs.threads
    reference = PortableModel.load(str(TINY_CONFIG)).generate("From a thread.", voice, **OPTIONS)
    assert np.array_equal(done[0], reference)  # NumPy underneath: the same audio


def test_core_gives_its_models_this_hosts_runtime_unless_given_another() -> None:
    default = TTSModel.load(str(TINY_CONFIG))
    assert default.runtime is host.runtime() and core.backend() == default.runtime.backend.description
    alone = TTSModel.load(str(TINY_CONFIG), runtime=Runtime(runner=one_thread))
    assert alone.runtime.backend is ops.NUMPY and alone.runtime.runner is one_thread
