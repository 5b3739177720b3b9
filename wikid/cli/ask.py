"""Asking commands: ``wikid query``, ``wikid search``, ``wikid cost``.

Why apart: they share the evidence printout and the streaming of answers,
which nothing else in the CLI needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from wikid.cli._common import call, load, show, vault_option
from wikid.config import QUERY_MODES


def _why(item: dict[str, Any]) -> str:
    """One line of --explain: what retrieval saw in the item."""
    why = item.get("why")
    if not why:
        return ""
    parts = [f"rank {why['fused_rank']}" if why.get("fused_rank") is not None else "unranked"]
    if "named" in why:
        parts.append(f"from {why['named']!r}, hop {why['hop']}, edge {why['edge']}")
    if item.get("covers"):
        parts.append("covers " + ", ".join(item["covers"]))
    return "\n          why: " + "; ".join(parts)


def evidence_text(res: dict[str, Any]) -> str:
    rows = [f"evidence: {res['tokens']} of {res['budget']} tokens, mode {res['mode']}"]
    if res.get("partial"):
        p = res["partial"]
        rows.append(
            f"partial: {p['embedded']} of {p['total']} texts embedded; graph and full text only"
        )

    def where(item: dict[str, Any]) -> str:
        loc = item["path"] or "?"
        if item.get("line"):
            loc += f":{item['line']}"
        return loc + (f" ({item['heading']})" if item.get("heading") else "")

    for e in res["entities"]:
        rows.append(f"entity    {e['name']}  {where(e)}\n          {e['text']}{_why(e)}")
    for r in res["relations"]:
        rows.append(
            f"relation  {r['src']} -- {r['tgt']}  {where(r)}\n          {r['text']}{_why(r)}"
        )
    for c in res["chunks"]:
        text = " ".join(c["text"].split())
        rows.append(f"chunk     {where(c)}\n          {text[:400]}{_why(c)}")
    if res.get("uncovered"):
        rows.append("not covered: " + ", ".join(res["uncovered"]))
    if res.get("stopped"):
        rows.append(f"stopped: {res['stopped']['why']}")
    if "llm" in res and res["llm"] != "configured":
        rows.append(f"({res['llm']})")
    return "\n".join(rows)


@click.command()
@vault_option
@click.argument("text")
@click.option("--mode", type=click.Choice(QUERY_MODES), default=None)
@click.option("--budget", type=int, default=None, help="Evidence token budget (default 3000).")
@click.option("--answer", is_flag=True, help="Have the configured LLM answer from the evidence.")
@click.option("--explain", is_flag=True, help="Show why each item was chosen.")
@click.option("--json", "as_json", is_flag=True)
def query(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    text: str,
    mode: str | None,
    budget: int | None,
    answer: bool,
    explain: bool,
    as_json: bool,
) -> None:
    """Ask the vault: the smallest evidence that covers the question, with paths to open.
    No LLM is involved unless --answer (then the answer streams, citing notes).

    Example: wikid query "who wrote the first program?" --budget 1500"""
    cfg = load(vault, config_path, socket_path, client=True)
    args: dict[str, Any] = {"text": text, "mode": mode, "budget": budget, "explain": explain}
    if not answer:
        show(call(cfg, "query", **args), as_json, evidence_text)
        return

    def stream(piece: str) -> None:
        if not as_json:
            sys.stdout.write(piece)
            sys.stdout.flush()

    res = call(cfg, "query", answer=True, on_partial=stream, timeout=600, **args)
    if as_json:
        show(res, True, str)
        return
    a = res["answer"]
    click.echo(
        f"\n\n({a['model']}: {a['input_tokens']} tokens in, {a['output_tokens']} out; "
        f"evidence {res['tokens']} tokens from {len({i['path'] for k in ('entities', 'relations', 'chunks') for i in res[k]})} notes)"
    )


@click.command()
@vault_option
@click.argument("text")
@click.option("-k", "k", type=int, default=8, help="How many notes.")
@click.option("--folder", default=None, help="Only notes under this folder.")
@click.option("--tag", default=None, help="Only notes with this tag (or a nested one).")
@click.option("--json", "as_json", is_flag=True)
def search(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    text: str,
    k: int,
    folder: str | None,
    tag: str | None,
    as_json: bool,
) -> None:
    """Full-text search (BM25 over title, aliases, summary, tags and body).

    Example: wikid search "analytical engine" --tag person --folder People"""
    cfg = load(vault, config_path, socket_path, client=True)

    def readable(res: dict[str, Any]) -> str:
        rows = []
        for h in res["hits"]:
            tags = " ".join("#" + t for t in h["tags"])
            rows.append(f"{h['path']}  {tags}\n    {' '.join(h['snippet'].split())}")
        return "\n".join(rows) or "no match"

    show(call(cfg, "search", text=text, k=k, folder=folder, tag=tag), as_json, readable)


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True)
def cost(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """LLM calls and tokens so far, by phase and model, with the estimated price.

    Example: wikid cost --json"""
    cfg = load(vault, config_path, socket_path, client=True)

    def readable(res: dict[str, Any]) -> str:
        rows = [
            f"{r['phase']:<10} {r['model']:<24} {r['calls']:>6} calls {r['input_tokens']:>10} in "
            f"{r['output_tokens']:>10} out  {_money(r['cost'])}"
            for r in res["by_phase"]
        ]
        total = "n/a (set llm_prices)" if res["cost"] is None else _money(res["cost"])
        rows.append(
            f"total: {res['calls']} calls, {res['input_tokens']} in, {res['output_tokens']} out, est. {total}"
        )
        return "\n".join(rows)

    show(call(cfg, "cost"), as_json, readable)
