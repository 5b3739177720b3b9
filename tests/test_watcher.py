"""The adaptive quiet window, with a real watchdog observer on real files.

The margins are wide (a window of seconds against saves of milliseconds): what
is tested is which rule applies, not how fast it runs.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from wikid.core.vault import VaultFilter
from wikid.server.watcher import QUICK_S, Watcher, quiet_needed


def test_a_short_burst_is_one_save_and_a_long_one_waits_for_the_window() -> None:
    assert quiet_needed(10.0, 10.0, 0.3) == QUICK_S  # one event
    assert quiet_needed(10.0, 10.0 + QUICK_S / 2, 0.3) == QUICK_S  # temp file + rename
    assert quiet_needed(10.0, 10.0 + 2 * QUICK_S, 0.3) == 0.3  # still coming: a burst
    assert quiet_needed(10.0, 10.0, 0.01) == 0.01  # a window shorter than QUICK_S wins


async def _batches(root: Path, window: float, act: object, until: float) -> list[set[str]]:
    watcher = Watcher(root, VaultFilter(root), debounce=window)
    watcher.start(asyncio.get_running_loop())
    got: list[set[str]] = []
    try:
        await asyncio.sleep(0.2)  # the observer is scheduled
        started = time.monotonic()
        task = asyncio.ensure_future(asyncio.to_thread(act))  # type: ignore[arg-type]
        while time.monotonic() - started < until:
            try:
                paths, _ = await asyncio.wait_for(watcher.next_batch(), 0.2)
                got.append(paths)
            except TimeoutError:
                pass
        await task
    finally:
        watcher.stop()
    return got


def test_a_lone_atomic_save_does_not_wait_for_the_window(tmp_path: Path) -> None:
    (tmp_path / "note.md").write_text("old\n", encoding="utf-8")
    seen: list[float] = []

    def save() -> None:
        tmp = tmp_path / ".note.md.tmp"
        tmp.write_text("new [[link]]\n", encoding="utf-8")
        os.replace(tmp, tmp_path / "note.md")
        seen.append(time.monotonic())

    async def run() -> tuple[list[set[str]], float]:
        watcher = Watcher(tmp_path, VaultFilter(tmp_path), debounce=30.0)
        watcher.start(asyncio.get_running_loop())
        try:
            await asyncio.sleep(0.2)
            await asyncio.to_thread(save)
            paths, _ = await asyncio.wait_for(watcher.next_batch(), 20.0)
            return [paths], time.monotonic() - seen[0]
        finally:
            watcher.stop()

    batches, after = asyncio.run(run())
    assert "note.md" in batches[0]
    assert after < 15.0  # well before the 30 s window: the quick rule took it


def test_a_burst_of_saves_coalesces_into_one_batch(tmp_path: Path) -> None:
    names = [f"n{i}.md" for i in range(20)]

    def burst() -> None:  # 20 saves over ~0.4 s: longer than QUICK_S, inside the window
        for name in names:
            (tmp_path / name).write_text(f"{name}\n", encoding="utf-8")
            time.sleep(0.02)

    batches = asyncio.run(_batches(tmp_path, 3.0, burst, until=8.0))
    assert batches and set(names) <= batches[0]


def test_a_save_in_a_folder_names_the_note_not_the_folder(tmp_path: Path) -> None:
    """Watchdog reports the parent folder as modified beside each save, create and
    move in it; a folder in a batch is walked and all its notes are read again. So a
    save, an atomic save and a new note name only their files, while a folder that is
    created or moved in is still named (its notes have no events of their own)."""
    folder = tmp_path / "big"
    folder.mkdir()
    for i in range(5):
        (folder / f"n{i}.md").write_text(f"n{i}\n", encoding="utf-8")
    outside = tmp_path.parent / f"{tmp_path.name}-moved-in"
    outside.mkdir()
    (outside / "m.md").write_text("m\n", encoding="utf-8")

    def act() -> None:
        with open(folder / "n1.md", "a", encoding="utf-8") as fh:
            fh.write("more\n")
        tmp = folder / ".n2.md.tmp"
        tmp.write_text("new\n", encoding="utf-8")
        os.replace(tmp, folder / "n2.md")
        (folder / "new.md").write_text("new\n", encoding="utf-8")
        os.replace(outside, folder / "moved")

    batches = asyncio.run(_batches(tmp_path, 0.5, act, until=3.0))
    seen = set().union(*batches)
    assert {"big/n1.md", "big/n2.md", "big/new.md", "big/moved"} <= seen, seen
    assert "big" not in seen, seen


def test_a_changed_mode_names_the_note_and_the_folder(tmp_path: Path) -> None:
    """A note or a folder made readable again (``chmod``) may change what the vault
    holds: each is named, though no content changed (the kernel is asked only for
    changes, ``watcher.EVENTS``, and attribute changes are among them)."""
    folder = tmp_path / "shut"
    folder.mkdir()
    (folder / "n.md").write_text("n\n", encoding="utf-8")
    (tmp_path / "note.md").write_text("note\n", encoding="utf-8")

    def act() -> None:
        (tmp_path / "note.md").chmod(0o600)
        folder.chmod(0o700)

    batches = asyncio.run(_batches(tmp_path, 0.5, act, until=3.0))
    seen = set().union(*batches)
    assert {"note.md", "shut"} <= seen, seen
