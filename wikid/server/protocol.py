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
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

MAX_REQUEST = 1 << 20  # bytes in one request line
log = structlog.get_logger("wikid")

Emit = Callable[[str], None]
Dispatch = Callable[[Any, dict[str, Any], Emit], Awaitable[tuple[Any, bool]]]


class ProtocolError(Exception):
    """An error reply: ``code`` for programs, the message for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


async def listen(path: Path, dispatch: Dispatch, on_stop: Callable[[], None]) -> asyncio.Server:
    """Serve ``dispatch`` on a socket only this user can open (0600 in a 0700 folder).
    A stale socket left by a crash is replaced; a live one means another daemon."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise SystemExit(f"another wikid daemon already listens on {path}")
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink()  # a stale socket from a crash
        finally:
            probe.close()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _serve(reader, writer, dispatch, on_stop)

    old = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(client, path=str(path), limit=MAX_REQUEST)
    finally:
        os.umask(old)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return server


async def _serve(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatch: Dispatch,
    on_stop: Callable[[], None],
) -> None:
    try:
        while not reader.at_eof():
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                await _send(writer, None, error=("too_large", f"request over {MAX_REQUEST} bytes"))
                # Half-close, then drain what the client still sends (bounded), so the
                # close does not reset the connection and lose the reply.
                writer.write_eof()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(_discard(reader, 64 * MAX_REQUEST), timeout=5)
                break
            if not line.strip():
                continue
            reply = await handle(line, dispatch, writer)
            await _send(writer, reply.get("id"), **reply)
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
        req = json.loads(line)
        if not isinstance(req, dict):
            raise ValueError("a request is a JSON object")
        rid = req.get("id")
    except (ValueError, UnicodeDecodeError) as exc:
        return {"id": None, "error": ("bad_json", f"malformed request: {exc}")}
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
    writer.write(json.dumps(msg, ensure_ascii=False, default=str).encode() + b"\n")
    await writer.drain()


async def _discard(reader: asyncio.StreamReader, limit: int) -> None:
    while limit > 0 and (chunk := await reader.read(1 << 16)):
        limit -= len(chunk)
