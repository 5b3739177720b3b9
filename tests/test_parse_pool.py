"""A cold start's read in worker processes (``sync.parse_pool``) gives the graph a read
in process gives, on a real vault; a worker that dies costs time, never a note."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence

from conftest import shared_vault
from structlog.testing import capture_logs

from wikid.core.graph import VaultGraph
from wikid.core.note import Note
from wikid.core.vault import VaultOptions
from wikid.sync import parse_pool
from wikid.testing import assert_same, snapshot


def _same(a: VaultGraph, b: VaultGraph) -> None:
    assert_same(snapshot(a), snapshot(b))
    assert a.notes == b.notes and a.attachments == b.attachments
    assert a.problems == b.problems


def test_a_vault_parsed_in_processes_is_the_vault_parsed_here() -> None:
    vault = shared_vault("vaultofknowledge")
    options = VaultOptions()
    here = VaultGraph.load(vault, options)
    assert len(here.notes) >= parse_pool.MIN_NOTES  # else the pool is not used
    calls: list[int] = []

    def counted(rels: Sequence[str]) -> dict[str, Note | None]:
        got = parse_pool.parse(vault, options, rels)
        calls.append(len(got))
        return got

    pooled = VaultGraph.load(vault, options, parse=counted)
    assert calls == [len(here.notes)]  # every note parsed by the workers
    _same(pooled, here)
    assert parse_pool.parse(vault, options, sorted(here.notes)[:10]) == {}  # too few: here


def test_a_worker_killed_mid_read_costs_no_note() -> None:
    """SIGKILL to a worker as soon as it starts: a warning says how many notes it left,
    and the graph reads those itself: the same graph, and no wait on the dead worker."""
    vault = shared_vault("vaultofknowledge")
    options = VaultOptions()
    here = VaultGraph.load(vault, options)
    killed: list[int] = []

    def kill_a_worker() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for child in multiprocessing.active_children():
                if child.pid:
                    os.kill(child.pid, signal.SIGKILL)
                    killed.append(child.pid)
                    return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    with capture_logs() as logs:
        pooled = VaultGraph.load(vault, options, parse=parse_pool.parser(vault, options))
    killer.join()
    assert killed
    failed = [e for e in logs if e["event"].startswith("parsing in processes left notes")]
    assert len(failed) == 1 and failed[0]["left"] > 0 and -9 in failed[0]["exit_codes"], logs
    _same(pooled, here)
