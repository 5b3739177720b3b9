"""``wikid graph``: build the wikilink graph of a vault in this process and print it.

Why here and not through the daemon: it needs no store and no daemon, and it is
how a user checks what wikid makes of a vault before indexing it. networkx is
imported inside the command, so the rest of the CLI stays light.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click

from wikid.cli._common import load, vault_option

if TYPE_CHECKING:
    from wikid.core.graph import VaultGraph


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole graph as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
def graph(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    as_json: bool,
    ignore: tuple[str, ...],
) -> None:
    """Build the wikilink graph of a vault and print it.

    Example: wikid graph --vault ~/Notes --json > graph.json"""
    from wikid.core.edges import to_json
    from wikid.core.graph import VaultGraph
    from wikid.core.vault import vault_options

    cfg = load(vault, config_path, socket_path, ignore=ignore or None)
    vg = VaultGraph.load(cfg.path, vault_options(cfg))
    if as_json:
        json.dump(to_json(vg.g), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    click.echo(format_summary(vg))


def graph_stats(vg: VaultGraph) -> dict[str, int]:
    kinds = Counter(d["kind"] for _, d in vg.g.nodes(data=True))
    links = [d for *_, d in vg.g.links() if d["kind"] != "tag"]
    return {
        "notes": kinds["note"],
        "attachments": kinds["attachment"],
        "tags": kinds["tag"],
        "ghosts": kinds["ghost"],
        "links": len(links),
        "embeds": sum(1 for d in links if d["kind"] == "embed"),
        "unresolved_links": sum(1 for _, v, _, _ in vg.g.links() if v.startswith("ghost:")),
        "ambiguous_links": sum(1 for d in links if d["ambiguous"]),
        "problems": len(vg.problems),
    }


def format_summary(vg: VaultGraph) -> str:
    s = graph_stats(vg)
    lines = [
        f"vault        {vg.root}",
        f"notes        {s['notes']}",
        f"attachments  {s['attachments']}",
        f"links        {s['links']} ({s['embeds']} embeds)",
        f"tags         {s['tags']}",
        f"ghosts       {s['ghosts']} unresolved targets, {s['unresolved_links']} links to them",
        f"ambiguous    {s['ambiguous_links']} links",
        f"rejected     {s['problems']} files",
    ]
    lines += [f"  {path}: {reason}" for path, reason in vg.problems.items()]
    return "\n".join(lines)
