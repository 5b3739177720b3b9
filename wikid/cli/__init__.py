"""The ``wikid`` command line: one click group, one module per command group.

Why thin: each command only parses options, calls one library function (or one
daemon op) and prints; nothing here knows how the graph or the store works.
Why lazy: a client command (status, links, query, ...) costs one Python start-up
plus a socket round trip, so the modules imported here hold only click code,
and a command that needs the graph or the store imports it when it runs.
"""

from __future__ import annotations

import click

from wikid import __version__
from wikid.cli import agent, ask, graph, navigate, run, store


@click.group()
@click.version_option(__version__, prog_name="wikid")
def main() -> None:
    """wikid keeps a LightRAG index of an Obsidian vault fresh, with no LLM."""


for _command in (
    run.run,
    navigate.status,
    navigate.links,
    navigate.backlinks,
    navigate.broken,
    navigate.stop,
    navigate.reindex,
    ask.query,
    ask.search,
    ask.cost,
    graph.graph,
    store.index,
    store.export,
    store.migrate,
    store.lightrag_server,
    run.service,
    agent.mcp,
):
    main.add_command(_command)

__all__ = ["main"]
