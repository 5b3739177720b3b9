"""Where a vault's daemon listens, worked out with ``os`` alone.

Why apart from ``config``: a client command (``wikid status``) needs only the daemon's
socket, and importing ``config`` (pathlib, typing's NamedTuple, hashlib) cost a client
call about as much as a bare Python start-up (issue 54: ``wikid status --json`` at
3.2x a bare ``python -c pass``). ``config`` derives its names and default paths from
these functions, so the thin client and the daemon cannot disagree on a socket.
"""

from __future__ import annotations

import os
import re

try:  # the interpreter's own SHA-256: hashlib would load OpenSSL first (~3 ms)
    from _sha2 import sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        from hashlib import sha256


class ConfigError(ValueError):
    """The configuration cannot be used; the message says which key and why. (Here,
    not in ``config``, so that a client call can catch it without importing that.)"""


UNKNOWN = "?"  # the name of a vault a client was not told (``--socket`` alone)


class Where:
    """What a client command needs of the configuration: the vault's path (sent with
    each request, so a daemon can refuse a call meant for another vault), its name
    (for the service's instance name) and the daemon's socket."""

    __slots__ = ("name", "path", "socket")

    def __init__(self, path: str, socket: str, name: str) -> None:
        self.path, self.socket, self.name = path, socket, name


def safe_name(name: str) -> str:
    """Letters, digits and "_" only, as LightRAG's server insists for a workspace."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "vault"


def full_path(path: str) -> str:
    """``~`` expanded, symlinks resolved: one vault has one name however it is given."""
    return os.path.realpath(os.path.expanduser(path))


def workspace_name(vault: str) -> str:
    """A vault's key when no [vaults.NAME] table names it: its folder name and a short
    hash of its full path, so ~/work/Notes and ~/home/Notes never share a store,
    a LightRAG workspace or a socket."""
    path = full_path(vault)
    digest = sha256(os.fsencode(path)).hexdigest()[:8]
    return f"{safe_name(os.path.basename(path))}_{digest}"


def runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR/wikid``, else a private per-user folder under the temp dir."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        return os.path.join(base, "wikid")
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"wikid-{os.getuid()}")


def default_socket(name: str) -> str:
    return os.path.join(runtime_dir(), f"{name}.sock")


def default_config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "wikid", "config.toml")


def socket_alone(socket: str) -> Where:
    """The daemon on ``socket``, its vault not given: the daemon knows which it is."""
    return Where(os.getcwd(), os.path.expanduser(socket), UNKNOWN)


def without_config(vault: str | None, socket: str | None) -> Where | None:
    """The daemon of a vault given by path, when no config file can say otherwise (there
    is none): else None, and the caller reads the configuration in full. The daemon's
    own settings in the environment (``WIKID_DEBOUNCE_MS``, ...) are not a client's
    business; ``WIKID_PATH``, ``WIKID_NAME`` and ``WIKID_SOCKET`` are read here."""
    if os.path.exists(default_config_path()):
        return None
    socket = socket or os.environ.get("WIKID_SOCKET") or None
    vault = vault or os.environ.get("WIKID_PATH") or None
    if vault is None:
        if socket is None:
            return None  # no vault given: config says so, in its words
        return socket_alone(socket)
    path = full_path(vault)
    name = os.environ.get("WIKID_NAME") or workspace_name(path)
    return Where(path, os.path.expanduser(socket or default_socket(safe_name(name))), name)
