"""scripts/ab.py, the comparison of two builds' streams: its statistics, and that each of its
workers runs the code it names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from scripts import ab
from tests.support.paths import ROOT


def test_the_ratio_is_the_median_of_each_rounds_own() -> None:
    # Round by round B takes 0.9 of A's time while the machine drifts 3x: the ratio of the two
    # medians would be 0.9 only by luck, each round's own ratio is 0.9 in every round.
    a = [10.0, 20.0, 30.0, 12.0, 25.0]
    b = [9.0, 18.0, 27.0, 10.8, 22.5]
    mid, low, high = ab.ratios(b, a)
    assert mid == pytest.approx(0.9) and low == pytest.approx(0.9) and high == pytest.approx(0.9)
    mid, low, high = ab.ratios([1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 5)
    assert (mid, low, high) == (3.0, 2.0, 4.0)


def test_the_sign_test_counts_the_rounds_b_won_and_their_chance() -> None:
    assert ab.sign_test([1.0] * 10, [2.0] * 10) == (10, pytest.approx(2 / 1024))
    faster, chance = ab.sign_test([1.0] * 5 + [3.0] * 5, [2.0] * 10)
    assert faster == 5 and chance == 1.0
    # 9 of 12: a one-sided tail of (1 + 12 + 66 + 220) / 4096, doubled.
    assert ab.sign_test([1.0] * 9 + [3.0] * 3, [2.0] * 12)[1] == pytest.approx(2 * 299 / 4096)
    # Ties are neither: 3 wins of 3 rounds that differed.
    assert ab.sign_test([1.0, 1.0, 1.0, 2.0], [2.0, 2.0, 2.0, 2.0]) == (3, pytest.approx(0.25))


def test_the_report_names_both_builds_and_the_processor() -> None:
    samples = {
        name: {"ttfc_short": [30.0, 32.0], "ttfc_medium": [50.0, 52.0], "rtf": [0.12 * scale, 0.13 * scale]}
        for name, scale in (("old", 1.0), ("new", 0.5))
    }
    text = ab.report(samples, "old", "new", 2)
    rtf = next(line for line in text.splitlines() if line.startswith("| real-time factor"))
    assert "| 0.500 | 0.500-0.500 | 2 of 2 | 0.50 |" in rtf
    assert text.splitlines()[0].startswith("new against old, 2 rounds alternating, on ")


def test_a_worker_started_where_its_code_is_not_is_refused(tmp_path) -> None:
    # An empty folder: the import finds the installed checkout's core instead, which is not the
    # code the worker is said to run.
    with pytest.raises(SystemExit, match="would not run its code"):
        ab.launcher("A", tmp_path, "english_2m_2026-10", None)


def test_an_unknown_revision_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(SystemExit, match="no revision 'no-such-revision'"):
        ab.checkout("no-such-revision", tmp_path)


@pytest.mark.slow
def test_a_revision_is_its_committed_tree_with_its_kernels_built_and_imported_there(tmp_path) -> None:
    tree = ab.checkout("HEAD", tmp_path)
    committed = subprocess.run(
        ["git", "show", "HEAD:core/native.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert (tree / "core" / "native.py").read_text() == committed
    assert list((tree / "core").glob("_kernels*.so"))
    env = dict(os.environ, PYTHONPATH=str(tree))
    assert ab.imports_from(tree, env).resolve() == tree.resolve()
    kernels = subprocess.run(
        [sys.executable, "-c", "import core.native as n; print(n.backend().name)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert kernels.returncode == 0 and kernels.stdout.strip() != "numpy", kernels.stderr
    assert ab.checkout("HEAD", tmp_path) == tree  # made once


def test_routing_ab_takes_only_core_natives_routing_constants_as_literals() -> None:
    from scripts import routing_ab

    assert routing_ab.settings(["FEW_STEPS=0", "ONE_STREAM_ANY_STEPS=('avx2',)"]) == {
        "FEW_STEPS": 0,
        "ONE_STREAM_ANY_STEPS": ("avx2",),
    }
    for wrong in ("NO_SUCH=1", "EXTENSION='x'", "backend=1", "np=1"):
        with pytest.raises(SystemExit, match="not a routing constant"):
            routing_ab.settings([wrong])
    with pytest.raises(SystemExit, match="must be a Python literal"):
        routing_ab.settings(["FEW_STEPS=os.system('true')"])


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage, changed",
    [("frame", {"FEW_STEPS": 0, "ONE_STREAM_ANY_STEPS": ()}), ("prompt", {"SMALL_BATCH": 1000})],
    ids=["frame", "prompt"],
)
def test_routing_ab_runs_b_under_its_constants_and_restores_them(stage, changed) -> None:
    """B's blocks run with B's constants: its products go elsewhere and round otherwise, so its
    output differs from A's in the last bits (A's and B's would be equal were B run as A)."""
    from core import TTSModel, native
    from scripts import routing_ab
    from scripts.bundles import REFERENCE, int8_bundle

    model = TTSModel.load(str(int8_bundle("english_2m_2026-10")))
    before = {name: getattr(native, name) for name in changed}
    voice = str(REFERENCE / "english_2m_2026-10" / "voice_state.safetensors")
    result = routing_ab.compare(model, changed, stage, pairs=3, blocks=2, voice_file=voice)
    assert {name: getattr(native, name) for name in changed} == before
    assert [len(result["times"][side]) for side in "AB"] == [3, 3]
    assert all(t > 0 for side in "AB" for t in result["times"][side])
    assert 0 < result["difference"] < 1e-3


class _Worker:
    """A bench worker's stand-in: what it was asked, in order, and whether it was closed."""

    started: list = []

    def __init__(self, name: str) -> None:
        self.name, self.backend, self.asked, self.closed = name, f"{name}'s products", [], False
        _Worker.started.append(self)

    def ask_raw(self, job):
        self.asked.append(job["what"])
        if job["what"] == "boom":
            raise SystemExit("bench worker died")
        return {"rtf": float(len(_Worker.started))}

    def close(self) -> None:
        self.closed = True


def test_bench_rounds_start_fresh_workers_warm_them_unmeasured_and_rotate_their_order(monkeypatch) -> None:
    from scripts import bench

    monkeypatch.setattr(bench, "SETTLE_S", 0)
    _Worker.started = []
    taken = []
    launch = {name: (lambda name=name: _Worker(name)) for name in ("a", "b", "c")}
    jobs = [{"what": "ttfc"}, {"what": "rtf"}]
    backends = bench.rounds(launch, jobs, 3, lambda name, job, answer: taken.append((name, job["what"])), "t")
    assert [w.name for w in _Worker.started] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(w.asked == ["warm", "ttfc", "rtf"] and w.closed for w in _Worker.started)
    assert taken[:6] == [("a", "ttfc"), ("b", "ttfc"), ("c", "ttfc"), ("a", "rtf"), ("b", "rtf"), ("c", "rtf")]
    assert taken[6:9] == [("b", "ttfc"), ("c", "ttfc"), ("a", "ttfc")] and len(taken) == 18
    assert backends == {"a": "a's products", "b": "b's products", "c": "c's products"}
    # A worker that fails mid-round: every worker of that round is closed all the same.
    _Worker.started = []
    with pytest.raises(SystemExit):
        bench.rounds(launch, [{"what": "boom"}], 1, lambda *a: None, "t")
    assert len(_Worker.started) == 3 and all(w.closed for w in _Worker.started)
