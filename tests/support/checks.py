"""Checks of what the product answers, shared by the tests of several fronts."""

from __future__ import annotations

import numpy as np


def pcm_close(got: bytes, expected: bytes, steps: int = 1) -> bool:
    """16-bit PCM that is the same audio to the rounding of BLAS products: the same length, and no
    sample more than `steps` apart. For audio made in two processes whose BLAS threading may differ
    (a product's rounding depends on its thread count and kernels, so bytes need not match)."""
    a, b = np.frombuffer(got, "<i2").astype(np.int32), np.frombuffer(expected, "<i2").astype(np.int32)
    return a.shape == b.shape and (a.size == 0 or int(np.abs(a - b).max()) <= steps)


def error_of(response) -> dict:  # noqa: ANN001
    """The error of a server response, checked to be in OpenAI's shape."""
    body = response.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    return body["error"]


def downloaded_bytes(page) -> int:  # noqa: ANN001 - a Playwright page
    """The size of the file behind the page's download link."""
    return page.evaluate(
        "fetch(document.getElementById('download').href).then((r) => r.arrayBuffer()).then((b) => b.byteLength)"
    )
