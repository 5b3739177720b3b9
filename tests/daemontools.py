"""Start a real ``wikid run`` process on a temp vault and talk to it over its socket."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from wikid.client import DaemonNotRunning, request

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"


class DaemonProc:
    def __init__(self, vault: Path, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.vault = vault
        self.tmp = tmp
        self.socket = tmp / "run" / "wikid" / "test.sock"
        self.workdir = tmp / "wd"
        self.env = {
            **os.environ,
            "XDG_RUNTIME_DIR": str(tmp / "run"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "WIKID_DEBOUNCE_MS": "150",
            "WIKID_RECONCILE_INTERVAL_S": "3600",
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []
        self.log = tmp / "daemon.log"

    def argv(self) -> list[str]:
        """``wikid run`` on this vault and working dir (add ``--socket``)."""
        return [
            sys.executable,
            "-m",
            "wikid",
            "run",
            "--vault",
            str(self.vault),
            "--workdir",
            str(self.workdir),
        ]

    def start(self, wait: bool = True, timeout: float = 300) -> DaemonProc:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.argv(), "--socket", str(self.socket), *self.extra_args],
                env=self.env,
                stdout=log,
                stderr=log,
            )
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"daemon exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
                )
            try:
                status = self.call("status")
                if status["ready"]:  # the initial sync is done
                    return status  # type: ignore[no-any-return]
            except (DaemonNotRunning, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"daemon not ready in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def cli(self, *args: str) -> str:
        """Run a ``wikid`` client command against this daemon; its standard output."""
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "wikid",
                *args,
                "--vault",
                str(self.vault),
                "--socket",
                str(self.socket),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=self.env,
        ).stdout

    def call(self, op: str, **args: Any) -> Any:
        return request(self.socket, op, timeout=120, **args)

    def settle(self, timeout: float = 300, quiet: float = 1.0) -> dict[str, Any]:
        """Wait until the queue is empty and no batch has run for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            s = self.call("status")
            key = (s["batches"], s["queue"], s["lag_seconds"] > 0, s["busy"])
            if key != last:
                last, since = key, time.monotonic()
            elif (
                s["queue"] == 0
                and s["lag_seconds"] == 0
                and not s["busy"]
                and time.monotonic() - since >= quiet
            ):
                return s  # type: ignore[no-any-return]
            time.sleep(0.1)
        raise AssertionError("daemon did not settle")

    def wait_for(self, ok: Any, timeout: float = 120) -> dict[str, Any]:
        """Poll ``status`` until ``ok(status)``; the last status on failure."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = self.call("status")
            if ok(status):
                return status
            time.sleep(0.2)
        raise AssertionError(f"status never matched: {status}")

    def wait_for_graphs(self, timeout: float = 600) -> float:
        """Wait until no vector search graph is building or due (``status``'s
        ``store.vector_search``), so that queries are timed on a quiet daemon; the
        seconds waited."""
        t0 = time.monotonic()

        def quiet(s: dict[str, Any]) -> bool:
            spaces = s["store"]["vector_search"].values()
            return not any(v.get("building") or v.get("due") for v in spaces)

        self.wait_for(quiet, timeout)
        return time.monotonic() - t0

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        try:
            self.call("stop")
        except (DaemonNotRunning, ConnectionError, OSError):
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def copy_example(dest: Path) -> Path:
    """A copy of the example vault under a name no other test uses: LightRAG keeps a
    workspace's (= vault folder name's) data in process-wide memory, so an export in
    this process must never meet a workspace name an earlier test opened."""
    dest = dest.with_name(f"{dest.name}_{dest.parent.name}")
    shutil.copytree(EXAMPLE, dest)
    return dest
