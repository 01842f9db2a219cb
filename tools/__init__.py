"""What the scripts (scripts/) and the end-to-end runs (e2e/) share: building the static site
(site.py, pyodide.py), the benchmarks' int8 bundles (bundles.py) and the measured tables they write
into the docs (measured.py). Development tooling: not part of the installed package."""
