"""Heap hygiene: what a cold start keeps for a while is out of the cyclic collector's
way, and is still freed when it is done with.

Why it matters: a full collection holds the GIL in whichever thread runs it, so the
event loop (``status``, queries) waits for it. Real store, real model, real files.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import weakref
from pathlib import Path
from typing import Any

import pytest
from storetools import unique_workspace

from wikid.sync import sink as sink_module
from wikid.sync.index import Index

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"


def test_a_slice_s_records_are_frozen_while_it_embeds_and_freed_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold start's slice is planned a slice ahead and written after its texts embed:
    its records must not be walked by every full collection meanwhile (the cold
    start's loop stalls), nor kept once written (frozen objects are still freed by
    reference counting)."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    monkeypatch.setattr(sink_module, "SLICE_KEYS", 4)
    seen: list[bool] = []
    written: list[weakref.ref[Any]] = []

    async def run() -> None:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace())
        try:
            write_slice = idx.sink._write

            async def checked(planned: Any, searched: set[str]) -> None:
                tracked = gc.get_objects()  # every generation, not the frozen objects
                seen.append(any(o is planned for o in tracked))
                del tracked
                written.append(weakref.ref(planned))
                await write_slice(planned, searched)

            monkeypatch.setattr(idx.sink, "_write", checked)
            await idx.sync()
        finally:
            await idx.close()

    asyncio.run(run())
    assert len(seen) > 3 and not any(seen)
    assert all(ref() is None for ref in written)
