"""Measurements that write themselves: each benchmark and end-to-end run puts its tables into its
page under docs/, each between two markers of its own

    <!-- measured: KEY -->
    ...
    <!-- /measured: KEY -->

under a line saying when, on what machine and by which command it was measured. A page's prose
around the markers is written by hand; what is between them never is. A key the page lacks yet is
added at the page's end.

Every table's statistics come from here too (`summary`, `p90`): one definition of each, so the
pages' figures can be compared with each other.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import re
import shlex
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

DOCS = Path(__file__).resolve().parent.parent / "docs"


def p90(values: Sequence[float]) -> float:
    """The 90th percentile by the nearest rank: the smallest value at least 90% of them are at or
    below (of 10 values the 9th, of 4 the 4th): always one that was measured."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def summary(values: Sequence[float]) -> Dict[str, float]:
    """Median, p90, min and max of `values` (at least one), as every measured table gives them."""
    ordered: List[float] = sorted(values)
    return {"median": statistics.median(ordered), "p90": p90(ordered), "min": ordered[0], "max": ordered[-1]}


# The widest vector instructions a processor reports (Linux's /proc/cpuinfo flags or Features), as
# the tables name them: a virtual machine's model name is often only its maker's line ("AMD EPYC"
# for a Zen 3 with AVX2 and a Zen 4 with AVX-512 alike).
VECTOR_FLAGS = [
    ("avx512_vnni", "AVX-512 VNNI"),
    ("avx512f", "AVX-512"),
    ("avx_vnni", "AVX-VNNI"),
    ("avx2", "AVX2"),
    ("i8mm", "NEON i8mm"),
    ("asimddp", "NEON dot product"),
    ("asimd", "NEON"),
]


def cpu_model(cpuinfo: Optional[str] = None) -> str:
    """The processor's model name, with its family and model numbers (x86) and its widest vector
    instructions where Linux reports them (`cpuinfo`: /proc/cpuinfo's text, read when not given):
    "AMD EPYC (family 25 model 1, AVX2)"."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: Dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), re.sub(r"\s+", " ", value).strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    details = []
    if "cpu family" in fields and "model" in fields:
        details.append(f"family {fields['cpu family']} model {fields['model']}")
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    details += [label for flag, label in VECTOR_FLAGS if flag in flags][:1]
    return f"{name} ({', '.join(details)})" if details else name


def per_processor(key: str, cpuinfo: Optional[str] = None) -> str:
    """`key` with this processor's name (`cpu_model`) after it, for a table that compares
    processors (an instruction set forced, a machine's limits): each kind of machine then writes a
    block of its own beside the others' instead of over them."""
    return f"{key}, {cpu_model(cpuinfo)}"


def cpu_quota() -> Optional[float]:
    """The CPUs this process's cgroup may use (cgroup v2 cpu.max, or v1 cfs quota), None if unlimited."""
    try:
        entries = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for entry in entries:
        _, controllers, path = entry.split(":", 2)
        if controllers == "":
            limit = Path("/sys/fs/cgroup") / path.lstrip("/") / "cpu.max"
            if limit.exists():
                quota, period = limit.read_text().split()
                return None if quota == "max" else int(quota) / int(period)
        elif "cpu" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/cpu") / path.lstrip("/")
            try:
                quota = int((folder / "cpu.cfs_quota_us").read_text())
                period = int((folder / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                return None
            return None if quota < 0 else quota / period
    return None


def limit() -> Optional[float]:
    """The CPUs this process may use where its quota is below the machine's cores, else None."""
    quota = cpu_quota()
    return quota if quota is not None and quota < (os.cpu_count() or 1) else None


def share() -> str:
    """ " at N CPUs" where this process's CPU time is limited below the machine's cores, else "": the
    suffix of a key measured under a quota, beside the full machine's."""
    quota = limit()
    return "" if quota is None else f" at {quota:g} CPUs"


def machine() -> str:
    """The CPU, its cores (and the share this process may use, where it is limited) and the system."""
    quota = limit()
    share = "" if quota is None else f", limited to {quota:g} of them"
    return f"{cpu_model()}, {os.cpu_count() or 1} cores{share}, {platform.system()} {platform.machine()}"


def command() -> str:
    """This process's command line as it was typed: `python -m MODULE ARGS`."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    program = ["python", "-m", spec.name] if spec is not None else ["python", sys.argv[0]]
    return shlex.join(program + sys.argv[1:])


def stamp(today: Optional[datetime.date] = None) -> str:
    return f"*Measured {today or datetime.date.today()} on {machine()}: `{command()}`.*"


def replace(text: str, key: str, body: str) -> str:
    """`text` with what is between the markers of `key` replaced by `body` (added at the end where
    the markers are missing)."""
    begin, end = f"<!-- measured: {key} -->", f"<!-- /measured: {key} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def record(page: str, key: str, tables: str, docs: Path = DOCS) -> Path:
    """Write `tables` (markdown) into docs/`page` under `key`, with today's date, this machine and
    this command; returns the page's path."""
    path = docs / page
    path.write_text(replace(path.read_text(), key, f"{stamp()}\n\n{tables.strip()}"))
    print(f"wrote the table into {path} ({key})", file=sys.stderr)
    return path
