"""The CPython host's runtime (core.portable.model.Runtime), which core.TTSModel loads its models
with unless given another: the compiled kernels pip built (core/native.py; NumPy where it built
none, and its description says why), the flow LM on a thread of its own where that pays
(core/pipeline.py; the caller's thread on a single core), and hf:// files downloaded and cached
with huggingface_hub (core/hub.py). Nothing is chosen at import: the first model loaded asks."""

from __future__ import annotations

import functools
import os
from typing import Optional

from . import hub, native, pipeline
from .portable.model import Runtime, one_thread


def runtime(kernels: Optional[str] = None) -> Runtime:
    """This machine's runtime (asked of the processor and the library once), on the best kernels it
    runs or on `kernels`, another set it runs (to measure one machine's sets side by side)."""
    return _runtime(kernels)


@functools.lru_cache(maxsize=None)
def _runtime(kernels: Optional[str]) -> Runtime:
    runner = pipeline.run if (os.cpu_count() or 1) > 1 else one_thread
    return Runtime(native.backend(kernels), runner, hub.fetch)
