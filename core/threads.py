"""How a process of ours shares the CPU between its threads, in one place: NumPy's BLAS on one
thread wherever threads of ours compute side by side (its own threads would compete with them for
the cores), and, in a server, the GIL handed over quickly.

- the pipeline (core/pipeline.py): the flow LM on a thread of its own beside the caller's, while a
  stream runs (`one_blas_thread`);
- batch workers (core/batch.py): a process per core, for the process's life (`one_blas_thread_for_good`);
- a server (server/engine.py, every front): its scheduler's two threads, for as long as it serves
  (`serving`), and what it computes at start (its default voice, its adapters' checks), as its
  requests compute (`one_blas_thread`).

threadpoolctl comes with the `cli` extra; where it is missing, BLAS keeps its threads (the results
are the same: only the time differs).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

# A chunk crosses three threads in a server (flow LM, decoder, event loop): each crossing might
# otherwise wait out Python's default 5 ms switch interval.
SERVING_SWITCH_INTERVAL = 0.0005


# threadpoolctl's view of the process's BLAS libraries, and how many modules were imported then.
_controller: Optional[Tuple[int, Any]] = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread for the whole process while the block runs.

    The libraries are looked up again only after more modules were imported (a BLAS comes with an
    extension module: NumPy's, SciPy's, torch's): threadpoolctl's lookup goes through every library
    the process has loaded (about 300 in one that has loaded the model: 0.5-3 ms, which every
    stream's first chunk paid), where setting the thread count of those found takes 7 us."""
    global _controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        yield
        return
    if _controller is None or _controller[0] != len(sys.modules):
        _controller = (len(sys.modules), ThreadpoolController())
    with _controller[1].limit(limits=1, user_api="blas"):
        yield


def one_blas_thread_for_good() -> None:
    """BLAS on one thread for the rest of the process's life (a worker process of many)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


@contextmanager
def serving() -> Iterator[None]:
    """How a process that serves an engine runs its threads, whichever fronts it serves: one BLAS
    thread per caller, the GIL handed over quickly."""
    sys.setswitchinterval(SERVING_SWITCH_INTERVAL)
    with one_blas_thread():
        yield
