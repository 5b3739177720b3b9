"""Daemon benchmark: save-to-visible latency, RSS after the initial sync, idle CPU.

Run by hand: ``.venv/bin/python bench/bench_daemon.py [--edits 200] [--idle 60]``.
Works on a copy of shared/vaults/vaultofknowledge (else the example vault).
Latency = from the write of a note that gains a new link to the moment ``links``
over the socket shows it; it includes the 300 ms debounce window.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from daemontools import EXAMPLE, DaemonProc

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import edits_visible

SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "vaultofknowledge"


def proc_stat(pid: int) -> tuple[float, int]:
    """(CPU seconds used, RSS bytes) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def main(edits: int, idle: float) -> None:
    source = SHARED if SHARED.is_dir() else EXAMPLE
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "benchvault"
        shutil.copytree(source, vault)
        for p in vault.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        d = DaemonProc(vault, Path(tmp), env={"WIKID_DEBOUNCE_MS": "300"})
        t = time.perf_counter()
        d.start(timeout=3600)
        cold = time.perf_counter() - t
        assert d.proc is not None
        _, rss = proc_stat(d.proc.pid)
        notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
        lat = edits_visible(d, vault, notes, edits)
        d.settle()
        cpu0, _ = proc_stat(d.proc.pid)
        time.sleep(idle)
        cpu1, rss_end = proc_stat(d.proc.pid)
        d.stop()
    lat.sort()
    rows = [
        ("vault", f"{source.name}, {len(notes)} notes"),
        ("start + initial sync", f"{cold:.1f} s"),
        ("RSS after initial sync", f"{rss / 2**20:.0f} MiB ({rss_end / 2**20:.0f} MiB at the end)"),
        (
            f"save -> visible, {edits} edits",
            f"p50 {statistics.median(lat):.0f} ms, p99 {lat[int(len(lat) * 0.99) - 1]:.0f} ms"
            f" (debounce 300 ms included)",
        ),
        (f"CPU while idle for {idle:.0f} s", f"{cpu1 - cpu0:.2f} s"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--idle", type=float, default=60)
    args = ap.parse_args()
    main(args.edits, args.idle)
