"""Talk to a running daemon over its Unix socket (newline-delimited JSON).

Request ``{"id", "op", ...args}``; reply ``{"id", "ok": true, "result"}`` or
``{"id", "ok": false, "error": {"code", "message"}}``. See docs/protocol.md.
"""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path
from typing import Any

_ids = itertools.count(1)


class DaemonNotRunning(ConnectionError):
    def __init__(self, path: Path, vault: str) -> None:
        super().__init__(
            f"no wikid daemon is running for vault {vault!r} (nothing listens on {path}).\n"
            f"Start one with:  wikid run --vault {vault}\n"
            f"or as a service:  systemctl --user start wikid@{Path(vault).name}"
        )


class RemoteError(RuntimeError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def request(path: Path, op: str, *, vault: str = "", timeout: float = 60.0, **args: Any) -> Any:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise DaemonNotRunning(path, vault or str(path)) from exc
    with sock:
        rid = next(_ids)
        sock.sendall(json.dumps({"id": rid, "op": op, **args}).encode() + b"\n")
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the daemon closed the connection without a reply")
            buf += chunk
    reply = json.loads(buf)
    if not reply.get("ok"):
        err = reply.get("error") or {}
        raise RemoteError(err.get("code", "error"), err.get("message", ""))
    return reply.get("result")
