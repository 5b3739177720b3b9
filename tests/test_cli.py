"""The ``wikid`` command: ``wikid graph`` on the bundled example vault, README command
1, every command's help, and the client calls' fast path (parsed without click)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner
from daemontools import DaemonProc, copy_example

from wikid.cli.commands import main

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


def test_after_set_up_wikid_runs_where_the_readme_says() -> None:
    """The README's set-up installs into .venv/ and says so: ``.venv/bin/wikid`` (this
    venv's console script) runs, and the install section names the distribution."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    assert "`.venv/bin/wikid`" in readme and "**`wikid-rag`**" in readme
    script = Path(sys.executable).with_name("wikid")
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("wikid, version"), out


def test_help_is_consistent() -> None:
    """-h is --help; every option says what it does; no reStructuredText in help."""
    runner = CliRunner()
    assert runner.invoke(main, ["-h"]).exit_code == 0

    def walk(prefix: list[str], group: click.Group) -> None:
        for name, cmd in group.commands.items():
            result = runner.invoke(main, [*prefix, name, "-h"])
            assert result.exit_code == 0, name
            assert "``" not in result.output, name
            for p in cmd.params:
                if isinstance(p, click.Option) and not p.hidden:
                    assert p.help, (name, p.opts)
            if isinstance(cmd, click.Group):
                walk([*prefix, name], cmd)

    walk([], main)
    assert "wikid-rag[server]" in runner.invoke(main, ["lightrag-server", "-h"]).output


def test_the_fast_parser_knows_each_client_command_as_click_does() -> None:
    """``cli._fast`` parses client calls without click: its specs must name exactly the
    options and argument of each click command, or a call would parse two ways."""
    from wikid.cli import _fast

    for name, (positional, options) in _fast.SPECS.items():
        cmd = main.commands[name]
        opts = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        fast = {*_fast.COMMON, *options} | (set() if name in _fast.NO_JSON else {"--json"})
        assert opts == fast, name
        assert [p.name for p in cmd.params if isinstance(p, click.Argument)] == (
            [positional] if positional else []
        ), name


def _both(argv: list[str], env: dict[str, str]) -> tuple[Any, Any]:
    """The same call through ``wikid`` (the fast path) and through click alone."""
    fast = [str(Path(sys.executable).with_name("wikid")), *argv]  # the console script
    code = f"from wikid.cli.commands import main; main({argv!r}, prog_name='wikid')"
    slow = [sys.executable, "-c", code]
    return tuple(  # type: ignore[return-value]
        subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        for cmd in (fast, slow)
    )


def _into_a_closed_pipe(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` with its stdout a pipe whose reader has already gone (every write
    fails, as after ``head -1`` exits): its exit code and what it wrote to stderr."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, env=env, timeout=120)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr.decode()


def test_client_calls_print_the_same_with_or_without_click(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "v")
    d = DaemonProc(vault, tmp_path).start()
    where = ["--vault", str(vault), "--socket", str(d.socket)]
    try:
        calls = [
            ["links", "Ada Lovelace"],
            ["backlinks", "Ada Lovelace"],
            ["broken"],
            ["neighbors", "Ada Lovelace", "--depth", "2", "--limit=5"],
            ["neighbors", "Ada Lovelace"],  # the defaults: the daemon's, as click's
            ["search", "analytical engine", "-k", "3", "--tag", "person"],
            ["search", "analytical engine", "--limit", "3"],
            ["backlinks", "charles babbage"],  # unwritten: the notes that link it
            ["search", "analytical engine"],
            ["search", "engine", "--where", "tags=person", "--where=folder=People"],
            ["query", "who wrote the first program?", "--where", "folder!=Templates"],
            ["query", "who wrote the first program?", "--budget", "800", "--explain"],
            ["related", "Ada Lovelace"],
            ["related", "Ada Lovelace", "--limit", "2", "--include-linked", "--where=tags=person"],
            ["cost"],
        ]
        for call in calls:
            for extra in ([], ["--json"]):
                fast, slow = _both([*call, *where, *extra], d.env)
                assert fast.returncode == slow.returncode == 0, (call, fast.stderr, slow.stderr)
                assert fast.stdout == slow.stdout and fast.stdout.strip(), call
        # Help, and every mistake, is click's own, word for word.
        for mistake in (
            ["status", "--help"],
            ["query", "x", "--mode", "nope"],
            ["search", "x", "-k", "many"],
            ["links"],
            ["links", "a", "b"],
            ["status", "--jsn"],
            ["search", "x", "--where", "type~book"],  # the daemon's one line: bad_request
            ["status", "--vault", str(vault), "--config", str(tmp_path / "nowhere.toml")],
        ):
            fast, slow = _both([*mistake, "--socket", str(d.socket)], d.env)
            assert (fast.returncode, fast.stdout, fast.stderr) == (
                slow.returncode,
                slow.stdout,
                slow.stderr,
            ), mistake
            assert "Traceback" not in fast.stderr, mistake
            assert fast.returncode != 0 or "--help" in mistake, mistake
        ghost = json.loads(_both(["backlinks", "Charles Babbage", *where, "--json"], d.env)[0].stdout)
        assert len({e["source"] for e in ghost["backlinks"]}) == 3
        typo = _both(["links", "Ada Lovelac", *where], d.env)[0]
        assert typo.returncode == 4 and "did you mean 'Ada Lovelace'?" in typo.stderr
        # A reader that has gone (``| head -1``): every command ends quietly.
        wikid = str(Path(sys.executable).with_name("wikid"))
        for call in (
            [wikid, "query", "who wrote the first program?", *where],  # the fast path
            [wikid, "broken", *where, "--json"],
            [wikid, "graph", "--vault", str(vault)],  # click
            [wikid, "query", "--help"],
        ):
            code, err = _into_a_closed_pipe(call, d.env)
            assert err == "" and code != 0, (call, code, err)
        refused = _both(["search", "x", "--where", "type~book", *where], d.env)[0]
        assert refused.stderr.count("\n") == 1 and "bad filter" in refused.stderr
        stopped = _both(["stop", *where], d.env)[0]
        assert stopped.stdout == "stopping\n"
        d.proc.wait(60)  # type: ignore[union-attr]
        fast, slow = _both(["status", *where], d.env)  # no daemon: exit 3, one line
        assert fast.returncode == slow.returncode == 3 and fast.stderr == slow.stderr
    finally:
        d.stop()
