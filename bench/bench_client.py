"""Client start-up benchmark: what one ``wikid`` client command costs, end to end.

Run by hand: ``.venv/bin/python bench/bench_client.py [--runs 30]``.
Builds a wheel from this checkout and installs it with plain pip into a new venv
(as a user installs wikid: no editable finder on the import path; the
dependencies come from this environment through a path file, so nothing is
downloaded), starts a daemon on a copy of the example vault, then times, as a
shell user runs them, ``wikid status --json``, ``wikid links NOTE --json``,
``wikid search TEXT --json`` and ``wikid query TEXT --json`` (the venv's console
script, a new process each time), beside the venv's bare ``python -c pass`` and
``python -c 'import click'``. Prints the median and p90 wall times and the ratio
to the bare start (goal: <= 3x).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from daemontools import EXAMPLE, DaemonProc
from wheeltools import wheel_venv


def _time(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = wheel_venv(Path(tmp)) / "bin"
        py, wikid = str(bin_dir / "python"), str(bin_dir / "wikid")
        vault = Path(tmp) / "benchvault"
        shutil.copytree(EXAMPLE, vault)
        daemon = DaemonProc(vault, Path(tmp)).start()
        try:
            where = ["--vault", str(vault), "--socket", str(daemon.socket), "--json"]
            cases = {
                "python -c pass": [py, "-c", "pass"],
                "python -c 'import click'": [py, "-c", "import click"],
                "wikid status --json": [wikid, "status", *where],
                "wikid links NOTE --json": [wikid, "links", "Ada Lovelace", *where],
                "wikid search TEXT --json": [wikid, "search", "analytical engine", *where],
                "wikid query TEXT --json": [wikid, "query", "who wrote it?", *where],
            }
            for argv in cases.values():  # warm the page cache first
                subprocess.run(argv, check=True, capture_output=True, env=daemon.env)
            times = {name: _time(argv, runs, daemon.env) for name, argv in cases.items()}
        finally:
            daemon.stop()
    bare = statistics.median(times["python -c pass"])
    print(f"{runs} runs each, new process per run, wheel install, daemon on the example vault")
    print(f"| {'command':<28} | {'median ms':>9} | {'p90 ms':>7} | {'x bare':>6} |")
    print(f"|{'-' * 30}|{'-' * 11}|{'-' * 9}|{'-' * 8}|")
    for name, ms in times.items():
        p90 = statistics.quantiles(ms, n=10)[-1]
        med = statistics.median(ms)
        print(f"| {name:<28} | {med:>9.1f} | {p90:>7.1f} | {med / bare:>6.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    main(ap.parse_args().runs)
