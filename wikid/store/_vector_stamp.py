"""The stamp file beside a vector index's int8 rows (``wikid-vectors-<ns>.npz``): what
lets a restart open the rows instead of decoding every float32 row again.

Why a module of its own: the index answers queries; this is the file format that
carries it across a restart, and the checks that keep a stale or garbled file from
ever being believed. A stamp holds the stamp the caller chose (the store's write
generation and row count), the rows' ids and scales, the digest of the rows' file,
and the graph built over them (its file's digest) with the keys changed since. It is
written atomically once the rows are durable, and read back only while it describes
the rows: the same stamp, as many ids and scales as rows, the same digest.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wikid.store._ann import file_digest

# What a stamp file cut short or garbled raises on reading (it then reads as none).
ERRORS = (
    OSError,
    ValueError,
    KeyError,
    IndexError,
    UnicodeDecodeError,
    EOFError,
    zipfile.BadZipFile,
)


@dataclass(frozen=True)
class Stamped:
    """A stamp file that describes the rows beside it."""

    names: list[bytes]  # the rows' ids, in row order
    scale: np.ndarray  # each row's scale (float32)
    graph: int  # the digest of the graph file built over the rows (0: none)
    dirty: list[int]  # the keys changed since that graph's snapshot
    identity: tuple[int, int]  # the stamp file's (inode, mtime) when it was read


def write(
    stamp_file: Path,
    stamp: tuple[int, ...],
    rows: Path,
    ids: bytes,
    scale: np.ndarray,
    graph: int,
    dirty: list[int],
) -> None:
    """Stamp the rows in ``rows`` (durable already): ``ids`` newline-separated, one a
    row; written to a temporary file and moved over ``stamp_file``."""
    tmp = stamp_file.with_name(stamp_file.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(
            fh,
            stamp=np.asarray(stamp, np.int64),
            scale=scale,
            ids=np.frombuffer(ids, np.uint8),
            digest=np.asarray([file_digest(rows)], np.uint64),
            # The graph, by its file's digest (0: none), and the keys changed since
            # its snapshot: the next start views it and scans those beside it.
            graph=np.asarray([graph], np.uint64),
            dirty=np.fromiter(dirty, np.uint64),
        )
    os.replace(tmp, stamp_file)


def read(stamp_file: Path, rows: Path, dim: int, stamp: tuple[int, ...]) -> Stamped | None:
    """The stamp at ``stamp_file`` if it is ``stamp`` and describes the rows of ``dim``
    int8 values in ``rows``; else None. Raises one of ``ERRORS`` for a file cut short
    or garbled."""
    before = stamp_file.stat()
    with np.load(stamp_file) as f:
        if f["stamp"].tolist() != list(stamp):
            return None
        scale = f["scale"].astype(np.float32)
        text = f["ids"].tobytes()
        digest = int(f["digest"][0])
        graph = int(f["graph"][0]) if "graph" in f else 0
        dirty = f["dirty"].tolist() if "graph" in f else []
    names = text.split(b"\n") if text else []
    n = len(names)
    if scale.shape != (n,) or rows.stat().st_size != n * dim:
        return None
    if digest != file_digest(rows):  # the rows garbled since they were stamped
        return None
    return Stamped(names, scale, graph, dirty, (before.st_ino, before.st_mtime_ns))


def unchanged(stamp_file: Path, stamped: Stamped) -> bool:
    """Whether the stamp file is still the one read (a reader that copied the rows
    meanwhile: the writer may have changed them since)."""
    after = stamp_file.stat()
    return (after.st_ino, after.st_mtime_ns) == stamped.identity
