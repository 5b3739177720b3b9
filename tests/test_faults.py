"""Faults a laptop has: after each, wikid keeps serving (or stops with one clear line),
loses nothing, writes nothing into the vault, and ends equal to a fresh build. Real
daemon processes, real files, the real store and model."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from daemontools import DaemonProc, copy_example


def _sums(vault: Path) -> dict[str, str]:
    return {
        str(p.relative_to(vault)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(vault.rglob("*"))
        if p.is_file()
    }


def _export(workdir: Path) -> dict[str, object]:
    cmd = [sys.executable, "-m", "wikid", "export", "--workdir", str(workdir)]
    out = subprocess.run(cmd, capture_output=True, timeout=120, check=True).stdout
    data: dict[str, object] = json.loads(out)
    return data


def test_a_garbled_store_is_moved_aside_and_rebuilt_from_the_vault(tmp_path: Path) -> None:
    """The first 8 KiB of the store's SQLite file overwritten while wikid was stopped:
    the next start moves the file aside (never deletes it), says where in one log line,
    rebuilds the store from the vault and serves; the store equals the one before."""
    vault = copy_example(tmp_path / "v")
    sums = _sums(vault)
    d = DaemonProc(vault, tmp_path).start()
    assert d.stop() == 0
    before = _export(d.workdir)
    (store,) = d.workdir.glob("*/wikid-store.sqlite")
    damaged = bytearray(store.read_bytes())
    damaged[:8192] = b"\xa5" * 8192
    store.write_bytes(damaged)

    d.start()
    (moved,) = store.parent.glob("wikid-store.sqlite.damaged-*")
    assert moved.read_bytes()[:8192] == b"\xa5" * 8192  # the user's file, kept as it was
    log = d.log.read_text()
    assert "moved aside" in log and str(moved) in log and "Traceback" not in log
    ev = d.call("query", text="Who wrote the first program?", budget=800)
    assert "People/Ada Lovelace.md" in ev["notes"]
    assert d.stop() == 0
    assert _export(d.workdir) == before
    assert _sums(vault) == sums  # nothing written into the vault
