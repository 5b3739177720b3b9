"""Generate a synthetic vault of N linked notes (deterministic, for benchmarks)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = [
    "graph",
    "note",
    "idea",
    "link",
    "vault",
    "index",
    "river",
    "stone",
    "engine",
    "theory",
    "paper",
    "method",
    "history",
    "memory",
    "signal",
    "model",
    "system",
    "design",
    "garden",
    "question",
    "answer",
]


def generate(root: Path, n: int, seed: int = 7) -> list[str]:
    """Write ``n`` notes in 50-note folders, each with ~6 links, a tag and prose."""
    rng = random.Random(seed)
    paths = []
    for i in range(n):
        folder = f"area{i // 50:03d}"
        rel = f"{folder}/Note {i:05d}.md"
        links = " ".join(f"[[Note {rng.randrange(n):05d}]]" for _ in range(6))
        prose = " ".join(rng.choice(WORDS) for _ in range(120))
        text = (
            f"---\ntags: [t{i % 40}]\naliases: [N{i}]\n---\n# Note {i}\n\n{prose}.\n\n"
            f"## Links\nSee {links} and [[Missing {i % 97}]].\n"
        )
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(rel)
    return paths
