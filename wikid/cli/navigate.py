"""Client commands that read the daemon's graph and state: ``status``, ``links``,
``backlinks``, ``broken``.

Why apart: they only talk to the daemon over its socket, so this module imports
click and the stdlib client, nothing heavy; printing replies readably is most of
their code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from wikid.cli._common import call, load, show, vault_option


def _status_text(s: dict[str, Any]) -> str:
    lines = [
        f"vault       {s['vault']}",
        f"state       {s.get('phase', '?')}; "
        + ("ready" if s["ready"] else "not ready yet")
        + ("; applying a batch" if s["busy"] else ""),
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
    if s.get("conflicts"):
        lines.append(f"conflicts   {len(s['conflicts'])} sync-conflict copies, oldest first")
        lines += [f"  {c['path']}  (a copy of {c['original']})" for c in s["conflicts"]]
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


@click.command()
@vault_option
@click.option("--json", "as_json", is_flag=True)
def status(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """What the daemon holds and is doing; notes it could not read, and why.

    Example: wikid status --vault ~/Notes --json"""
    cfg = load(vault, config_path, socket_path, client=True)
    show(call(cfg, "status"), as_json, _status_text)


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


def _edge_command(op: str, doc: str) -> click.Command:
    """``links`` and ``backlinks``: one note in, its edges one way out."""

    @click.command(op, help=doc)
    @vault_option
    @click.argument("note")
    @click.option("--json", "as_json", is_flag=True)
    def command(
        vault: str | None,
        config_path: Path | None,
        socket_path: Path | None,
        note: str,
        as_json: bool,
    ) -> None:
        cfg = load(vault, config_path, socket_path, client=True)
        show(call(cfg, op, note=note), as_json, _edges_text(op))

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
@click.option("--json", "as_json", is_flag=True)
def broken(
    vault: str | None, config_path: Path | None, socket_path: Path | None, as_json: bool
) -> None:
    """Unresolved links, with the notes that hold them.

    Example: wikid broken --vault ~/Notes"""
    cfg = load(vault, config_path, socket_path, client=True)

    def text(data: dict[str, Any]) -> str:
        return (
            "\n".join(f"{b['target']}  <- {', '.join(b['sources'])}" for b in data["broken"])
            or "none"
        )

    show(call(cfg, "broken"), as_json, text)


def _daemon_command(op: str, doc: str, done: str) -> click.Command:
    """``stop`` and ``reindex``: one op, a one-line answer."""

    @click.command(op, help=doc)
    @vault_option
    def command(vault: str | None, config_path: Path | None, socket_path: Path | None) -> None:
        cfg = load(vault, config_path, socket_path, client=True)
        call(cfg, op)
        click.echo(done)

    return command


stop = _daemon_command(
    "stop",
    "Stop the vault's daemon (it finishes the batch in flight).\n\nExample: wikid stop --vault notes",
    "stopping",
)
reindex = _daemon_command(
    "reindex",
    "Rebuild the graph from the files and reconcile the whole store, in the background."
    "\n\nExample: wikid reindex --vault notes",
    "reindex started (wikid status shows when it is done)",
)
