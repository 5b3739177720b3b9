"""Store commands, run in this process: ``index``, ``export``, ``migrate``,
``lightrag-server``.

Why apart: these open the store themselves (no daemon), so each imports the
store or sync layer inside its function; importing this module costs nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from wikid.cli._common import UserError, load, vault_option, workdir_option


@click.command()
@vault_option
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--ignore", multiple=True, help="A gitignore-style glob to leave out (repeatable).")
@click.option(
    "--force", is_flag=True, help="Sync even when the vault is now empty (empties the store)."
)
def index(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    workdir: Path | None,
    as_json: bool,
    ignore: tuple[str, ...],
    force: bool,
) -> None:
    """Sync the vault into its LightRAG store: full the first time, incremental after.

    Example: wikid index --vault ~/Notes --json"""
    import asyncio

    from wikid.core.vault import vault_options
    from wikid.server.log import Progress, configure
    from wikid.store.lock import StoreBusy
    from wikid.sync.index import Index, VaultMissing

    cfg = load(vault, config_path, socket_path, workdir=workdir, ignore=ignore or None)
    configure(cfg.log_level)  # log lines to stderr: with --json, stdout holds only JSON

    async def run() -> dict[str, Any]:
        idx = await Index.open(
            cfg.path,
            cfg.workdir,
            workspace=cfg.workspace,
            adopt_from=cfg.legacy_store(),
            backend=cfg.store,
            embedding=cfg.embedding,
            options=vault_options(cfg),
            extraction=cfg.extraction(),
            postgres_url=cfg.postgres_url,
        )
        bar = Progress("embedding", live=sys.stderr.isatty() and not as_json)
        idx.on_embedded(bar.update)
        try:
            report = await idx.sync(force=force)
            if idx.extracting:
                report["extraction"] = await idx.extract()
            return report
        finally:
            bar.close()
            await idx.close()

    try:
        result = asyncio.run(run())
    except StoreBusy as exc:
        raise click.ClickException(str(exc)) from None
    except VaultMissing as exc:
        raise UserError(f"{exc} (wikid index --force empties the store)") from None
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


@click.command()
@click.option(
    "--workdir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="The LightRAG working dir to read.",
)
@click.option("--workspace", default=None, help="Workspace (vault) name, if the dir holds several.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "graphml"]),
    default="json",
    help="json: every record, sorted; graphml: the graph, for graph tools.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of standard output (required for graphml).",
)
def export(workdir: Path, workspace: str | None, fmt: str, output: Path | None) -> None:
    """Write the store's entities, relations and chunk ids, sorted and deterministic.

    Example: wikid export --workdir ~/.local/share/wikid/Notes --format graphml -o notes.graphml"""
    import asyncio

    from wikid.server.log import configure
    from wikid.store.export import dumps, export_workdir, to_graphml

    configure("warning")  # log lines to stderr, never into the JSON on stdout
    data = asyncio.run(export_workdir(workdir, workspace))
    if fmt == "graphml":
        if output is None:
            raise UserError("--format graphml needs --output FILE")
        to_graphml(data, output)
    elif output is None:
        click.echo(dumps(data))
    else:
        output.write_text(dumps(data) + "\n", encoding="utf-8")


@click.command()
@vault_option
@workdir_option
def migrate(
    vault: str | None, config_path: Path | None, socket_path: Path | None, workdir: Path | None
) -> None:
    """Copy a stock-files store into the SQLite backend, vectors and all (no re-embedding).

    The daemon and "wikid index" do this by themselves on first start with the
    sqlite backend; this command does it ahead of time and reports the counts.

    Example: wikid migrate --vault ~/Notes"""
    from wikid.store.migrate import migrate as run_migration

    cfg = load(vault, config_path, socket_path, workdir=workdir)
    assert cfg.workdir is not None  # load() always fills it in
    from wikid.server.log import configure
    from wikid.store.relocate import adopt

    configure(cfg.log_level)  # log lines to stderr: stdout holds only the JSON counts
    adopt(cfg.legacy_store(), cfg.workdir / cfg.workspace, cfg.path)
    try:
        counts = run_migration(cfg.workdir / cfg.workspace)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    click.echo(json.dumps(counts))


@click.command(
    "lightrag-server", context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@vault_option
@workdir_option
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def lightrag_server(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    workdir: Path | None,
    server_args: tuple[str, ...],
) -> None:
    """Start LightRAG's own API server and WebUI on this vault's store: browse its graph,
    call /query/data, ask /query with your LLM. Read-only (the vault is the source of
    truth), fresh while the daemon writes, and asking with the store's own model.

    Extra arguments go to LightRAG's server (e.g. --port 9621). Needs wikid's server
    extra: pip install 'wikid-rag[server]'.

    Example: wikid lightrag-server --vault ~/Notes -- --port 9621"""
    cfg = load(vault, config_path, socket_path, workdir=workdir)
    if cfg.store != "sqlite":
        raise UserError("the stock-files store needs no wikid code: run lightrag-server itself")
    try:
        import fastapi  # noqa: F401
        import lightrag.api  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"LightRAG's server is not installed ({exc}); pip install 'wikid-rag[server]'"
        ) from exc
    from wikid.cli.lightrag_app import run as serve
    from wikid.store.sqlite_backend import database_file

    if cfg.workdir is None or not database_file(cfg.workdir, cfg.workspace).is_file():
        raise UserError(
            f"no store for {cfg.path} in {cfg.workdir}: run 'wikid run' or 'wikid index' first"
        )
    serve(cfg, server_args)
