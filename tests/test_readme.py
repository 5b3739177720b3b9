"""The README's commands run as written: every ``wikid …`` line of its fenced shell
blocks, in order, against a copy of the bundled example vault where the README says
``~/Notes``, with a real daemon started by the README's own ``wikid run`` line. A
command that exits non-zero, or a flag the CLI does not know, fails the test, so a
README that drifts from the CLI fails CI."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from daemontools import EXAMPLE

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_commands(text: str) -> list[list[str]]:
    """The ``wikid`` command lines of the README's ``sh`` blocks, comments dropped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "wikid":
                out.append(words)
    return out


def test_readme_commands_parse_and_cover_the_daily_ones() -> None:
    commands = readme_commands(README.read_text("utf-8"))
    assert {c[1] for c in commands} >= {"run", "status", "query", "search", "related", "stop"}
    assert commands[0][1] == "run", "the README starts the daemon before asking it anything"


def test_every_readme_command_runs_on_the_example_vault(tmp_path: Path) -> None:
    home = tmp_path / "home"
    vault = home / "Notes"
    shutil.copytree(EXAMPLE, vault)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "WIKID_RECONCILE_INTERVAL_S": "3600",
    }
    text = README.read_text("utf-8").replace("~/Notes", str(vault))
    commands = readme_commands(text)

    def wikid(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wikid", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    run, rest = commands[0], commands[1:]
    log = tmp_path / "daemon.log"
    with open(log, "wb") as fh:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "wikid", *run[1:]], env=env, stdout=fh, stderr=fh
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert daemon.poll() is None, f"{shlex.join(run)} exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the README's daemon never became ready"
            status = wikid(["status", "--vault", str(vault), "--json"])
            if status.returncode == 0 and json.loads(status.stdout)["ready"]:
                break
            time.sleep(0.3)
        for words in rest:
            done = wikid(words[1:])
            assert done.returncode == 0, (shlex.join(words), done.returncode, done.stderr)
            assert "Traceback" not in done.stderr, (shlex.join(words), done.stderr)
        assert daemon.wait(timeout=60) == 0, "the README's `wikid stop` stops the daemon"
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(timeout=60)
