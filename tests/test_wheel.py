"""The user's path from a wheel built from this checkout: plain pip install into a
fresh venv outside the repo, an offline index of a small vault, and the systemd
unit written where XDG_CONFIG_HOME says, non-empty and accepted by systemd.

wikid comes only from the wheel. Its dependencies are this environment's (made
visible to the new venv by a path file), so the test downloads nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from daemontools import EXAMPLE
from wheeltools import run, wheel_venv


def test_a_wheel_installs_with_plain_pip_and_works_offline(tmp_path: Path) -> None:
    venv = wheel_venv(tmp_path)
    py = venv / "bin" / "python"

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "WIKID_"))},
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "HF_HUB_OFFLINE": "1",
    }
    wikid = venv / "bin" / "wikid"
    from wikid import __version__

    assert run(wikid, "--version", env=env).strip().endswith(__version__)
    where = run(
        py,
        "-c",
        "import wikid, wikid.store.tokens as t; print(wikid.__file__); print(t.tokenizer_path())",
        env=env,
    ).split()
    assert all(str(venv) in w for w in where), where  # wikid and its tokenizer: the wheel's
    # The distribution is wikid-rag ("wikid" on PyPI is another program); the import
    # package and the command are wikid.
    meta = (
        "import importlib.metadata as m; d = m.distribution('wikid-rag'); print(d.metadata['Name'])"
    )
    assert run(py, "-c", meta, env=env).strip() == "wikid-rag"

    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    # The thin client as installed (issue 54): a client call imports neither click nor
    # the full config, nor what those would bring (pathlib, typing, hashlib's OpenSSL).
    # No daemon runs yet: the call fails (exit 3) on the same imports as one that works.
    probe = subprocess.run(
        [py, "-X", "importtime", wikid, "status", "--vault", vault, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd="/",
    )
    assert probe.returncode == 3 and "no wikid daemon" in probe.stderr, probe.stderr[-500:]
    loaded = {line.split("|")[-1].strip() for line in probe.stderr.splitlines() if "|" in line}
    assert "wikid.cli._client" in loaded, sorted(loaded)
    heavy = {"click", "wikid.config", "pathlib", "typing", "hashlib", "logging"}
    assert not heavy & loaded, sorted(heavy & loaded)
    report = json.loads(run(wikid, "index", "--vault", vault, "--json", env=env))
    assert report["notes"] >= 5 and report["embedded"] > 0 and report["llm_calls"] == 0

    out = run(wikid, "service", "install", "--vault", vault, env=env)
    unit = tmp_path / "config" / "systemd" / "user" / "wikid@.service"
    assert str(unit) in out
    text = unit.read_text("utf-8")
    assert f"ExecStart={wikid} run --vault %i" in text and "[Install]" in text
    assert "Documentation=https://pypi.org/project/wikid-rag/" in text
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    run("systemd-analyze", "verify", unit, env=env)
    instance = unit.with_name("wikid@notes.service")
    instance.write_text(text, encoding="utf-8")
    score = run("systemd-analyze", "security", "--offline=yes", instance, env=env)
    exposure = float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", score).group(1))  # type: ignore[union-attr]
    assert exposure <= 4.0, score
    instance.unlink()
    run(wikid, "service", "uninstall", env=env)
    assert not unit.exists()


def test_service_install_never_replaces_a_unit_it_did_not_write(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from wikid.cli.commands import main

    unit = tmp_path / "systemd" / "user" / "wikid@.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    for args in (["service", "install", "--vault", str(EXAMPLE)], ["service", "uninstall"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code != 0 and "not written by wikid" in result.output
        assert unit.read_text(encoding="utf-8") == "[Service]\nExecStart=/bin/true\n"
