"""Suspend and clock jumps (issue 52, item 4): a save stamped an hour in the past (the
clock stepped back), and a laptop resumed after a day with 200 notes a sync tool changed
while the daemon was frozen. wikid must see every edit, end equal to a fresh build, and
not read the vault again and again afterwards. Real daemons, real files, real store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from daemontools import DaemonProc, copy_example
from storetools import assert_same_store, fresh_export

from wikid.store.export import export_workdir

DAY = 24 * 3600


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    lines = log.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if f'"event": "{name}"' in line]


def _found(d: DaemonProc, word: str) -> set[str]:
    return {h["path"] for h in d.call("search", text=word)["hits"]}


def _set_mtime(path: Path, delta: float) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + delta))


def _same_as_fresh(d: DaemonProc) -> None:
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)), asyncio.run(fresh_export(d.vault))
    )


def _restart_reads_nothing(d: DaemonProc) -> None:
    """A restart with nothing changed reads no file: the past mtimes did not leave a
    note looking changed forever."""
    before = len(_events(d.log, "initial sync"))
    d.start()
    d.settle()
    starts = _events(d.log, "initial sync")
    assert len(starts) == before + 1
    assert starts[-1]["start"] == "parse cache" and starts[-1]["read"] == 0, starts[-1]


def test_a_clock_stepped_back_an_hour_loses_no_edit(tmp_path: Path) -> None:
    """Saves whose mtime is an hour older than the one wikid read: one made while the
    daemon is stopped (same size, so only the mtime tells), one while it runs. Both are
    seen, the store equals a fresh build, and the next restart reads nothing."""
    vault = copy_example(tmp_path / "v")
    d = DaemonProc(vault, tmp_path).start()
    assert d.stop() == 0

    ada = vault / "People" / "Ada Lovelace.md"
    text = ada.read_text(encoding="utf-8")
    old = ada.stat().st_mtime
    changed = text.replace("Lovelace", "Lovelacf", 1)  # the same size
    assert len(changed) == len(text) and changed != text
    ada.write_text(changed, encoding="utf-8")
    os.utime(ada, (old - 3600, old - 3600))  # the clock stepped back before the save
    d.start()
    d.settle()
    assert "People/Ada Lovelace.md" in _found(d, "Lovelacf")

    welcome = vault / "Welcome.md"
    before = welcome.stat().st_mtime
    with open(welcome, "a", encoding="utf-8") as fh:
        fh.write("\nA line about quokkas, written after the clock stepped back.\n")
    os.utime(welcome, (before - 3600, before - 3600))
    d.settle()
    deadline = time.monotonic() + 30
    while "Welcome.md" not in _found(d, "quokkas"):
        assert time.monotonic() < deadline, "the edit with a past mtime was not seen"
        time.sleep(0.1)
    assert d.stop() == 0
    _same_as_fresh(d)
    _restart_reads_nothing(d)
    assert d.stop() == 0


def test_resumed_after_a_day_with_200_notes_changed_while_frozen(tmp_path: Path) -> None:
    """The daemon frozen (SIGSTOP: what a suspended laptop's processes are) while a sync
    tool writes 200 notes, stamped a day ahead and a day behind the clock, and changes
    one the daemon knows. Resumed (SIGCONT), it takes them all in, equals a fresh build,
    does not keep re-reading (no batch once settled), and a restart reads nothing."""
    vault = copy_example(tmp_path / "v")
    d = DaemonProc(vault, tmp_path).start()
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        for i in range(200):
            note = vault / "Synced" / f"Synced {i:03d}.md"
            note.parent.mkdir(exist_ok=True)
            note.write_text(
                f"# Synced {i}\n\nNote {i} about wombat{i} came from the phone. "
                f"See [[Synced {(i + 1) % 200:03d}]] and [[Ada Lovelace]].\n",
                encoding="utf-8",
            )
            _set_mtime(note, DAY if i % 2 else -DAY)
        with open(vault / "Welcome.md", "a", encoding="utf-8") as fh:
            fh.write("\nEdited on the phone: numbat.\n")
        _set_mtime(vault / "Welcome.md", DAY)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    d.wait_for(lambda s: s["notes"] == 206 and s["ready"] and not s["queue"], 300)
    d.settle()
    assert d.call("status")["phase"] == "watching 206 notes"
    assert "Welcome.md" in _found(d, "numbat")
    for i in (0, 57, 199):
        assert f"Synced/Synced {i:03d}.md" in _found(d, f"wombat{i}")
    backlinks = {b["source"] for b in d.call("backlinks", note="Ada Lovelace")["backlinks"]}
    assert {f"Synced/Synced {i:03d}.md" for i in range(200)} <= backlinks

    settled = d.call("status")["batches"]
    time.sleep(3)  # past the racy window: nothing is read again by itself
    assert d.call("status")["batches"] == settled
    assert d.stop() == 0
    _same_as_fresh(d)
    _restart_reads_nothing(d)
    assert d.stop() == 0
