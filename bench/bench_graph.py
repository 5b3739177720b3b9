"""Graph layer benchmark: full load of a real vault, single-note update cost at 1k and 20k,
and load time with 0 / 250 / 500 canvases on 5k notes.

Run by hand: ``.venv/bin/python bench/bench_graph.py``. Prints a table.
The update cost should not grow with the vault: the work depends on the change.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from genvault import generate

from wikid.core.graph import VaultGraph

SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults"


def timed_load(root: Path) -> tuple[float, VaultGraph]:
    t = time.perf_counter()
    vg = VaultGraph.load(root)
    return time.perf_counter() - t, vg


def update_cost(
    root: Path, vg: VaultGraph, paths: list[str], rounds: int = 200
) -> tuple[float, float]:
    """Median and p99 ms of: append a link to one note, then update([that note])."""
    times = []
    for i in range(rounds):
        rel = paths[(i * 7919) % len(paths)]
        with open(root / rel, "a", encoding="utf-8") as fh:
            fh.write(f"\nEdit {i}: [[Note {i:05d}]]\n")
        t = time.perf_counter()
        vg.update([rel])
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def add_canvases(root: Path, paths: list[str], n: int) -> None:
    """``n`` JSON canvases, each with 12 file cards, a text card with 3 links and 8
    edges between cards (deterministic)."""
    for c in range(n):
        cards = [paths[(c * 31 + i * 97) % len(paths)] for i in range(12)]
        nodes: list[dict[str, object]] = [
            {"id": f"f{i}", "type": "file", "file": f, "x": i, "y": 0, "width": 1, "height": 1}
            for i, f in enumerate(cards)
        ]
        links = " ".join(f"[[Note {(c * 13 + k) % len(paths):05d}]]" for k in range(3))
        nodes.append(
            {
                "id": "t",
                "type": "text",
                "text": f"Board {c}: {links}",
                "x": 0,
                "y": 1,
                "width": 1,
                "height": 1,
            }
        )
        edges = [
            {"id": f"e{i}", "fromNode": f"f{i}", "toNode": f"f{i + 1}", "label": "next"}
            for i in range(8)
        ]
        (root / "boards").mkdir(exist_ok=True)
        (root / "boards" / f"Board {c:03d}.canvas").write_text(
            json.dumps({"nodes": nodes, "edges": edges})
        )


def canvas_rows() -> list[tuple[str, str, str, str]]:
    """Load time with 0, 250 and 500 canvases on 5k notes: it grows with the sources."""
    rows = []
    for n in (0, 250, 500):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            paths = generate(root, 5000)
            add_canvases(root, paths, n)
            secs, vg = timed_load(root)
            sources = len(vg.notes)
            rows.append(
                (
                    f"full load 5000 notes + {n} canvases",
                    f"{sources} sources, {vg.g.number_of_links()} links",
                    f"{secs:.2f} s",
                    f"{sources / secs:.0f} sources/s",
                )
            )
    return rows


def main() -> None:
    rows = []
    real = SHARED / "vaultofknowledge"
    if real.is_dir():
        secs, vg = timed_load(real)
        rows.append(
            (
                "full load vaultofknowledge",
                f"{len(vg.notes)} notes",
                f"{secs:.2f} s",
                f"{len(vg.notes) / secs:.0f} notes/s",
            )
        )
    for n in (1000, 20000):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            paths = generate(root, n)
            secs, vg = timed_load(root)
            rows.append(
                (
                    f"full load generated {n}",
                    f"{n} notes",
                    f"{secs:.2f} s",
                    f"{n / secs:.0f} notes/s",
                )
            )
            p50, p99 = update_cost(root, vg, paths)
            rows.append(
                (
                    f"single-note update, {n} notes",
                    "200 edits",
                    f"p50 {p50:.2f} ms",
                    f"p99 {p99:.2f} ms",
                )
            )
    rows += canvas_rows()
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


if __name__ == "__main__":
    main()
