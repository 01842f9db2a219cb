"""The network: the layers as functions over params and state (nn, conv, transformer), the flow
language model and its heads (flow_lm), the Mimi codec (seanet, mimi), int8 weights (quantize), and
the seam its heavy products run through (ops) with the compiled kernels behind it (kernels, kernels.c,
kernels.wasm). It imports the portable model's errors and config only: nothing of text, voices,
weights files or generation."""

from __future__ import annotations
