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

from wikid.client import DaemonNotRunning, RemoteError, request
from wikid.config import ConfigError, VaultConfig
from wikid.config import load as load_config
from wikid.core.graph import VaultGraph, to_json
from wikid.core.vault import VaultOptions


@click.group()
@click.version_option(package_name="wikid")
def main() -> None:
    """wikid keeps a LightRAG index of an Obsidian vault fresh, with no LLM."""


def _vault_option(f: Any) -> Any:
    """--vault, --config and --socket, accepted by every command."""
    f = click.option(
        "--socket",
        "socket_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The daemon's socket (default: $XDG_RUNTIME_DIR/wikid/<vault>.sock).",
    )(f)
    f = click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Config file (default: $XDG_CONFIG_HOME/wikid/config.toml).",
    )(f)
    return click.option(
        "--vault",
        "vault",
        default=None,
        help="The vault folder, or the name of a [vaults.NAME] table in the config.",
    )(f)


workdir_option = click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="LightRAG working dir (default: $XDG_DATA_HOME/wikid/<vault-name>/).",
)


def _config(
    vault: str | None, config_path: Path | None, socket_path: Path | None, **overrides: Any
) -> VaultConfig:
    try:
        return load_config(config_path, vault, overrides={"socket": socket_path, **overrides})
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def _print(data: Any, as_json: bool, readable: Any) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=1))
    else:
        click.echo(readable(data))


def _client_call(cfg: VaultConfig, op: str, **args: Any) -> Any:
    assert cfg.socket is not None
    try:
        return request(cfg.socket, op, vault=str(cfg.path), **args)
    except DaemonNotRunning as exc:
        click.echo(str(exc), err=True)
        sys.exit(3)
    except RemoteError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(4)


@main.command()
@_vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole graph as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
def graph(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    as_json: bool,
    ignore: tuple[str, ...],
) -> None:
    """Build the wikilink graph of a vault and print it."""
    cfg = _config(vault, config_path, socket_path, ignore=ignore or None)
    vg = VaultGraph.load(
        cfg.path, VaultOptions(ignore=cfg.ignore, max_note_bytes=cfg.max_note_bytes)
    )
    if as_json:
        json.dump(to_json(vg.g), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    click.echo(format_summary(vg))


@main.command()
@_vault_option
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
def index(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    workdir: Path | None,
    as_json: bool,
    ignore: tuple[str, ...],
) -> None:
    """Sync the vault into its LightRAG store: full the first time, incremental after."""
    from wikid.sync.index import Index

    cfg = _config(vault, config_path, socket_path, workdir=workdir, ignore=ignore or None)

    async def run() -> dict[str, Any]:
        idx = await Index.open(
            cfg.path,
            cfg.workdir,
            backend=cfg.store,
            options=VaultOptions(ignore=cfg.ignore, max_note_bytes=cfg.max_note_bytes),
            extraction=cfg.extraction(),
            postgres_url=cfg.postgres_url,
        )
        if sys.stderr.isatty() and not as_json:
            done = [0]

            def progress(n: int) -> None:  # a live count on the terminal while the model runs
                done[0] += n
                sys.stderr.write(f"\rembedding {done[0]} texts, {idx.store.llm_calls} LLM calls ")
                sys.stderr.flush()

            idx.store.progress = progress
        try:
            report = await idx.sync()
            if idx.extractor is not None:
                report["extraction"] = await idx.extract()
            return report
        finally:
            if idx.store.progress is not None:
                sys.stderr.write("\n")
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
        ex = result.get("extraction")
        if ex:
            click.echo(
                f"extraction: {ex['sent']} chunks extracted in {ex['calls']} LLM calls, "
                f"{ex['skipped']} skipped by salience, {ex['failed']} failed (retried next run)"
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
    from wikid.store.export import dumps, export_workdir, to_graphml

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


from wikid.cli import ask as _cli_query  # noqa: E402,F401  (registers query, search, cost)
from wikid.cli import run as _cli_daemon  # noqa: E402,F401  (registers the daemon commands)
from wikid.cli import store as _cli_store  # noqa: E402,F401  (registers the store commands)

if __name__ == "__main__":  # pragma: no cover
    main()
