"""The docs (docs/, built by `mkdocs build --strict` in scripts/test.sh): every measured table is
written by its run between its markers (e2e/measured.py), never by hand, and the README stays the
short way in."""

from __future__ import annotations

import datetime
import re
import sys

import pytest

from e2e import measured
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
BLOCK = re.compile(r"<!-- measured: (.+?) -->\n(.*?)<!-- /measured: \1 -->", re.DOTALL)
STAMP = re.compile(r"^\*Measured \d{4}-\d{2}-\d{2} on .+, \d+ cores.*: `python -m [\w.]+.*`\.\*$")


def pages():
    return sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_every_measured_block_is_closed_and_says_when_where_and_how(page) -> None:
    text = page.read_text()
    blocks = BLOCK.findall(text)
    assert text.count("<!-- measured: ") == text.count("<!-- /measured: ") == len(blocks)
    for key, body in blocks:
        stamp = body.strip().splitlines()[0] if body.strip() else ""
        assert STAMP.match(stamp), f"{page.name}, {key}: not written by a run: {stamp!r}"
        assert "|---" in body, f"{page.name}, {key}: no table"


def test_the_measurement_page_holds_no_table_written_by_hand() -> None:
    """Outside its measured blocks, docs/measurements.md has prose and commands, no table of results."""
    outside = BLOCK.sub("", (DOCS / "measurements.md").read_text())
    assert not [line for line in outside.splitlines() if line.startswith("|")]


def test_the_readme_is_the_short_way_in() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), link


def test_a_run_replaces_its_own_block_and_nothing_else(tmp_path, monkeypatch) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Speed\n\nProse before.\n\n<!-- measured: a -->\nold a\n<!-- /measured: a -->\n\n"
        "Between.\n\n<!-- measured: b -->\nold b\n<!-- /measured: b -->\n\nProse after.\n"
    )
    monkeypatch.setattr(sys, "argv", ["/x/scripts/bench.py", "--repeats", "3"])
    monkeypatch.setattr(measured, "command", lambda: "python -m scripts.bench --repeats 3")
    measured.record("page.md", "a", "| x |\n|---|\n| 1 |", docs=tmp_path)
    text = page.read_text()
    assert text.startswith("# Speed\n\nProse before.\n\n<!-- measured: a -->\n*Measured ")
    assert f"*Measured {datetime.date.today()} on " in text and "`python -m scripts.bench --repeats 3`.*" in text
    assert "old a" not in text and "| 1 |" in text
    assert "Between.\n\n<!-- measured: b -->\nold b\n<!-- /measured: b -->\n\nProse after.\n" in text
    measured.record("page.md", "c", "| y |\n|---|\n| 2 |", docs=tmp_path)  # a key the page lacks: at its end
    text = page.read_text()
    assert text.index("Prose after.") < text.index("<!-- measured: c -->") and text.endswith("<!-- /measured: c -->\n")
    assert STAMP.match(BLOCK.findall(text)[0][1].splitlines()[0])


def test_the_command_is_the_one_typed(monkeypatch) -> None:
    main = type(sys)("__main__")
    main.__spec__ = type("Spec", (), {"name": "e2e.ttfa"})()
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["/repo/e2e/ttfa.py", "--models", "english", "--note", "two words"])
    assert measured.command() == "python -m e2e.ttfa --models english --note 'two words'"


def test_the_processor_is_named_with_its_widest_vector_instructions() -> None:
    """A virtual machine's model name is often only its maker's line: a Zen 3 with AVX2 and a Zen 4
    with AVX-512 are both "AMD EPYC", so a table says the family, model and vector instructions."""
    zen3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
    zen3 += "flags\t\t: fpu sse2 avx fma avx2 bmi2\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n"
    assert measured.cpu_model(zen3) == "AMD EPYC (family 25 model 1, AVX2)"
    zen4 = zen3.replace("model\t\t: 1", "model\t\t: 17").replace("avx2", "avx2 avx512f avx512_vnni")
    assert measured.cpu_model(zen4) == "AMD EPYC (family 25 model 17, AVX-512 VNNI)"
    alder = zen3.replace("cpu family\t: 25", "cpu family\t: 6").replace("avx2", "avx2 avx_vnni")
    assert measured.cpu_model(alder) == "AMD EPYC (family 6 model 1, AVX-VNNI)"
    pi5 = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 atomics asimddp\nCPU part\t: 0xd0b\n"
    assert measured.cpu_model(pi5).endswith("(NEON dot product)")


def test_two_processors_tables_of_one_set_stand_side_by_side(tmp_path, monkeypatch) -> None:
    """A forced instruction set's table is one processor's: a Zen 4 held to AVX2 adds its block
    beside a Zen 3's of the same set and replaces only its own next run's."""
    zen3 = "cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fma avx2\n"
    zen4 = zen3.replace("model\t\t: 1", "model\t\t: 17").replace("avx2", "avx2 avx512f avx512_vnni")
    monkeypatch.setattr(measured, "command", lambda: "python -m scripts.bench --kernels avx2")
    page = tmp_path / "page.md"
    page.write_text("# Speed\n")
    for cpuinfo, table in ((zen3, "| 3 |"), (zen4, "| 4 |"), (zen4, "| 4 again |")):
        measured.record("page.md", measured.per_processor("speed english on avx2", cpuinfo), table, docs=tmp_path)
    blocks = dict(BLOCK.findall(page.read_text()))
    assert set(blocks) == {
        "speed english on avx2, AMD EPYC (family 25 model 1, AVX2)",
        "speed english on avx2, AMD EPYC (family 25 model 17, AVX-512 VNNI)",
    }
    assert "| 3 |" in blocks["speed english on avx2, AMD EPYC (family 25 model 1, AVX2)"]
    zen4_block = blocks["speed english on avx2, AMD EPYC (family 25 model 17, AVX-512 VNNI)"]
    assert "| 4 again |" in zen4_block and "| 4 |" not in zen4_block


def test_the_benchs_ratio_pairs_each_round() -> None:
    """A ratio is the median of the rounds' own ratios (0.5, 1.25, 0.3), not the ratio of two
    medians that come from different rounds (3 / 4)."""
    from scripts import bench

    ours, theirs = [1.0, 5.0, 3.0], [2.0, 4.0, 10.0]
    assert bench.paired(ours, theirs) == 0.5
    samples = {"english": {"ours int8": {"rtf": ours}, "official int8": {"rtf": theirs}}}
    row = next(line for line in bench.table(samples).splitlines() if "real-time factor" in line)
    assert row.endswith("| 0.50 |") and "| 3.000 |" in row and "| 4.000 |" in row
