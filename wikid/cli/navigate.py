"""Client commands that read the daemon's graph and state: ``status``, ``links``,
``backlinks``, ``broken``, ``neighbors``, ``related``, ``stop``, ``reindex``.

Why apart: they only talk to the daemon over its socket, so this module imports
click and the stdlib client, nothing heavy. Their work and printouts are in
``_client``, shared with the fast path (``_fast``), which runs a well-formed call
without click; these commands serve ``--help`` and mistakes, and tests.
"""

from __future__ import annotations

from pathlib import Path

import click

from wikid.cli._client import run_op
from wikid.cli._common import daemon, vault_option, where_option


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def status(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """What the daemon holds and is doing; notes it could not read, and why.

    Example: wikid status --vault ~/Notes --json"""
    run_op(daemon(vault, config_path, socket_path), "status", as_json)


def _edge_command(op: str, doc: str) -> click.Command:
    """``links`` and ``backlinks``: one note in, its edges one way out."""

    @click.command(op, help=doc)
    @vault_option
    @click.argument("note")
    @click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
    def command(
        vault: str | None,
        config_path: Path | None,
        socket_path: Path | None,
        note: str,
        as_json: bool,
    ) -> None:
        run_op(daemon(vault, config_path, socket_path), op, as_json, note=note)

    return command


links = _edge_command(
    "links", "Links going out of NOTE (a path or a title).\n\nExample: wikid links 'Ada Lovelace'"
)
backlinks = _edge_command(
    "backlinks",
    "Links coming into NOTE (a path or a title).\n\nExample: wikid backlinks Welcome.md",
)


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def broken(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """Unresolved links, with the notes that hold them.

    Example: wikid broken --vault ~/Notes"""
    run_op(daemon(vault, config_path, socket_path), "broken", as_json)


@click.command()
@vault_option
@click.argument("note")
@click.option("--depth", type=click.IntRange(1, 2), default=1, help="1 or 2 links away.")
@click.option("--limit", type=int, default=50, help="How many notes at most (1 to 500).")
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def neighbors(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    note: str,
    depth: int,
    limit: int,
    as_json: bool,
) -> None:
    """Notes within one or two links of NOTE, either way, nearest first, with the
    kinds of link that lead there.

    Example: wikid neighbors 'Ada Lovelace' --depth 2"""
    cfg = daemon(vault, config_path, socket_path)
    run_op(cfg, "neighbors", as_json, note=note, depth=depth, limit=limit)


@click.command()
@vault_option
@click.argument("note")
@click.option("--limit", type=int, default=10, help="How many notes (1 to 100).")
@click.option("--include-linked", is_flag=True, help="Keep the notes NOTE links or is linked by.")
@where_option
@click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
def related(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    note: str,
    limit: int,
    include_linked: bool,
    where: tuple[str, ...],
    as_json: bool,
) -> None:
    """Notes related to NOTE by meaning and by shared links, tags and properties,
    that it does not link yet; each with why (the closest passages, what they share).

    Example: wikid related 'Ada Lovelace' --where type=person"""
    cfg = daemon(vault, config_path, socket_path)
    extra: dict[str, object] = {"where": list(where)} if where else {}
    if include_linked:
        extra["include_linked"] = True
    run_op(cfg, "related", as_json, note=note, limit=limit, **extra)


def _daemon_command(op: str, doc: str) -> click.Command:
    """``stop`` and ``reindex``: one op, a one-line answer."""

    @click.command(op, help=doc)
    @vault_option
    def command(vault: str | None, config_path: Path | None, socket_path: Path | None) -> None:
        run_op(daemon(vault, config_path, socket_path), op, False)

    return command


stop = _daemon_command(
    "stop",
    "Stop the vault's daemon (it finishes the batch in flight).\n\nExample: wikid stop --vault notes",
)
reindex = _daemon_command(
    "reindex",
    "Rebuild the graph from the files and reconcile the whole store, in the background."
    "\n\nExample: wikid reindex --vault notes",
)
