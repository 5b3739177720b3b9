"""Generate a synthetic vault of N linked notes (deterministic, for benchmarks).

Two shapes:

- ``real`` (the default): calibrated to the two shared real vaults (issue 50). A note is
  a zettel (nine in ten, shaped like ``vaultofknowledge``: no frontmatter, a median of 47
  words, most with no link) or a document (like ``tasks-docs``: frontmatter with tags,
  a median of 512 words, headings and links). Each note draws its length, links,
  headings and tags from its kind's measured percentiles; link targets favour a few
  hubs, a tenth of links go to notes that do not exist, and folders nest and vary in
  size. Words are drawn by their frequency in the shared vaults when they are present
  (a vocabulary, not their text), else from a built-in list.
- ``flat``: the generator of runs before issue 50 (120 words of a 21-word vocabulary,
  seven links and one tag a note, 50-note folders), kept to compare with old figures.

``python bench/genvault.py [--n 3000]`` prints the real vaults' distributions beside
both shapes'.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import itertools
import random
import re
import sys
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
SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults"
REAL_VAULTS = ("vaultofknowledge", "tasks-docs")

# Percentiles 0, 10, 20, ..., 90, 95, 99, 100 of each kind of note, measured on the
# shared vaults (``python bench/genvault.py`` measures them again). Words are capped at
# 12,000 (the real maximum, 20,199, is one note).
PCTS = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 100]
KINDS = {
    "zettel": {  # vaultofknowledge, 2,721 notes
        "share": 0.9,
        "words": [0, 1, 10, 20, 31, 47, 72, 119, 216, 502, 944, 3247, 12000],
        "links": [0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 9, 214],
        "heads": [0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 7, 20, 74],
        "tags": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3],
        "frontmatter": 0.0,
    },
    "doc": {  # tasks-docs, 118 notes
        "share": 0.1,
        "words": [0, 36, 138, 278, 422, 512, 626, 799, 1195, 1736, 2851, 5371, 10389],
        "links": [0, 0, 0, 1, 2, 4, 6, 9, 12, 18, 25, 79, 154],
        "heads": [0, 1, 3, 4, 5, 6, 8, 10, 14, 21, 28, 47, 66],
        "tags": [0, 0, 0, 1, 1, 1, 1, 2, 3, 4, 7, 16, 25],
        "frontmatter": 0.87,
    },
}
UNRESOLVED = 0.1  # of links: vaultofknowledge 13%, tasks-docs 2%
HUBS = 0.1  # of links go to a hub, chosen by a Zipf weight; the rest to any note
_WORD = re.compile(r"[a-z][a-z'-]{1,20}")


def _draw(rng: random.Random, pcts: list[int]) -> int:
    """A value from a measured percentile table (linear between its points)."""
    u = rng.random() * 100
    i = max(bisect.bisect_right(PCTS, u) - 1, 0)
    j = min(i + 1, len(PCTS) - 1)
    lo, hi = pcts[i], pcts[j]
    span = PCTS[j] - PCTS[i] or 1
    return round(lo + (hi - lo) * (u - PCTS[i]) / span)


def vocabulary(limit: int = 6000) -> tuple[list[str], list[int]]:
    """(words, cumulative weights) from the shared vaults' word counts, or the built-in
    list when they are absent."""
    counts: collections.Counter[str] = collections.Counter()
    for name in REAL_VAULTS:
        for p in (SHARED / name).rglob("*.md"):
            counts.update(_WORD.findall(p.read_text(errors="replace").lower()))
    if not counts:  # said, or a table from a vault unlike a real one would pass for one
        print(f"genvault: {SHARED} absent: words from the built-in list", file=sys.stderr)
        return WORDS, list(range(1, len(WORDS) + 1))
    words, weights = zip(*counts.most_common(limit), strict=True)
    return list(words), list(itertools.accumulate(weights))


def _folders(rng: random.Random, n: int) -> list[str]:
    """Folders for ``n`` notes: nested up to three deep, sizes from a long tail (most
    hold a few notes, one holds a large share, as in the real vaults)."""
    out: list[str] = []
    k = 0
    while len(out) < n:
        size = min(int(rng.paretovariate(0.9)) + 1, max(n // 8, 1))
        depth = rng.choice([0, 1, 1, 1, 2, 2, 3])
        parts = [f"area{k % 23:02d}", f"topic{k:04d}", f"sub{k % 7}"][:depth]
        folder = "/".join(parts)
        out += [folder] * size
        k += 1
    rng.shuffle(out)
    return out[:n]


def _real(root: Path, n: int, rng: random.Random) -> list[str]:
    words, cum = vocabulary()
    total = cum[-1]

    def text(count: int) -> list[str]:
        return [words[bisect.bisect_left(cum, rng.random() * total)] for _ in range(count)]

    hub_weight = list(itertools.accumulate(1.0 / (r + 1) for r in range(n)))
    hubs = list(range(n))
    rng.shuffle(hubs)
    folders = _folders(rng, n)
    kinds = ["zettel" if rng.random() < KINDS["zettel"]["share"] else "doc" for _ in range(n)]
    tags = [f"t{i}" for i in range(max(n // 60, 20))]
    paths = []
    for i in range(n):
        kind = KINDS[kinds[i]]
        n_words, n_links, n_heads = (_draw(rng, kind[k]) for k in ("words", "links", "heads"))  # type: ignore[arg-type]
        n_tags = _draw(rng, kind["tags"])  # type: ignore[arg-type]
        body = text(n_words)
        for _ in range(n_links):  # into the prose, where links sit in real notes
            if rng.random() < UNRESOLVED:
                target = f"Missing {rng.randrange(max(n // 10, 1))}"
            elif rng.random() < HUBS:
                at = bisect.bisect_left(hub_weight, rng.random() * hub_weight[-1])
                target = f"Note {hubs[min(at, n - 1)]:05d}"
            else:
                target = f"Note {rng.randrange(n):05d}"
            body.insert(rng.randrange(len(body) + 1), f"[[{target}]]")
        lines, sentence = [], []
        for j, w in enumerate(body):
            sentence.append(w)
            if len(sentence) >= rng.randint(8, 20) or j == len(body) - 1:
                lines.append(" ".join(sentence) + ".")
                sentence = []
        for h in range(n_heads):  # headings spread through the note
            at = rng.randrange(len(lines) + 1)
            lines.insert(at, f"\n## {' '.join(text(rng.randint(1, 4))).title()} {h}\n")
        chosen = sorted({rng.choice(tags) for _ in range(n_tags)})
        front = ""
        if rng.random() < kind["frontmatter"]:  # type: ignore[operator]
            front = f"---\ntags: [{', '.join(chosen)}]\ntype: {kinds[i]}\n---\n"
        elif chosen:
            lines.append(" ".join(f"#{t}" for t in chosen))
        rel = f"{folders[i]}/Note {i:05d}.md" if folders[i] else f"Note {i:05d}.md"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{front}# Note {i}\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
        paths.append(rel)
    return paths


def _flat(root: Path, n: int, rng: random.Random) -> list[str]:
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


def generate(root: Path, n: int, seed: int = 7, shape: str = "real") -> list[str]:
    """Write ``n`` notes under ``root``; the relative paths, in note order."""
    rng = random.Random(seed)
    return (_flat if shape == "flat" else _real)(root, n, rng)


# -- the side-by-side profile -------------------------------------------------------------

_LINK = re.compile(r"\[\[([^\]|#\n]+)")
_HEAD = re.compile(r"^#{2,6} ", re.M)
_TAG = re.compile(r"(?<![\w/])#([A-Za-z][\w/-]*)")


def _front_tags(front: str) -> int:
    """Tags a frontmatter block lists (``tags: [a, b]`` or ``tags:`` and ``- a`` lines)."""
    m = re.search(r"^tags:[ \t]*(.*)$((?:\n[ \t]*- .*)*)", front, re.M)
    if not m:
        return 0
    inline = [x for x in re.split(r"[,\[\] ]+", m.group(1)) if x.strip()]
    return len(inline) + m.group(2).count("\n")


def profile(root: Path) -> dict[str, list[int]]:
    """Per note: words, links, headings, tags, in-degree, folder depth; per folder: notes."""
    notes = list(root.rglob("*.md"))
    out: dict[str, list[int]] = collections.defaultdict(list)
    indeg: collections.Counter[str] = collections.Counter()
    folders: collections.Counter[Path] = collections.Counter()
    front = 0
    for p in notes:
        t = p.read_text(errors="replace")
        body = t
        if t.startswith("---\n") and (end := t.find("\n---", 4)) > 0:
            front += 1
            body = t[end + 4 :]
        links = _LINK.findall(body)
        indeg.update(link.strip().split("/")[-1].lower() for link in links)
        out["words"].append(len(body.split()))
        out["links"].append(len(links))
        out["headings"].append(len(_HEAD.findall(body)))
        out["tags"].append(len(set(_TAG.findall(body))) + _front_tags(t[: len(t) - len(body)]))
        out["folder depth"].append(len(p.relative_to(root).parts) - 1)
        folders[p.parent] += 1
    out["in-degree"] = [indeg.get(p.stem.lower(), 0) for p in notes]
    out["notes a folder"] = list(folders.values())
    out["frontmatter %"] = [round(100 * front / max(len(notes), 1))]
    return out


def _row(values: list[int]) -> str:
    s = sorted(values)

    def pct(q: float) -> int:
        return s[min(int(q * len(s)), len(s) - 1)]

    mean = sum(s) / len(s)
    return f"{mean:7.1f} {pct(0.1):>4} {pct(0.5):>5} {pct(0.9):>5} {pct(0.99):>6} {s[-1]:>6}"


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    args = ap.parse_args()
    columns: dict[str, dict[str, list[int]]] = {}
    for name in REAL_VAULTS:
        if (SHARED / name).is_dir():
            columns[name] = profile(SHARED / name)
    for shape in ("real", "flat"):
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp), args.n, shape=shape)
            columns[f"generated {shape} ({args.n})"] = profile(Path(tmp))
    print("metric           vault                         mean  p10   p50   p90    p99    max")
    for metric in next(iter(columns.values())):
        for name, prof in columns.items():
            print(f"{metric:16} {name:27} {_row(prof[metric])}")
        print()
    if len(columns) < 4:
        print("(the shared vaults are absent: only the generated shapes)", file=sys.stderr)


if __name__ == "__main__":
    main()
