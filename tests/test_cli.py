"""The ``wikid graph`` command on the bundled example vault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from wikid.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"


def test_graph_json_has_the_documented_shape() -> None:
    result = CliRunner().invoke(main, ["graph", "--vault", str(EXAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    ids = {n["id"] for n in data["nodes"]}
    assert {
        "Welcome.md",
        "People/Ada Lovelace.md",
        "ghost:Charles Babbage",
        "tag:vault/demo",
        "attachments/engine.png",
    } <= ids
    assert not any(i.startswith("Templates/") for i in ids)  # userIgnoreFilters
    for node in data["nodes"]:
        assert set(node) >= {"id", "kind", "title", "aliases", "tags", "path"}
    for edge in data["edges"]:
        assert set(edge) >= {"source", "target", "kind", "heading", "display", "ambiguous", "line"}
    welcome = next(n for n in data["nodes"] if n["id"] == "Welcome.md")
    assert welcome["aliases"] == ["Home", "Start here"] and welcome["title"] == "Welcome"
    assert {"source": "Projects/wikid.md", "target": "Welcome.md", "kind": "up"}.items() <= next(
        e for e in data["edges"] if e["kind"] == "up"
    ).items()
    # Deterministic: a second run prints the same bytes.
    again = CliRunner().invoke(main, ["graph", "--vault", str(EXAMPLE), "--json"])
    assert again.output == result.output


def test_graph_summary_is_readable() -> None:
    result = CliRunner().invoke(main, ["graph", "--vault", str(EXAMPLE)])
    assert result.exit_code == 0
    assert (
        "notes        6" in result.output and "ghosts       1 unresolved targets" in result.output
    )


def test_readme_command_one_runs_the_demo() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "wikid.cli.demo", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "6 notes -> 15 entities" in out and "LLM calls: 0" in out
    assert "entity  " in out and "the daemon saw the new link" in out and "Mary Somerville" in out
    assert (
        not (EXAMPLE / ".." / "example-vault" / "People" / "Ada Lovelace.md")
        .read_text()
        .count("Somerville")
    )


def test_every_command_help_has_an_example() -> None:
    def commands(group: Any, prefix: list[str]) -> list[list[str]]:
        out = []
        for name, cmd in group.commands.items():
            out.append([*prefix, name])
            if hasattr(cmd, "commands"):
                out += commands(cmd, [*prefix, name])
        return out

    missing = [
        " ".join(path)
        for path in commands(main, [])
        if "Example:" not in CliRunner().invoke(main, [*path, "--help"]).output
    ]
    assert not missing, missing
