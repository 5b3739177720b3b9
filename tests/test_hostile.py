"""Hostile input and hostile clients, against a real ``wikid run`` process.

Every case is built in a temp dir. For each, the test checks: the daemon stays
up; ``status`` answers within a second all along (a thread polls it); the bad
note is reported and every good note indexed; no byte of the files outside the
vault reaches any file of the store; and afterwards a normal edit is visible
within two seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daemontools import DaemonProc
from graphtools import write

from wikid.client import request
from wikid.server.protocol import MAX_CLIENTS, listen

MARKER = "OUTSIDE-MARKER-5e1f"
GOOD = [f"Good {i}.md" for i in range(5)]
BOMB = (
    '---\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\nbody [[Good 0]]\n"
)
KEYS = "---\n" + "".join(f"k{i}: [[n{i}]]\n" for i in range(16_000)) + "---\nbody\n"
REPEATED = "\n\n".join(["The same paragraph of words repeated again and again."] * 35_000)


def _vault(tmp: Path) -> Path:
    vault = tmp / "vault"
    for i, name in enumerate(GOOD):
        write(vault, name, f"# Good {i}\nLinks to [[Good {(i + 1) % len(GOOD)}]].\n")
    outside = tmp / "outside"
    write(outside, "secret.md", f"{MARKER} the user's private text\n")
    write(outside, "folder/deep.md", f"{MARKER} deeper\n")
    return vault


class StatusProbe:
    """Polls ``status`` from a thread; the slowest reply is what the test bounds."""

    def __init__(self, sock: Path) -> None:
        self.sock, self.worst, self.last = sock, 0.0, {}
        self.replies, self.errors = 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.last = request(self.sock, "status", timeout=30)
                self.replies += 1
            except Exception as exc:  # the test fails on any, after the case
                self.errors.append(repr(exc))
            self.worst = max(self.worst, time.monotonic() - started)
            time.sleep(0.05)

    def check(self) -> None:
        assert not self.errors and self.replies > 0, self.errors[:3]
        assert self.worst < 1.0, f"status took {self.worst:.2f} s"

    def __enter__(self) -> StatusProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _wait(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := what():
            return result
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _edit_is_visible_quickly(d: DaemonProc, n: int) -> None:
    target = f"Fresh {n}"
    started = time.monotonic()
    with open(d.vault / GOOD[0], "a", encoding="utf-8") as fh:
        fh.write(f"\nNow also [[{target}]].\n")
    _wait(
        lambda: any(
            e["target"] == f"ghost:{target}" for e in d.call("links", note=GOOD[0])["links"]
        ),
        timeout=10,
    )
    assert time.monotonic() - started < 2.0


def _no_outside_bytes(tmp: Path) -> None:
    for root in (tmp / "wd", tmp / "data"):
        for p in root.rglob("*") if root.exists() else ():
            if p.is_file():
                assert MARKER.encode() not in p.read_bytes(), f"outside text in {p}"


@contextmanager
def _daemon(tmp: Path, vault: Path, **env: str) -> Iterator[DaemonProc]:
    d = DaemonProc(vault, tmp, env=env).start()
    try:
        yield d
    finally:
        assert d.proc is not None and d.proc.poll() is None, "the daemon died"
        assert d.stop() == 0
        log = d.log.read_text(errors="replace")
        assert "Traceback" not in log and "CancelledError" not in log, log[-2000:]


def _mkfifo(vault: Path) -> str:
    os.mkfifo(vault / "pipe.md")
    return "pipe.md"


def _bad_name(vault: Path) -> str:
    fd = os.open(os.fsencode(vault) + b"/bad\xff name.md", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"text [[Good 1]]\n")
    os.close(fd)
    return "bad\\xff name.md"


# name -> (make it in the vault: returns the path reported, the reason's words)
CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    "symlinked note out": (
        lambda v: (v / "leak.md").symlink_to(v.parent / "outside" / "secret.md") or "leak.md",
        "symlink leads outside the vault",
    ),
    "symlinked folder out": (
        lambda v: (
            (v / "shared").symlink_to(v.parent / "outside", target_is_directory=True) or "shared"
        ),
        "symlink leads outside the vault",
    ),
    "dangling symlink": (
        lambda v: (v / "gone.md").symlink_to(v.parent / "nowhere.md") or "gone.md",
        "dangling symlink",
    ),
    "non-UTF-8 name": (_bad_name, "not valid UTF-8"),
    "alias bomb": (lambda v: write(v, "bomb.md", BOMB) or "bomb.md", "expands to over"),
    "16k keys": (lambda v: write(v, "keys.md", KEYS) or "keys.md", "frontmatter keys"),
    "FIFO": (_mkfifo, "not a regular file"),
}


def test_hostile_files_appearing_while_the_daemon_runs(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with (
        _daemon(tmp_path, vault, WIKID_RECONCILE_INTERVAL_S="1") as d,
        StatusProbe(d.socket) as probe,
    ):
        for n, (name, (make, why)) in enumerate(CASES.items()):
            path = make(vault)
            found = _wait(lambda path=path: probe.last.get("rejected", {}).get(path))
            assert why in found, (name, found)
            d.settle(quiet=0.3)  # the case is processed (its batch written)
            _edit_is_visible_quickly(d, n)
        write(vault, "big.md", REPEATED)  # 2 MB of one paragraph: linear now
        _wait(lambda: "big.md" in {x["id"] for x in d.call("graph")["nodes"]})
        d.settle(quiet=0.3)
        _edit_is_visible_quickly(d, 99)
        probe.check()
        nodes = {x["id"] for x in d.call("graph")["nodes"]}
        assert set(GOOD) <= nodes
    _no_outside_bytes(tmp_path)


def test_hostile_files_present_at_start(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    reported = {name: make(vault) for name, (make, _) in CASES.items()}
    write(vault, "big.md", REPEATED)
    d = DaemonProc(vault, tmp_path).start(wait=False)
    try:
        _wait(d.socket.exists)
        with StatusProbe(d.socket) as probe:
            status = d.wait_ready()
            for name, (_, why) in CASES.items():
                assert why in status["rejected"][reported[name]], name
        probe.check()
        _edit_is_visible_quickly(d, 1)
    finally:
        d.stop()
    _no_outside_bytes(tmp_path)


def test_allowed_outside_folders_are_read(tmp_path: Path) -> None:
    from wikid.core.graph import VaultGraph
    from wikid.core.vault import VaultOptions

    vault = _vault(tmp_path)
    (vault / "shared").symlink_to(tmp_path / "outside", target_is_directory=True)
    (vault / "leak.md").symlink_to(tmp_path / "outside" / "secret.md")
    refused = VaultGraph.load(vault)
    assert "shared/secret.md" not in refused.notes
    assert "leak.md" in refused.problems
    allowed = VaultGraph.load(vault, VaultOptions(allow_outside=(str(tmp_path / "outside"),)))
    assert {"shared/secret.md", "shared/folder/deep.md", "leak.md"} <= set(allowed.notes)
    assert MARKER in allowed.notes["leak.md"].body


def test_socket_path_that_is_a_file_is_left_alone(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o755)
    victim = folder / "important.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    victim.chmod(0o640)
    proc = subprocess.run(
        [sys.executable, "-m", "wikid", "run", "--vault", str(vault), "--socket", str(victim)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert proc.returncode != 0
    assert "not a socket" in proc.stderr and "Traceback" not in proc.stderr
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o640
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755


def test_a_second_daemon_refuses_a_live_socket_and_a_busy_store(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with _daemon(tmp_path, vault) as d:
        same_socket = subprocess.run(
            [*d.argv(), "--socket", str(d.socket)], capture_output=True, text=True, env=d.env
        )
        assert same_socket.returncode != 0 and "already running" in same_socket.stderr
        other = tmp_path / "run" / "wikid" / "other.sock"
        same_store = subprocess.run(
            [*d.argv(), "--socket", str(other)], capture_output=True, text=True, env=d.env
        )
        assert same_store.returncode != 0 and "is writing the store" in same_store.stderr
        assert "Traceback" not in same_store.stderr + same_socket.stderr
        for refused in (same_socket, same_store):  # one line, a usage error's exit code
            assert refused.returncode == 2, refused.returncode
            assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert d.call("status")["ready"]
        _edit_is_visible_quickly(d, 1)


def test_a_flood_of_idle_connections_starves_nobody(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    vault = _vault(tmp_path)
    log_before = 0
    with _daemon(tmp_path, vault) as d:
        log_before = d.log.stat().st_size
        idle = []
        try:
            for _ in range(1100):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                for _ in range(200):  # a full listen backlog answers EAGAIN: wait, retry
                    try:
                        s.connect(str(d.socket))
                        break
                    except BlockingIOError:
                        time.sleep(0.01)
                idle.append(s)
            started = time.monotonic()
            assert d.call("status")["ready"]
            assert time.monotonic() - started < 1.0
            _edit_is_visible_quickly(d, 1)
        finally:
            for s in idle:
                s.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert not d.call("status")["rejected"]
    assert d.log.stat().st_size - log_before < 200_000


def test_connections_that_are_closing_hold_no_slot(tmp_path: Path) -> None:
    """Many clients leave at once, and the next one arrives in the same loop turn: the
    leaving connections, still closing, must not count against MAX_CLIENTS (CI once got
    "busy: 64 requests are in progress" right after the flood above closed its sockets)."""

    async def main() -> list[dict[str, Any]]:
        async def dispatch(op: Any, req: dict[str, Any], emit: Any) -> tuple[Any, bool]:
            return op, False

        path = tmp_path / "s.sock"
        listener = await listen(path, dispatch, lambda: None)
        replies = []
        try:
            for _ in range(10):
                clients = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(64)]
                for c in clients:
                    c.connect(str(path))
                while len(listener.idle) < MAX_CLIENTS:
                    await asyncio.sleep(0.001)
                for c in clients:  # no await between these closes and the next connect
                    c.close()
                reader, writer = await asyncio.open_unix_connection(str(path))
                writer.write(b'{"id": 1, "op": "ping"}\n')
                replies.append(json.loads(await reader.readline()))
                writer.close()
                while listener.active:
                    await asyncio.sleep(0.001)
        finally:
            await listener.close()
        return replies

    replies = asyncio.run(main())
    assert [r.get("result") for r in replies] == ["ping"] * 10, replies


def test_a_client_waits_out_a_full_listen_backlog(tmp_path: Path) -> None:
    """A Unix socket whose backlog is full refuses a connect with EAGAIN at once; the
    client retries until its timeout instead of failing (or printing a traceback)."""
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    queued = []
    for _ in range(64):  # fill the backlog
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(str(path))
        except BlockingIOError:
            c.close()
            break
        queued.append(c)

    def serve_late() -> None:
        time.sleep(0.3)
        for c in queued:  # these send nothing: accepted, they read as closed
            c.close()
        server.settimeout(5)  # should the client have given up, do not wait forever
        for _ in range(len(queued) + 1):
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn:
                line = conn.makefile("rb").readline()
                if line:
                    conn.sendall(b'{"id": 1, "ok": true, "result": "late"}\n')
                    return

    thread = threading.Thread(target=serve_late)
    thread.start()
    try:
        assert request(path, "status", timeout=10) == "late"
    finally:
        thread.join()
        server.close()


def _raw(sock: Path, line: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(sock))
        s.sendall(line + b"\n")
        data = s.makefile("rb").readline()

    def refuse(name: str) -> Any:
        raise ValueError(f"reply holds {name}")

    reply: dict[str, Any] = json.loads(data, parse_constant=refuse)
    return reply


def test_protocol_corners_get_strict_replies(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with _daemon(tmp_path, vault) as d:
        deep = _raw(d.socket, b'{"op": "status", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        assert deep["error"]["code"] == "bad_json"
        assert (
            _raw(d.socket, b'{"id": 1, "op": "search", "text": "x", "k": "abc"}')["error"]["code"]
            == "bad_request"
        )
        assert _raw(d.socket, b'{"id": NaN, "op": "status"}')["error"]["code"] == "bad_json"
        odd = _raw(d.socket, b'{"id": {"a": 1}, "op": "status"}')
        assert odd["id"] is None and odd["error"]["code"] == "bad_request"
        assert _raw(d.socket, b'{"id": 1e400, "op": "status"}')["error"]["code"] == "bad_request"
        assert _raw(d.socket, b'{"id": "ok", "op": "status"}')["ok"]
        _edit_is_visible_quickly(d, 1)


def test_a_vanished_vault_pauses_and_removes_nothing(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with _daemon(tmp_path, vault, WIKID_RECONCILE_INTERVAL_S="0.5") as d:
        before = d.call("status")
        away = tmp_path / "vault-away"
        vault.rename(away)
        missing = _wait(lambda: (s := d.call("status"))["vault_missing"] and s)
        assert "vault missing" in missing["phase"]
        assert (missing["notes"], missing["entities"]) == (before["notes"], before["entities"])
        away.rename(vault)
        back = _wait(lambda: not (s := d.call("status"))["vault_missing"] and s)
        assert back["notes"] == before["notes"]
        _edit_is_visible_quickly(d, 1)


def test_repeated_warnings_are_rate_limited() -> None:
    import structlog

    from wikid.server.log import REPEAT_MAX, RateLimit

    limit = RateLimit()
    for _ in range(REPEAT_MAX):
        assert limit(None, "warning", {"event": "cannot read"})
    for _ in range(3):
        try:
            limit(None, "warning", {"event": "cannot read"})
        except structlog.DropEvent:
            continue
        raise AssertionError("a repeated warning got through")
    assert limit(None, "warning", {"event": "another"})  # other events are not held back
    assert limit(None, "info", {"event": "cannot read"})  # nor info lines
