"""An answer from the selected evidence, by the user's LLM, with its cost recorded.

Why the evidence only: the user can check every claim against the notes it
cites, and the prompt costs what the budget says, not what retrieval found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wikid.config import LLMConfig
from wikid.store.cost import CostLedger
from wikid.store.llm import chat

SYSTEM = (
    "You answer questions about the user's own notes. Use only the evidence given; "
    "after each statement cite the note it comes from as [path]. If the evidence does "
    "not answer the question, say so plainly."
)


def evidence_lines(ev: dict[str, Any]) -> list[str]:
    """One line per selected item, tagged with the note to cite."""
    lines = []
    for kind in ("entities", "relations", "chunks"):
        for item in ev[kind]:
            where = item["path"] or "?"
            if item.get("heading"):
                where += f" › {item['heading']}"
            lines.append(f"[{where}] {item['text']}")
    return lines


def messages(question: str, ev: dict[str, Any]) -> list[dict[str, str]]:
    body = "\n\n".join(evidence_lines(ev))
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Evidence:\n\n{body}\n\nQuestion: {question}"},
    ]


async def answer(
    cfg: LLMConfig,
    costs: CostLedger,
    question: str,
    ev: dict[str, Any],
    on_text: Callable[[str], Any],
) -> dict[str, Any]:
    """Stream the LLM's answer; record its tokens under phase "query"."""
    text, usage = await chat(cfg, messages(question, ev), on_text)
    costs.record("query", cfg.model, usage.input_tokens, usage.output_tokens, usage.reported)
    return {
        "text": text,
        "model": cfg.model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cited": sorted(
            {
                i["path"]
                for k in ("entities", "relations", "chunks")
                for i in ev[k]
                if i["path"] and i["path"] in text
            }
        ),
    }
