"""wikid: keep a LightRAG graph-RAG index of an Obsidian vault fresh.

The declared Python API is the client of a running daemon: ``request(socket, op,
**args)`` and its two errors. They are loaded on first use (PEP 562), so ``import
wikid`` stays as light as the thin CLI needs: no LightRAG, numpy or networkx.
``wikid.testing`` holds helpers for tests and benchmarks."""

import os

__version__ = "0.2.0"
__all__ = ["DaemonNotRunning", "RemoteError", "__version__", "request"]


# LightRAG's modules call load_dotenv(".env") when imported: a .env in whatever
# folder wikid happens to start in would silently override its settings (a
# workspace, a storage class). python-dotenv honours this switch; a user who sets
# it to 0 gets the old behaviour.
os.environ.setdefault("PYTHON_DOTENV_DISABLED", "1")

from wikid._lean import keep_out

keep_out()

TYPE_CHECKING = False  # typing costs a client call ~4 ms; mypy reads the real names
if TYPE_CHECKING:
    from wikid.client import DaemonNotRunning, RemoteError, request

_CLIENT = ("DaemonNotRunning", "RemoteError", "request")


def __getattr__(name: str) -> object:
    if name in _CLIENT:
        from wikid import client

        return getattr(client, name)
    raise AttributeError(f"module 'wikid' has no attribute {name!r}")
