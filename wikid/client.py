"""Talk to a running daemon over its Unix socket (newline-delimited JSON).

Request ``{"id", "op", ...args}``; reply ``{"id", "ok": true, "result"}`` or
``{"id", "ok": false, "error": {"code", "message"}}``. See docs/protocol.md.
"""

from __future__ import annotations

import itertools
import json
import socket
import time

TYPE_CHECKING = False  # typing's own costs a client call ~4 ms (issue 54)
if TYPE_CHECKING:
    from collections.abc import Callable
    from os import PathLike
    from typing import Any

    SocketPath = str | PathLike[str]

_ids = itertools.count(1)


class DaemonNotRunning(ConnectionError):
    def __init__(self, path: SocketPath, vault: str) -> None:
        super().__init__(
            f"no wikid daemon is running for vault {vault!r} (nothing listens on {path}).\n"
            f"Start one with:  wikid run --vault {vault} --socket {path}"
        )


class RemoteError(RuntimeError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _connect(socket_path: SocketPath, vault: str, timeout: float) -> socket.socket:
    """A connected socket. A Unix socket whose listen backlog is full answers EAGAIN at
    once rather than waiting (a daemon catching up on a burst of clients): retry until
    ``timeout``, as a TCP connect would wait."""
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        while True:
            try:
                sock.connect(str(socket_path))
                return sock
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the daemon on {socket_path} accepts no connection"
                    ) from None
                time.sleep(0.01)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise DaemonNotRunning(socket_path, vault or str(socket_path)) from exc
    except BaseException:
        sock.close()
        raise


def request(
    socket_path: SocketPath,
    op: str,
    /,
    *,
    vault: str = "",
    timeout: float = 60.0,
    on_partial: Callable[[str], Any] | None = None,
    **args: Any,
) -> Any:
    """Send one request; return its result. Lines ``{"id", "partial"}`` that come ahead of
    the reply (a streamed answer) go to ``on_partial``."""
    sock = _connect(socket_path, vault, timeout)
    with sock:
        rid = next(_ids)
        sock.sendall(json.dumps({"id": rid, "op": op, **args}).encode() + b"\n")
        reader = sock.makefile("rb")
        while True:
            line = reader.readline()
            if not line:
                raise ConnectionError("the daemon closed the connection without a reply")
            reply = json.loads(line)
            if "partial" in reply:
                if on_partial is not None:
                    on_partial(reply["partial"])
                continue
            break
    if not reply.get("ok"):
        err = reply.get("error") or {}
        raise RemoteError(err.get("code", "error"), err.get("message", ""))
    return reply.get("result")
