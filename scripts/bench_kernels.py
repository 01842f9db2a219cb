"""The WebAssembly kernels' speed in Chromium, SIMD build against relaxed SIMD build, on the shapes
english runs per frame: the Mimi decoder's convolutions and transformer products, the flow LM's
int8 products. Prints GFLOP/s per shape and build (a multiply-add counts as 2 FLOP), and writes the
table of the committed builds on every shape into docs/measurements.md.

    python -m scripts.bench_kernels             # both committed builds (core/portable/kernels*.wasm)
    python -m scripts.bench_kernels --module build/k.wasm -k conv   # and another build, on the convolutions

Each module is instantiated on one WebAssembly.Memory in the page, on random data; each shape is
timed for ~0.2 s after a warm-up, median of 5 samples, builds interleaved so that a busy machine
slows both alike.
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path
from typing import Dict, List

from e2e import harness, measured
from scripts.build_kernels import BUILDS

# (kernel, label, shape): conv (M, C, T, N) at stride 1, dilation 1; linear (M, N, K); int8 linear
# (M, N, K, G) with one scale per G columns of a row.
SHAPES = [
    ("conv", "decoder conv 512x512x7, 16 steps", (512, 512, 7, 16)),
    ("conv", "decoder conv 640x256x2, 96 steps", (640, 256, 2, 96)),
    ("conv", "decoder conv 128x256x3, 96 steps", (128, 256, 3, 96)),
    ("conv", "decoder conv 64x128x3, 480 steps", (64, 128, 3, 480)),
    ("conv", "decoder conv 256x128x2, 480 steps", (256, 128, 2, 480)),
    ("conv", "decoder conv 32x64x3, 1920 steps", (32, 64, 3, 1920)),
    ("linear_f32", "decoder linear 16x512 @ 1536x512", (16, 1536, 512)),
    ("linear_f32", "decoder linear 16x2048 @ 512x2048", (16, 512, 2048)),
    ("linear_f32", "float matvec 1x1024 @ 4096x1024", (1, 4096, 1024)),
    ("linear_i8", "flow LM int8 1x1024 @ 3072x1024", (1, 3072, 1024, 1024)),
    ("linear_i8", "flow LM int8 1x4096 @ 1024x4096", (1, 1024, 4096, 4096)),
    ("linear_i8", "flow LM int8 5x1024 @ 4096x1024 (prompt)", (5, 4096, 1024, 1024)),
]

SCRIPT = """
async ({modules, shapes}) => {
  const memory = new WebAssembly.Memory({initial: 2048});  // 128 MB
  const kernels = [];
  for (const b64 of modules) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    kernels.push((await WebAssembly.instantiate(bytes, {env: {memory}})).instance.exports);
  }
  let top = 1024;
  const alloc = (bytes) => { const at = top; top += Math.ceil(bytes / 64) * 64 + 64; return at; };
  const floats = (n) => { const at = alloc(4 * n); const a = new Float32Array(memory.buffer, at, n);
    for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1; return at; };
  const bytes = (n) => { const at = alloc(n); const a = new Int8Array(memory.buffer, at, n);
    for (let i = 0; i < n; i++) a[i] = Math.floor(Math.random() * 255) - 127; return at; };
  const results = [];
  for (const [kind, label, s] of shapes) {
    top = 1024;
    let call, flop;
    if (kind === "conv") {
      const [M, C, T, N] = s, ldx = N + T - 1;
      const w = floats(M * C * T), x = floats(C * ldx), b = floats(M), y = floats(M * N);
      call = (k) => k.pk_conv_f32(w, x, b, y, M, C, T, N, ldx, 1);
      flop = 2 * M * C * T * N;
    } else if (kind === "linear_f32") {
      const [M, N, K] = s;
      const x = floats(M * K), w = floats(N * K), b = floats(N), y = floats(M * N);
      call = (k) => k.pk_linear_f32(x, w, b, y, M, N, K);
      flop = 2 * M * N * K;
    } else {
      const [M, N, K, G] = s;
      const x = floats(M * K), q = bytes(N * K), sc = floats(N * K / G), b = floats(N), y = floats(M * N);
      const sums = alloc(4 * N * K / G), scratch = alloc(8 * K + 4);
      call = (k) => k.pk_linear_i8(x, q, sc, sums, b, y, M, N, K, G, scratch);
      flop = 2 * M * N * K;
    }
    const samples = kernels.map(() => []);
    for (const k of kernels) for (let i = 0; i < 20; i++) call(k);  // V8 tiers up
    let t0 = performance.now(), reps = 0;
    while (performance.now() - t0 < 40) { call(kernels[0]); reps++; }
    reps = Math.max(1, Math.ceil(reps * 5));  // ~0.2 s a sample
    for (let sample = 0; sample < 5; sample++)
      kernels.forEach((k, i) => {
        const start = performance.now();
        for (let r = 0; r < reps; r++) call(k);
        samples[i].push((performance.now() - start) / reps);
      });
    const ms = samples.map((t) => t.sort((a, b) => a - b)[2]);
    results.push({label, ms, gflops: ms.map((t) => flop / t / 1e6)});
  }
  return results;
}
"""


def run(shapes: List, paths: List[Path]) -> List[Dict]:
    modules = [base64.b64encode(path.read_bytes()).decode() for path in paths]
    with harness.chromium() as browser:
        page = browser.new_page()
        page.goto("about:blank")
        version = browser.version
        return version, page.evaluate(SCRIPT, {"modules": modules, "shapes": shapes})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the shapes whose label contains this")
    parser.add_argument("--module", type=Path, action="append", default=[], help="another .wasm build to time")
    args = parser.parse_args()
    paths = [build.path for build in BUILDS] + args.module
    version, results = run([s for s in SHAPES if args.k in s[1]], paths)
    names = [str(path.name) for path in paths]
    lines = [
        f"Chromium {version}, GFLOP/s (median ms per call):",
        "",
        f"| shape | {' | '.join(names)} | {names[1]} / {names[0]} |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for row in results:
        cells = [f"{g:.1f} ({t:.3f} ms)" for g, t in zip(row["gflops"], row["ms"])]
        lines.append(f"| {row['label']} | {' | '.join(cells)} | {row['ms'][0] / row['ms'][1]:.2f}x |")
    if not (args.k or args.module):  # the committed builds on every shape: the page's table
        measured.record("measurements.md", "kernels in chromium", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
