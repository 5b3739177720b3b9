"""Asking commands: ``wikid query``, ``wikid search``, ``wikid cost``.

Why apart: they share the evidence printout and the streaming of answers, which
nothing else in the CLI needs; both live in ``_client``, shared with the fast path
(``_fast``), which runs a well-formed call without click.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from wikid.cli._client import run_op, run_query
from wikid.cli._common import daemon, vault_option, where_option
from wikid.cli._fast import BUDGET
from wikid.config import QUERY_MODES


@click.command()
@vault_option
@click.argument("text")
@click.option(
    "--mode",
    type=click.Choice(QUERY_MODES),
    default=None,
    help="LightRAG's retrieval mode for the vector part (default: the config's, mix).",
)
@click.option(
    "--budget",
    type=click.IntRange(*BUDGET),
    default=None,
    help="Evidence token budget (default: about a screen, 1000; with --json or --answer, 3000).",
)
@click.option("--answer", is_flag=True, help="Have the configured LLM answer from the evidence.")
@click.option("--explain", is_flag=True, help="Show why each item was chosen.")
@where_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def query(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    text: str,
    mode: str | None,
    budget: int | None,
    answer: bool,
    explain: bool,
    where: tuple[str, ...],
    as_json: bool,
) -> None:
    """Ask the vault: the smallest evidence that covers the question, with paths to open.
    No LLM is involved unless --answer (then the answer streams, citing notes).

    Example: wikid query "who wrote the first program?" --budget 1500"""
    cfg = daemon(vault, config_path, socket_path)
    args: dict[str, Any] = {"text": text, "mode": mode, "budget": budget, "explain": explain}
    if where:
        args["where"] = list(where)
    run_query(cfg, args, answer, as_json)


@click.command()
@vault_option
@click.argument("text", required=False, default="")
@click.option("-k", "--limit", "k", type=int, default=8, help="How many notes (1 to 100).")
@click.option("--folder", default=None, help="Only notes under this folder.")
@click.option("--tag", default=None, help="Only notes with this tag (or a nested one).")
@where_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def search(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    text: str,
    k: int,
    folder: str | None,
    tag: str | None,
    where: tuple[str, ...],
    as_json: bool,
) -> None:
    """Full-text search (BM25 over title, aliases, summary, tags and body).

    Example: wikid search "analytical engine" --tag person --folder People"""
    cfg = daemon(vault, config_path, socket_path)
    filters = {"where": list(where)} if where else {}
    run_op(cfg, "search", as_json, text=text, k=k, folder=folder, tag=tag, **filters)


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def cost(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """LLM calls and tokens so far, by phase and model, with the estimated price.

    Example: wikid cost --json"""
    run_op(daemon(vault, config_path, socket_path), "cost", as_json)
