"""The ``wikid`` command line.

Why thin: each command only parses options, calls one library function and
prints; nothing here knows how the graph or the store works, so every
behaviour is testable without a subprocess.
"""

from __future__ import annotations

import asyncio
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


@main.command()
@_vault_option
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="LightRAG working dir (default: $XDG_DATA_HOME/wikid/<vault-name>/).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
def index(vault: Path, workdir: Path | None, as_json: bool, ignore: tuple[str, ...]) -> None:
    """Sync the vault into its LightRAG store: full the first time, incremental after."""
    from wikid.index import Index

    async def run() -> dict[str, Any]:
        idx = await Index.open(vault, workdir, options=VaultOptions(ignore=ignore))
        try:
            return await idx.sync()
        finally:
            await idx.close()

    result = asyncio.run(run())
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"{result['notes']} notes -> {result['entities']} entities, {result['relations']} relations, "
            f"{result['chunks']} chunks; {result['added']} added, {result['changed']} changed, "
            f"{result['removed']} removed; {result['embedded']} embedded in {result['seconds']} s; "
            f"{result['llm_calls']} LLM calls"
        )


@main.command()
@click.option(
    "--workdir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="The LightRAG working dir to read.",
)
@click.option("--workspace", default=None, help="Workspace (vault) name, if the dir holds several.")
@click.option("--format", "fmt", type=click.Choice(["json", "graphml"]), default="json")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of standard output (required for graphml).",
)
def export(workdir: Path, workspace: str | None, fmt: str, output: Path | None) -> None:
    """Write the store's entities, relations and chunk ids, sorted and deterministic."""
    from wikid.export import dumps, export_workdir, to_graphml

    data = asyncio.run(export_workdir(workdir, workspace))
    if fmt == "graphml":
        if output is None:
            raise click.UsageError("--format graphml needs --output FILE")
        to_graphml(data, output)
    elif output is None:
        click.echo(dumps(data))
    else:
        output.write_text(dumps(data) + "\n", encoding="utf-8")


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
