"""The ``wikid`` click group: one module per command group.

Why thin: each command only parses options, calls one library function (or one
daemon op) and prints; nothing here knows how the graph or the store works.
Why lazy: the modules imported here hold only click code, and a command that needs
the graph or the store imports it when it runs. (A well-formed client call never
gets here: ``wikid.cli.main`` runs it through ``_fast``.)
"""

from __future__ import annotations

import click

from wikid import __version__
from wikid.cli.agent import mcp
from wikid.cli.ask import cost, query, search
from wikid.cli.graph import graph
from wikid.cli.navigate import (
    backlinks,
    broken,
    links,
    neighbors,
    reindex,
    related,
    status,
    stop,
)
from wikid.cli.run import run, service
from wikid.cli.store import export, index, lightrag_server, migrate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wikid")
def main() -> None:
    """wikid keeps a LightRAG index of an Obsidian vault fresh, with no LLM."""


for _command in (
    run,
    status,
    links,
    backlinks,
    broken,
    neighbors,
    related,
    stop,
    reindex,
    query,
    search,
    cost,
    graph,
    index,
    export,
    migrate,
    lightrag_server,
    service,
    mcp,
):
    main.add_command(_command)

__all__ = ["main"]
