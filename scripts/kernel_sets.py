"""The native kernels' speed on each instruction set this processor runs, into docs/measurements.md
(a table per processor).

    .venv/bin/python -m scripts.kernel_sets

One 4096x1024 matrix (english's flow-LM feed-forward size), random: as float32 and as int8 (one
scale per row), times one row (a stream's step) and 40 rows (a text prompt), on each set's kernels
(core.native.backend(set)), everything on one thread (BLAS included), and int8 by 40 rows also
split over two threads as a prompt's products are (core/native.py); a float32 product of 40 rows is
OpenBLAS's on every set (core/native.py leaves it to NumPy). Best of REPEATS (ms): what the
kernels can do, not what a busy machine lets them.
"""

from __future__ import annotations

import functools
import time
from typing import Callable, Dict, List

import numpy as np

from e2e import measured

REPEATS = 30
SLOW_REPEATS = 5  # the baseline's int8 products of many rows take ~0.1 s each
COLUMNS = {
    "float32, 1 row": "f32_1",
    "float32, 40 rows": "f32_40",
    "int8, 1 row": "i8_1",
    "int8, 40 rows, one thread": "i8_40",
    "int8, 40 rows, two threads": "i8_40_split",
}


def best_ms(run: Callable[[], object], repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def measure() -> List[Dict[str, object]]:
    from core import native
    from core.portable.network.quantize import Int8Matrix, quantize
    from core.threads import one_blas_thread

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4096, 1024)).astype(np.float32)
    stored = quantize({"w": weight})
    matrix = Int8Matrix(stored["w"], stored["w.int8_scale"])
    one, prompt = rng.standard_normal((1, 1024)).astype(np.float32), rng.standard_normal((40, 1024)).astype(np.float32)
    rows = []
    split_rows = native.SPLIT_ROWS
    with one_blas_thread():
        for name in native.instruction_sets():
            backend = native.backend(name)
            repeats = SLOW_REPEATS if name == "baseline" else REPEATS
            linear = backend.linear
            row: Dict[str, object] = {"set": name}
            native.SPLIT_ROWS = 10**9  # one thread
            try:
                row["f32_1"] = best_ms(functools.partial(linear, one, weight, None), REPEATS)
                row["f32_40"] = best_ms(functools.partial(linear, prompt, weight, None), REPEATS)
                row["i8_1"] = best_ms(functools.partial(linear, one, matrix, None), REPEATS)
                row["i8_40"] = best_ms(functools.partial(linear, prompt, matrix, None), repeats)
            finally:
                native.SPLIT_ROWS = split_rows
            row["i8_40_split"] = best_ms(functools.partial(linear, prompt, matrix, None), repeats)
            rows.append(row)
    return rows


def table(rows: List[Dict[str, object]]) -> str:
    header = "| kernels | " + " | ".join(f"{title} (ms)" for title in COLUMNS) + " |"
    lines = [header, "|---" * (len(COLUMNS) + 1) + "|"]
    for row in rows:
        lines.append(f"| {row['set']} | " + " | ".join(f"{row[key]:.2f}" for key in COLUMNS.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    markdown = table(measure())
    measured.record("measurements.md", measured.per_processor("kernel sets"), markdown)
    print(markdown)


if __name__ == "__main__":
    main()
