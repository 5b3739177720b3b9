"""A real daemon process on a temp vault: watcher, socket, store, recovery."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from daemontools import DaemonProc, copy_example
from graphtools import delete, move, write
from storetools import assert_same_store, fresh_export, ledger_path

from wikid.core.edges import to_json
from wikid.core.graph import VaultGraph
from wikid.store.export import export_workdir


@pytest.fixture
def daemon(tmp_path: Path) -> Any:
    d = DaemonProc(copy_example(tmp_path / "vault"), tmp_path).start()
    yield d
    d.stop()


def _targets(d: DaemonProc, note: str) -> set[str]:
    return {e["target"] for e in d.call("links", note=note)["links"]}


def test_a_new_link_shows_within_two_seconds(daemon: DaemonProc) -> None:
    with open(daemon.vault / "People" / "Ada Lovelace.md", "a", encoding="utf-8") as fh:
        fh.write("\nShe also inspired [[Zettelkasten]].\n")
    deadline = time.monotonic() + 2.0
    while "Ideas/Zettelkasten.md" not in _targets(daemon, "Ada Lovelace"):
        assert time.monotonic() < deadline, "link not visible within 2 s"
        time.sleep(0.05)


def test_status_reports_counts_and_rejected_notes(daemon: DaemonProc) -> None:
    (daemon.vault / "broken.md").write_bytes(b"\x00\x01binary\x00garbage")
    daemon.settle()
    s = daemon.call("status")
    assert s["notes"] == 7 and s["entities"] > 0 and s["chunks"] > 0 and s["llm_calls"] == 0
    assert "binary" in s["rejected"]["broken.md"]
    assert s["store"]["backend"] == "sqlite" and s["embedding_model"].startswith("all-MiniLM")
    searched = s["store"]["vector_search"]  # a small vault: every namespace scanned
    assert searched["chunks"] == {
        "rows": s["chunks"],
        "by": "scan",
        "changed_since_graph": 0,
        "building": 0,
        "due": 0,
    }
    assert set(searched) == {"chunks", "entities", "relationships"}
    assert {b["target"] for b in daemon.call("broken")["broken"]} == {"Charles Babbage"}
    assert daemon.call("backlinks", note="Welcome")["backlinks"]
    graph = daemon.call("graph")
    assert graph == to_json(VaultGraph.load(daemon.vault).g)


def test_rename_is_followed_and_leaves_no_ghost(daemon: DaemonProc) -> None:
    # As Obsidian does it: the file moves and the links to it are rewritten.
    move(daemon.vault, "Ideas/Graph RAG.md", "Ideas/Graph Retrieval.md")
    for rel in (
        "Welcome.md",
        "Projects/wikid.md",
        "People/Ada Lovelace.md",
        "Ideas/Analytical Engine.md",
    ):
        text = (daemon.vault / rel).read_text("utf-8").replace("[[Graph RAG", "[[Graph Retrieval")
        write(daemon.vault, rel, text)
    daemon.settle()
    assert "Ideas/Graph Retrieval.md" in _targets(daemon, "Welcome")
    daemon.stop()
    data = asyncio.run(export_workdir(daemon.workdir))
    names = {e["name"] for e in data["entities"]}
    assert "Graph Retrieval" in names and "Graph RAG" not in names
    assert not any("Graph RAG.md" in d["file_path"] for d in data["documents"])
    assert_same_store(data, asyncio.run(fresh_export(daemon.vault)))


def test_a_deleted_note_leaves_graph_and_store(daemon: DaemonProc) -> None:
    delete(daemon.vault, "Projects/wikid.md")
    daemon.settle()
    graph = daemon.call("graph")
    assert "Projects/wikid.md" not in {n["id"] for n in graph["nodes"]}
    daemon.stop()
    data = asyncio.run(export_workdir(daemon.workdir))
    assert not any(c["file_path"] == "Projects/wikid.md" for c in data["chunks"])
    assert not any("Projects/wikid.md" in e["file_paths"] for e in data["entities"])
    assert_same_store(data, asyncio.run(fresh_export(daemon.vault)))


def test_folder_move_and_a_git_checkout_burst_equal_a_fresh_build(tmp_path: Path) -> None:
    vault = tmp_path / f"bulk_{tmp_path.name}"
    for i in range(50):
        write(vault, f"moving/n{i}.md", f"Note {i} links to [[n{(i + 1) % 50}]] and [[hub]].\n")
    write(vault, "hub.md", "The hub links to [[moving/n0]].\n")
    d = DaemonProc(vault, tmp_path).start()
    try:
        move(vault, "moving", "moved/deeper")
        d.settle()
        for i in range(2000):  # a checkout: many files appear and change at once
            write(
                vault,
                f"burst/b{i // 100}/c{i}.md",
                f"Checkout note {i}: see [[c{(i * 7) % 2000}]] #burst\n",
            )
        d.settle(timeout=600, quiet=2.0)
        assert d.call("graph") == to_json(VaultGraph.load(vault).g)
    finally:
        d.stop()
    ledger = ledger_path(d.workdir)
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)),
        asyncio.run(fresh_export(vault, seed_vectors=ledger)),
    )


def test_sigkill_mid_batch_then_offline_edits_converge(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    d = DaemonProc(vault, tmp_path).start()
    for i in range(300):
        write(vault, f"new/n{i}.md", f"New note {i} about [[Welcome]] and [[n{i + 1}]].\n")
    time.sleep(1.0)  # the batch is under way
    d.kill()
    write(vault, "Welcome.md", "Rewritten while the daemon was down: [[Fresh Idea]].\n")
    delete(vault, "Ideas/Zettelkasten.md")
    d.start()
    d.settle()
    d.stop()
    ledger = ledger_path(d.workdir)
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)),
        asyncio.run(fresh_export(vault, seed_vectors=ledger)),
    )


def _raw(sock_path: Path, payload: bytes, read: bool = True) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(sock_path))
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon answered and hung up before reading it all (a too-large request)
        if not read:
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_socket_survives_abuse(daemon: DaemonProc) -> None:
    mode = os.stat(daemon.socket).st_mode
    assert (
        stat.S_IMODE(mode) == 0o600 and stat.S_IMODE(os.stat(daemon.socket.parent).st_mode) == 0o700
    )
    replies = [
        json.loads(line)
        for line in _raw(daemon.socket, b"\x00\xff garbage\n{not json\n[1,2]\n").splitlines()
    ]
    assert [r["error"]["code"] for r in replies] == ["bad_json", "bad_json", "bad_json"]
    unknown = json.loads(_raw(daemon.socket, b'{"id": 7, "op": "explode"}\n'))
    assert (
        unknown == {"id": 7, "ok": False, "error": unknown["error"]}
        and unknown["error"]["code"] == "unknown_op"
    )
    big = json.loads(
        _raw(daemon.socket, b'{"id": 1, "op": "status", "pad": "' + b"x" * 10_000_000 + b'"}\n')
    )
    assert big["error"]["code"] == "too_large"
    half_open = []
    for _ in range(20):  # clients that connect, send half a line and go quiet
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(daemon.socket))
        s.sendall(b'{"id": 1, "op": "sta')
        half_open.append(s)
    results: list[Any] = []

    def client() -> None:
        results.append(daemon.call("status")["notes"])

    threads = [threading.Thread(target=client) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [6] * 50
    for s in half_open:
        s.close()
    assert daemon.call("status")["notes"] == 6


def test_notify_protocol_ready_and_status(tmp_path: Path) -> None:
    addr = tmp_path / "notify.sock"
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(str(addr))
    sink.settimeout(120)
    d = DaemonProc(
        copy_example(tmp_path / "vault"), tmp_path, env={"NOTIFY_SOCKET": str(addr)}
    ).start(wait=False)
    messages: list[str] = []
    try:
        while not any("STATUS=watching 6 notes" in m for m in messages):
            messages.append(sink.recv(4096).decode())
        d.wait_ready()
    finally:
        d.stop()
        sink.close()
    assert any(m.startswith("STATUS=") for m in messages)
    # READY=1 as soon as links and search answer (the store may still be embedding),
    # then the status of the finished first sync.
    readies = [m for m in messages if "READY=1" in m]
    assert "links and search are ready" in readies[0]
    assert "STATUS=watching 6 notes" in readies[-1]


def test_client_says_how_to_start_a_daemon(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wikid",
            "status",
            "--vault",
            str(tmp_path),
            "--socket",
            str(tmp_path / "none.sock"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    assert "no wikid daemon is running" in proc.stderr and "wikid run --vault" in proc.stderr


def test_atomic_save_swap_files_and_case_only_rename(daemon: DaemonProc) -> None:
    vault = daemon.vault
    tmp = vault / "Welcome.md.tmp"  # an editor's atomic save: write a temp file, rename over
    tmp.write_text(
        "# Welcome\n\nSaved atomically, now linking [[Graph RAG]] only.\n", encoding="utf-8"
    )
    os.replace(tmp, vault / "Welcome.md")
    (vault / ".Welcome.md.swp").write_bytes(b"vim swap")  # never vault content
    (vault / "Ideas" / "Zettelkasten.md").rename(vault / "Ideas" / "zettelkasten.md")
    daemon.settle()
    assert daemon.call("graph") == to_json(VaultGraph.load(vault).g)
    assert _targets(daemon, "Welcome") == {"Ideas/Graph RAG.md"}
    ids = {n["id"] for n in daemon.call("graph")["nodes"]}
    assert "Ideas/zettelkasten.md" in ids and "Ideas/Zettelkasten.md" not in ids
    assert not any("swp" in i or i.endswith(".tmp") for i in ids)


def test_an_overflowing_queue_becomes_one_full_rescan(tmp_path: Path) -> None:
    d = DaemonProc(
        copy_example(tmp_path / "vault"), tmp_path, env={"WIKID_MAX_QUEUE": "10"}
    ).start()
    try:
        for i in range(60):
            write(d.vault, f"flood/f{i}.md", f"Flood {i} [[Welcome]]\n")
        d.settle()
        assert d.call("graph") == to_json(VaultGraph.load(d.vault).g)
        assert d.call("status")["notes"] == 66
    finally:
        d.stop()


def test_sigterm_exits_cleanly_and_removes_the_socket(tmp_path: Path) -> None:
    d = DaemonProc(copy_example(tmp_path / "vault"), tmp_path).start()
    assert d.proc is not None
    d.proc.send_signal(15)
    assert d.proc.wait(timeout=60) == 0
    assert not d.socket.exists()


def test_sighup_reloads_the_config(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    config = tmp_path / "wikid.toml"
    config.write_text(f'[vaults.demo]\npath = "{vault}"\n', encoding="utf-8")
    d = DaemonProc(vault, tmp_path)
    d.extra_args = ["--config", str(config)]
    d.start()
    try:
        assert d.call("status")["notes"] == 6
        config.write_text(
            f'ignore = ["Ideas/"]\n[vaults.demo]\npath = "{vault}"\n', encoding="utf-8"
        )
        assert d.proc is not None
        d.proc.send_signal(1)  # SIGHUP
        deadline = time.monotonic() + 120
        while d.call("status")["notes"] != 3:
            assert time.monotonic() < deadline, "config not reloaded"
            time.sleep(0.2)
        d.settle()
        assert not any(
            n["id"].startswith("Ideas/") for n in d.call("graph")["nodes"] if n["kind"] == "note"
        )
    finally:
        d.stop()
