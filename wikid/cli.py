"""The ``wikid`` command line.

Why thin: each command only parses options, calls one library function and
prints; nothing here knows how the graph or the store works, so every
behaviour is testable without a subprocess.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from wikid.graph import VaultGraph, to_json
from wikid.vault import VaultOptions


@click.group()
@click.version_option(package_name="wikid")
def main() -> None:
    """wikid keeps a LightRAG index of an Obsidian vault fresh, with no LLM."""


def _vault_option(f: Any) -> Any:
    return click.option(
        "--vault",
        "vault",
        required=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="The vault folder (the one holding .obsidian/).",
    )(f)


@main.command()
@_vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole graph as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
def graph(vault: Path, as_json: bool, ignore: tuple[str, ...]) -> None:
    """Build the wikilink graph of a vault and print it."""
    vg = VaultGraph.load(vault, VaultOptions(ignore=ignore))
    if as_json:
        json.dump(to_json(vg.g), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    click.echo(format_summary(vg))


def graph_stats(vg: VaultGraph) -> dict[str, int]:
    kinds = Counter(d["kind"] for _, d in vg.g.nodes(data=True))
    links = [d for _, _, d in vg.g.edges(data=True) if d["kind"] != "tag"]
    return {
        "notes": kinds["note"],
        "attachments": kinds["attachment"],
        "tags": kinds["tag"],
        "ghosts": kinds["ghost"],
        "links": len(links),
        "embeds": sum(1 for d in links if d["kind"] == "embed"),
        "unresolved_links": sum(1 for _, v, d in vg.g.edges(data=True) if v.startswith("ghost:")),
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


if __name__ == "__main__":  # pragma: no cover
    main()
