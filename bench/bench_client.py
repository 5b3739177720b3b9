"""Client start-up benchmark: what one ``wikid`` client command costs, end to end.

Run by hand: ``.venv/bin/python bench/bench_client.py [--runs 30]``.
Starts a daemon on a copy of the example vault, then times, as a shell user
runs them, ``wikid status --json``, ``wikid links NOTE --json`` and
``wikid search TEXT --json`` (the console script, a new process each time),
beside a bare ``python -c pass`` and ``python -c 'import click'``. Prints the
median and p90 wall times and the ratio to the bare start (goal: <= 3x).
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


def _wikid() -> list[str]:
    script = Path(sys.executable).with_name("wikid")
    return [str(script)] if script.exists() else [sys.executable, "-m", "wikid"]


def _time(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "benchvault"
        shutil.copytree(EXAMPLE, vault)
        daemon = DaemonProc(vault, Path(tmp)).start()
        try:
            where = ["--vault", str(vault), "--socket", str(daemon.socket), "--json"]
            cases = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -c 'import click'": [sys.executable, "-c", "import click"],
                "wikid status --json": [*_wikid(), "status", *where],
                "wikid links NOTE --json": [*_wikid(), "links", "Ada Lovelace", *where],
                "wikid search TEXT --json": [*_wikid(), "search", "analytical engine", *where],
            }
            times = {name: _time(argv, runs, daemon.env) for name, argv in cases.items()}
        finally:
            daemon.stop()
    bare = statistics.median(times["python -c pass"])
    print(f"{runs} runs each, new process per run, daemon on the example vault")
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
