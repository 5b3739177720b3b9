"""Hostile-input benchmark: what each hostile case costs a running daemon.

Run by hand: ``.venv/bin/python bench/bench_hostile.py``. Starts a daemon on a
small vault, then for each case of ``tests/test_hostile.py`` creates the file and
prints: the worst ``status`` reply while it was processed (polled every 50 ms),
the daemon's RSS growth, and the time until the note was reported (or indexed).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from daemontools import DaemonProc
from graphtools import write
from test_hostile import CASES, REPEATED, StatusProbe, _vault, _wait


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vault = _vault(root)
        d = DaemonProc(vault, root, env={"WIKID_RECONCILE_INTERVAL_S": "1"}).start()
        assert d.proc is not None
        rows = []
        try:
            cases = [*CASES.items(), ("2 MB repeated paragraphs", (None, ""))]
            for name, (make, _) in cases:
                with StatusProbe(d.socket) as probe:
                    rss = _rss(d.proc.pid)
                    started = time.monotonic()
                    if make is None:
                        write(vault, "big.md", REPEATED)
                        _wait(lambda: "big.md" in {n["id"] for n in d.call("graph")["nodes"]})
                    else:
                        path = make(vault)
                        _wait(lambda path=path: probe.last.get("rejected", {}).get(path))
                    seen = time.monotonic() - started
                    d.settle(quiet=0.3)
                rows.append((name, probe.worst, _rss(d.proc.pid) - rss, seen))
        finally:
            d.stop()
    print(f"| {'case':<26} | {'worst status':>12} | {'RSS growth':>10} | {'reported after':>14} |")
    print(f"|{'-' * 28}|{'-' * 14}|{'-' * 12}|{'-' * 16}|")
    for name, worst, grown, seen in rows:
        print(
            f"| {name:<26} | {worst * 1000:>9.0f} ms | {grown / 2**20:>7.1f} MB | {seen:>12.2f} s |"
        )


if __name__ == "__main__":
    main()
