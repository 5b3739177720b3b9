"""CLI commands around the daemon: ``run``, the socket clients, ``service install``.

Why a second module: ``cli.py`` holds the one-shot commands; these either run
the daemon or only talk to it, and printing their replies readably is most of
their code.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import click

from wikid.cli import _client_call, _config, _print, _vault_option, main, workdir_option


@main.command()
@_vault_option
@workdir_option
def run(
    vault: str | None, config_path: Path | None, socket_path: Path | None, workdir: Path | None
) -> None:
    """Run the daemon in the foreground: sync, then watch and serve the socket."""
    from wikid.server.daemon import run as run_daemon
    from wikid.server.log import configure

    cfg = _config(vault, config_path, socket_path, workdir=workdir)
    configure(cfg.log_level)
    sys.exit(run_daemon(cfg, config_path))


def _status_text(s: dict[str, Any]) -> str:
    lines = [
        f"vault       {s['vault']}",
        f"notes       {s['notes']}  entities {s['entities']}  relations {s['relations']}  chunks {s['chunks']}",
        f"queue       {s['queue']} paths, lag {s['lag_seconds']} s, {s['batches']} batches",
        f"store       {s['store']['backend']} at {s['store']['workdir']}"
        + ("  (BEHIND: " + str(s["store"]["last_error"]) + ")" if s["store"]["behind"] else ""),
        f"embedding   {s['embedding_model']}; LLM calls while indexing {s['llm_calls']}",
        f"llm         {s['llm']['model'] if s['llm']['configured'] else 'not configured (evidence only)'}; "
        f"{s['cost']['calls']} calls, {s['cost']['input_tokens']} tokens in, "
        f"{s['cost']['output_tokens']} out"
        + (f", est. {s['cost']['cost']:.4f}" if s["cost"]["cost"] is not None else ""),
        _extraction_line(s.get("extraction") or {}),
        f"uptime      {s['uptime_seconds']} s (pid {s['pid']})",
        f"rejected    {len(s['rejected'])} files",
    ]
    lines += [f"  {p}: {why}" for p, why in s["rejected"].items()]
    return "\n".join(lines)


def _extraction_line(x: dict[str, Any]) -> str:
    if not x.get("enabled"):
        return "extraction  off (extract = true in the config turns it on)"
    line = (
        f"extraction  {x['extracted_chunks']} chunks extracted, {x['waiting_chunks']} waiting, "
        f"{x['skipped_chunks']} skipped by salience (< {x['threshold']}), "
        f"{x['failed_chunks']} failed"
    )
    if not x.get("llm"):
        line += "; no LLM configured, so nothing new is sent"
    if x.get("last_error") and x["failed_chunks"]:
        line += f"; last error: {x['last_error']}"
    return line


@main.command()
@_vault_option
@click.option("--json", "as_json", is_flag=True)
def status(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """What the daemon holds and is doing; notes it could not read, and why."""
    cfg = _config(vault, config_path, socket_path)
    _print(_client_call(cfg, "status"), as_json, _status_text)


def _edges_text(key: str) -> Any:
    def text(data: dict[str, Any]) -> str:
        rows = [f"{data['note']}:"]
        for e in data[key]:
            other = e["target"] if key == "links" else e["source"]
            mark = " (unresolved)" if e.get("unresolved") else ""
            rows.append(
                f"  {other}{mark}  [{e['kind']}, line {e['line']}]  {e['context'] or ''}".rstrip()
            )
        return "\n".join(rows) if data[key] else rows[0] + " none"

    return text


def _edge_command(op: str, doc: str) -> None:
    """``links`` and ``backlinks``: one note in, its edges one way out."""

    @main.command(op, help=doc)
    @_vault_option
    @click.argument("note")
    @click.option("--json", "as_json", is_flag=True)
    def command(
        vault: str | None,
        config_path: Path | None,
        socket_path: Path | None,
        note: str,
        as_json: bool,
    ) -> None:
        cfg = _config(vault, config_path, socket_path)
        _print(_client_call(cfg, op, note=note), as_json, _edges_text(op))


_edge_command("links", "Links going out of NOTE (a path or a title).")
_edge_command("backlinks", "Links coming into NOTE (a path or a title).")


@main.command()
@_vault_option
@click.option("--json", "as_json", is_flag=True)
def broken(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """Unresolved links, with the notes that hold them."""
    cfg = _config(vault, config_path, socket_path)

    def text(data: dict[str, Any]) -> str:
        return (
            "\n".join(f"{b['target']}  <- {', '.join(b['sources'])}" for b in data["broken"])
            or "none"
        )

    _print(_client_call(cfg, "broken"), as_json, text)


@main.group()
def service() -> None:
    """The systemd user service."""


UNIT = Path(__file__).resolve().parents[1] / "systemd" / "wikid@.service"


@service.command("install")
@_vault_option
def service_install(vault: str | None, config_path: Path | None, socket_path: Path | None) -> None:
    """Write the wikid@.service user unit and print how to enable it for a vault."""
    cfg = _config(vault, config_path, socket_path)
    exe = shutil.which("wikid") or sys.argv[0]
    unit_dir = Path.home() / ".config" / "systemd" / "user"
    unit_dir.mkdir(parents=True, exist_ok=True)
    text = UNIT.read_text("utf-8") if UNIT.exists() else ""
    text = text.replace("/usr/bin/env wikid", str(Path(exe).resolve()))
    (unit_dir / "wikid@.service").write_text(text, encoding="utf-8")
    click.echo(f"wrote {unit_dir / 'wikid@.service'}")
    if cfg.name not in _configured_names(config_path):
        click.echo(
            f'add the vault to your config first:\n  [vaults.{cfg.name}]\n  path = "{cfg.path}"'
        )
    click.echo(f"systemctl --user daemon-reload && systemctl --user enable --now wikid@{cfg.name}")


def _configured_names(config_path: Path | None) -> set[str]:
    from wikid.config import all_vaults

    try:
        return {v.name for v in all_vaults(config_path)}
    except Exception:
        return set()
