"""The socket protocol: newline-delimited JSON over a Unix socket (docs/protocol.md).

Why apart from the daemon: framing, size limits, malformed input and reply
encoding are the same for every op, and none of it needs the graph. The daemon
gives ``serve`` one coroutine, ``dispatch(op, request, emit)``, that returns
``(result, stop)`` or raises ``ProtocolError`` with a code for the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import socket
import stat
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

import structlog

MAX_REQUEST = 1 << 20  # bytes in one request line
MAX_CLIENTS = 64  # connections at once; past it the longest-idle one is closed
IDLE_S = 60.0  # a connection that sends nothing this long is closed
MAX_DEPTH = 32  # nesting of a request's JSON
log = structlog.get_logger("wikid")

Emit = Callable[[str], None]
Dispatch = Callable[[Any, dict[str, Any], Emit], Awaitable[tuple[Any, bool]]]


def refuse(message: str) -> NoReturn:
    """Stop a start that cannot go on (a daemon already serves this vault or store): one
    line, and exit 2 like any other usage error, so systemd's restarts stop soon."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


class ProtocolError(Exception):
    """An error reply: ``code`` for programs, the message for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Listener:
    """The socket server and the connections it serves, so that a stop closes every
    connection and lets its handler end before the loop does (asyncio would
    otherwise cancel them at shutdown and log a traceback for each)."""

    def __init__(self, dispatch: Dispatch, on_stop: Callable[[], None]) -> None:
        self.dispatch, self.on_stop = dispatch, on_stop
        self.active: dict[asyncio.StreamWriter, asyncio.Task[Any] | None] = {}
        self.idle: dict[asyncio.StreamWriter, None] = {}  # waiting for a request, oldest first
        self.working: set[asyncio.StreamWriter] = set()  # a request of theirs is being served
        self.server: asyncio.Server | None = None

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Only idle and working connections hold a slot. One that is closing (its peer
        # left, or it was evicted) is still in ``active`` until its transport is gone;
        # counting it made a burst of closes answer the next client "busy".
        if len(self.idle) + len(self.working) >= MAX_CLIENTS:
            if not self.idle:  # idle or hostile clients cannot starve the rest
                with contextlib.suppress(Exception):
                    message = f"{MAX_CLIENTS} requests are in progress; retry shortly"
                    await _send(writer, None, error=("busy", message))
                    writer.close()
                return
            oldest = next(iter(self.idle))
            self.idle.pop(oldest)
            oldest.close()
        self.active[writer] = asyncio.current_task()
        try:
            await _serve(reader, writer, self.dispatch, self.on_stop, self.idle, self.working)
        finally:
            self.active.pop(writer, None)
            self.idle.pop(writer, None)
            self.working.discard(writer)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.active):
            writer.close()  # its handler sees the end of the stream and returns
        tasks = [
            t for t in self.active.values() if t is not None and t is not asyncio.current_task()
        ]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)


async def listen(path: Path, dispatch: Dispatch, on_stop: Callable[[], None]) -> Listener:
    """Serve ``dispatch`` on a socket only this user can open (0600). A stale socket
    left by a crash is replaced; a live one means another daemon (SystemExit, one
    line); any other file at that path is never touched."""
    _claim(path)
    listener = Listener(dispatch, on_stop)
    old = os.umask(0o177)
    try:
        listener.server = await asyncio.start_unix_server(
            listener.client, path=str(path), limit=MAX_REQUEST
        )
    finally:
        os.umask(old)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return listener


def _claim(path: Path) -> None:
    """Make ``path`` free for our socket without harming anything of the user's:
    only missing folders are created (0700: they are wikid's), no existing folder is
    re-permissioned, and only a dead socket is removed."""
    folder = path.parent
    missing = [f for f in (folder, *folder.parents) if not os.path.lexists(f)]
    for f in reversed(missing):
        f.mkdir(mode=0o700)
    if not folder.is_dir():
        raise SystemExit(f"wikid: cannot put the socket in {folder}: not a folder")
    if not os.path.lexists(path):
        return
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        refuse(f"wikid: {path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        refuse(f"wikid: already running (a daemon answers on {path})")
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink()  # a stale socket from a crash
    finally:
        probe.close()


async def _serve(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatch: Dispatch,
    on_stop: Callable[[], None],
    idle: dict[asyncio.StreamWriter, None],
    working: set[asyncio.StreamWriter],
) -> None:
    try:
        while not reader.at_eof():
            idle[writer] = None
            try:
                line = await asyncio.wait_for(reader.readline(), IDLE_S)
            except TimeoutError:
                break
            except (ValueError, asyncio.LimitOverrunError):
                await _send(writer, None, error=("too_large", f"request over {MAX_REQUEST} bytes"))
                # Half-close, then drain what the client still sends (bounded), so the
                # close does not reset the connection and lose the reply.
                writer.write_eof()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(_discard(reader, 64 * MAX_REQUEST), timeout=5)
                break
            finally:
                idle.pop(writer, None)
            if not line.strip():
                continue
            working.add(writer)
            try:
                reply = await handle(line, dispatch, writer)
                await _send(writer, reply.get("id"), **reply)
            finally:
                working.discard(writer)
            if reply.get("stop"):
                on_stop()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def handle(
    line: bytes, dispatch: Dispatch, writer: asyncio.StreamWriter | None = None
) -> dict[str, Any]:
    """One request line to one reply: ``{"id", "result", "stop"}`` or ``{"id", "error"}``."""
    rid = None
    try:
        if _too_deep(line):
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        req = json.loads(line, parse_constant=_no_constant)
        if not isinstance(req, dict):
            raise ValueError("a request is a JSON object")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return {"id": None, "error": ("bad_json", f"malformed request: {exc}")}
    rid = req.get("id")
    if not _valid_id(rid):
        return {"id": None, "error": ("bad_request", "id must be a string, a number or null")}
    op = req.get("op")

    def emit(text: str) -> None:  # a piece of a streamed answer, ahead of the reply
        if writer is not None:
            writer.write(
                json.dumps({"id": rid, "partial": text}, ensure_ascii=False).encode() + b"\n"
            )

    try:
        result, stop = await dispatch(op, req, emit)
        return {"id": rid, "result": result, "stop": stop}
    except ProtocolError as exc:
        return {"id": rid, "error": (exc.code, str(exc))}
    except Exception as exc:
        log.error("request failed", op=op, error=repr(exc))
        return {"id": rid, "error": ("internal", f"{type(exc).__name__}: {exc}")}


def _too_deep(line: bytes) -> bool:
    """Nesting deeper than MAX_DEPTH, in one linear pass (brackets inside strings do
    not count); the parser itself would recurse once per level."""
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def whole_number(value: Any, name: str, low: int, high: int, default: int | None = None) -> int:
    """An op's integer argument, or ``bad_request`` naming it and its range (a bool
    is not a number here, though Python counts it as one)."""
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolError("bad_request", f"{name} must be a whole number from {low} to {high}")
    return value


def _valid_id(rid: Any) -> bool:
    if rid is None or isinstance(rid, str):
        return True
    return isinstance(rid, int | float) and not isinstance(rid, bool) and math.isfinite(rid)


async def _send(
    writer: asyncio.StreamWriter,
    rid: Any,
    result: Any = None,
    error: tuple[str, str] | None = None,
    **_: Any,
) -> None:
    if error:
        msg: dict[str, Any] = {
            "id": rid,
            "ok": False,
            "error": {"code": error[0], "message": error[1]},
        }
    else:
        msg = {"id": rid, "ok": True, "result": result}
    try:
        text = json.dumps(msg, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError as exc:  # a NaN in a result: say so, in strict JSON
        failure = {"code": "internal", "message": f"reply is not JSON: {exc}"}
        text = json.dumps({"id": rid, "ok": False, "error": failure})
    writer.write(text.encode() + b"\n")
    await writer.drain()


async def _discard(reader: asyncio.StreamReader, limit: int) -> None:
    while limit > 0 and (chunk := await reader.read(1 << 16)):
        limit -= len(chunk)
