"""SIGKILL during a cold start (issue 52, item 7): what a kill costs.

Run by hand: ``.venv/bin/python bench/bench_kill.py [--n 50000 | --vok]``. A real
``wikid run`` (the real model) on a generated vault of ``--n`` notes (or a copy of
``../shared/vaults/vaultofknowledge``) is killed with SIGKILL once 25%, 50% and 75% of
the vault's texts are embedded, and started again each time; the last start runs to
``ready``. Printed per start:

- texts embedded before the kill, and how many of them the embedding cache kept (it
  is committed after every model call of 64 texts, so at most the call in flight, and
  the slice in flight's cache rows if they joined its batch, are lost): the texts
  embedded twice;
- the time to serving, to meaning search ready, and (the last) to ready.

The whole vault's texts are counted from the first start's progress total. The goal:
texts embedded twice at most one slice's (``sink.SLICE_KEYS`` keys) per kill.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import start_and_watch
from daemontools import DaemonProc
from genvault import generate

VOK = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "vaultofknowledge"


def cached(workdir: Path) -> int:
    """Vectors in the store's embedding cache (committed rows only)."""
    files = list(workdir.rglob("wikid-store.sqlite"))
    if not files:
        return 0
    with sqlite3.connect(f"file:{files[0]}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])


def run_until(d: DaemonProc, share: float | None, before: int, total: list[int]) -> dict[str, Any]:
    """Start; kill once ``before`` + this start's embedded texts reach ``share`` of the
    vault's texts (None: run to ready). The first start's progress total is the vault's
    (``total``)."""
    done = [0]

    def due(s: dict[str, Any]) -> bool:
        p = s.get("progress") or {}
        if not p.get("total"):
            return False
        if not total:
            total.append(int(p["total"]))
        elif before == 0:  # the first start: its total firms up as its slices report
            total[0] = int(p["total"])
        done[0] = int(p["done"])
        return share is not None and before + done[0] >= share * total[0]

    out = start_and_watch(d, timeout=7200, kill_when=due)
    out["done"] = done[0]
    return out


def main(n: int, vok: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        vault = tmp / "vault"
        if vok:
            shutil.copytree(VOK, vault)
            name = f"vaultofknowledge ({sum(1 for _ in vault.rglob('*.md'))} notes)"
        else:
            generate(vault, n)
            name = f"generated real {n}"
        d = DaemonProc(vault, tmp, env={"WIKID_DEBOUNCE_MS": "300"})
        total: list[int] = []
        rows = []
        for share in (0.25, 0.5, 0.75, None):
            before = cached(d.workdir)
            res = run_until(d, share, before, total)
            after = cached(d.workdir)
            kept = after - before
            rows.append((share, res, before, after, max(0, res["done"] - kept)))
        d.stop()
    print(f"\n{name}: {total[0] if total else '?'} texts to embed in all")
    print(
        "| start | killed at | embedded this start | kept by the cache | embedded twice "
        "| serving | meaning ready | ready |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for i, (share, res, before, after, twice) in enumerate(rows):
        killed = f"{share:.0%} ({res.get('killed_at', 0):.1f} s)" if share else "-"

        def sec(key: str, res: dict[str, Any] = res) -> str:
            return "-" if res.get(key) is None else f"{res[key]:.1f} s"

        print(
            f"| {i + 1} | {killed} | {res['done']:,} | {after - before:,} | {twice:,} "
            f"| {sec('serving')} | {sec('meaning')} | {sec('ready')} |"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50_000, help="notes of the generated vault")
    ap.add_argument("--vok", action="store_true", help="../shared/vaults/vaultofknowledge instead")
    a = ap.parse_args()
    main(a.n, a.vok)
