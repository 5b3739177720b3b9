"""A user's mistakes get one line and exit 2, and destroy nothing; the output a
script reads stays clean. Real processes, real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from daemontools import EXAMPLE, DaemonProc
from graphtools import write


def _wikid(
    *args: str | Path, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wikid", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("WIKID_", "XDG_"))},
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in proc.stderr


def test_a_vault_that_is_not_there_creates_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    for command in (["index"], ["run"], ["graph"]):
        proc = _wikid(*command, "--vault", tmp_path / "no" / "such" / "dir", env=env)
        _one_line_error(proc, "does not exist")
    a_file = tmp_path / "file.md"
    a_file.write_text("x", encoding="utf-8")
    _one_line_error(_wikid("index", "--vault", a_file, env=env), "not a folder")
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("vaults = 5\n", ("vaults must be tables",)),
        ("reconcile_interval_s = 0\n", ("reconcile_interval_s", "0.5")),
        ("max_note_bytes = -1\n", ("max_note_bytes", "-1")),
        ("debounce_ms = 'soon'\n", ("debounce_ms",)),
        ("log_level = 'loud'\n", ("log_level", "loud")),
        ("colour = 'blue'\n", ("unknown key", "colour")),
    ],
)
def test_a_bad_config_value_names_the_key(
    tmp_path: Path, env: dict[str, str], toml: str, words: tuple[str, ...]
) -> None:
    config = tmp_path / "wikid.toml"
    config.write_text(toml, encoding="utf-8")
    proc = _wikid("index", "--vault", EXAMPLE, "--config", config, env=env)
    _one_line_error(proc, *words)


def test_an_emptied_vault_never_wipes_its_store(tmp_path: Path, env: dict[str, str]) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    first = json.loads(_wikid("index", "--vault", vault, "--json", env=env).stdout)
    for note in vault.rglob("*.md"):
        note.unlink()  # as a failed sync tool or a wrong folder would leave it
    proc = _wikid("index", "--vault", vault, "--json", env=env)
    _one_line_error(proc, "has no notes", "--force")
    shutil.rmtree(tmp_path / "restore", ignore_errors=True)
    shutil.copytree(EXAMPLE, tmp_path / "restore")
    for note in (tmp_path / "restore").rglob("*.md"):  # the notes come back: all still there
        dest = vault / note.relative_to(tmp_path / "restore")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(note, dest)
    back = json.loads(_wikid("index", "--vault", vault, "--json", env=env).stdout)
    assert back["entities"] == first["entities"] and back["embedded"] == 0
    for note in vault.rglob("*.md"):
        note.unlink()
    forced = json.loads(_wikid("index", "--vault", vault, "--json", "--force", env=env).stdout)
    assert forced["notes"] == 0 and forced["removed"] == first["notes"]


def test_json_stdout_holds_only_json_even_when_a_migration_runs(
    tmp_path: Path, env: dict[str, str]
) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    stock = _wikid(
        "index", "--vault", vault, "--json", env={**env, "WIKID_STORE": "lightrag-files"}
    )
    assert stock.returncode == 0, stock.stderr
    migrated = _wikid("index", "--vault", vault, "--json", env=env)  # sqlite: migrates first
    assert migrated.returncode == 0, migrated.stderr
    assert json.loads(migrated.stdout)["embedded"] == 0  # one JSON document, nothing else
    assert "migrated" in migrated.stderr


def test_a_dotenv_in_the_current_folder_is_not_read(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / ".env").write_text("WIKID_TEST_FROM_DOTENV=1\nMAX_ASYNC=999\n", encoding="utf-8")
    probe = (
        "import os, wikid, lightrag.utils, lightrag.lightrag\n"
        "print(os.environ.get('WIKID_TEST_FROM_DOTENV'), os.environ.get('MAX_ASYNC'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.stdout.split() == ["None", "None"], out.stdout + out.stderr


def test_numpy_multiplies_on_one_thread_in_the_daemon(env: dict[str, str]) -> None:
    """The daemon runs its work side by side already; OpenBLAS's own thread per core
    only fought it (a vector scan 84 ms instead of 8.8 beside two busy threads), and the
    event loop waited longer for the GIL with the default switch interval. What
    ``wikid run`` does before it imports the daemon, then asked of the OpenBLAS that
    numpy loaded and of the interpreter; a user's own BLAS setting still wins."""
    probe = (
        "import ctypes, sys\n"
        "from wikid.cli.run import tune_for_the_daemon\n"
        "tune_for_the_daemon()\n"
        "from wikid.server import daemon\n"
        "import numpy\n"
        "lib = next(l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l)\n"
        "blas = ctypes.CDLL(lib)\n"
        "get = next(getattr(blas, n) for n in ('scipy_openblas_get_num_threads64_',"
        " 'openblas_get_num_threads64_', 'openblas_get_num_threads') if hasattr(blas, n))\n"
        "print(get(), sys.getswitchinterval())"
    )
    for setting, threads in ((None, "1"), ("2", "2")):
        run_env = {k: v for k, v in env.items() if k != "OPENBLAS_NUM_THREADS"}
        if setting:
            run_env["OPENBLAS_NUM_THREADS"] = setting
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=run_env, timeout=60
        )
        assert out.stdout.split() == [threads, "0.001"], out.stdout + out.stderr


def test_templates_with_placeholders_are_not_rejected(tmp_path: Path) -> None:
    from wikid.core.graph import VaultGraph

    write(
        tmp_path,
        "Templates/Daily.md",
        "---\ncreated: {{date}}\ntitle: {{title}}\ntags: [daily]\n---\n# {{title}}\n",
    )
    write(
        tmp_path,
        "Templates/Meeting.md",
        '---\nwhen: {{date:YYYY-MM-DD}} {{time}}\nup: "[[Home]]"\n---\nNotes\n',
    )
    vg = VaultGraph.load(tmp_path)
    assert not vg.problems
    assert vg.notes["Templates/Daily.md"].properties["created"] == "{{date}}"
    assert [lk.target for lk in vg.notes["Templates/Meeting.md"].links] == ["Home"]


def test_socket_alone_is_enough_for_a_client_command(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    d = DaemonProc(vault, tmp_path).start()
    try:
        env = {k: v for k, v in d.env.items() if not k.startswith("WIKID_PATH")}
        proc = _wikid("status", "--socket", d.socket, "--json", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["vault"] == str(vault.resolve())
        stopped = _wikid("stop", "--socket", d.socket, env=env, cwd=tmp_path)
        assert stopped.returncode == 0 and "stopping" in stopped.stdout
        assert d.proc is not None and d.proc.wait(timeout=60) == 0
    finally:
        d.stop()


def test_no_daemon_messages_point_the_right_way(tmp_path: Path, env: dict[str, str]) -> None:
    """With no daemon: ``--socket`` alone names that socket, not the current folder as a
    vault; ``WIKID_SOCKET`` alone works as ``--socket`` does; ``stop`` says there is
    nothing to stop; a vault's message says how a daemon on another socket is found;
    ``--budget -5`` is a usage error (exit 2). A daemon logs its socket and store, and
    the steps of its start, each timed (what a slow start is read from)."""
    sock = tmp_path / "elsewhere.sock"
    proc = _wikid("status", "--socket", sock, env=env, cwd=tmp_path)
    assert proc.returncode == 3 and str(sock) in proc.stderr
    assert f"--socket {sock}" in proc.stderr and str(tmp_path) + " " not in proc.stderr
    assert "for vault" not in proc.stderr and "Traceback" not in proc.stderr
    by_env = _wikid("status", env={**env, "WIKID_SOCKET": str(sock)}, cwd=tmp_path)
    assert (by_env.returncode, by_env.stderr) == (proc.returncode, proc.stderr)
    stop = _wikid("stop", "--socket", sock, env=env, cwd=tmp_path)
    assert "nothing to stop" in stop.stderr and "Start one" not in stop.stderr
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    named = _wikid("status", "--vault", vault, env=env)
    assert named.returncode == 3 and f"wikid run --vault {vault.resolve()}" in named.stderr
    assert "with the same --socket" in named.stderr
    budget = _wikid("query", "x", "--vault", vault, "--budget", "-5", env=env)
    assert budget.returncode == 2 and "Traceback" not in budget.stderr

    d = DaemonProc(vault, tmp_path, env=env).start()
    try:
        log = d.log.read_text()
        assert '"listening"' in log or "listening" in log
        assert str(d.socket) in log and str(d.workdir) in log
        events = {e["event"]: e for e in map(json.loads, log.splitlines()) if "event" in e}
        read, written = events["vault read"], events["search index written"]
        listening, serving = events["listening"], events["serving"]
        assert read["notes"] == d.call("status")["notes"] and read["s"] >= 0
        assert written["rows"] > 0 and written["keys_s"] >= 0 and written["search_s"] >= 0
        assert 0 <= read["s"] <= listening["s"] <= serving["s"]
    finally:
        d.stop()


def test_service_install_takes_a_path_and_writes_the_vaults_table(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """``wikid service install --vault PATH`` with no config: the unit, and a config file
    naming the vault, so the instance it prints (wikid@NAME) starts that vault. A config
    the user wrote is never changed: the table is shown instead."""
    import tomllib

    vault = tmp_path / "My Notes"
    shutil.copytree(EXAMPLE, vault)
    proc = _wikid("service", "install", "--vault", vault, env=env)
    assert proc.returncode == 0, proc.stderr
    config = tmp_path / "config" / "wikid" / "config.toml"
    tables = tomllib.loads(config.read_text("utf-8"))["vaults"]
    ((name, table),) = tables.items()
    assert table["path"] == str(vault.resolve()) and f"wikid@{name}" in proc.stdout
    status = _wikid("status", "--vault", name, env=env)  # the unit's `run --vault %i`
    assert status.returncode == 3 and str(vault.resolve()) in status.stderr
    mine = "# mine\n"
    config.write_text(mine, "utf-8")
    again = _wikid("service", "install", "--vault", vault, env=env)
    assert again.returncode == 0 and f"[vaults.{json.dumps(name)}]" in again.stdout
    assert config.read_text("utf-8") == mine


def test_two_vaults_with_one_folder_name_never_share_a_store(
    tmp_path: Path, env: dict[str, str]
) -> None:
    from wikid.config import load

    work, home = tmp_path / "work" / "Notes", tmp_path / "home" / "Notes"
    write(work, "Work.md", "# Work\n[[Plan]]\n")
    write(home, "Home.md", "# Home\n[[Garden]]\n")
    for vault in (work, home):
        assert _wikid("index", "--vault", vault, "--json", env=env).returncode == 0
    cfg_w = load(None, work, environ=env)
    cfg_h = load(None, home, environ=env)
    assert cfg_w.workspace != cfg_h.workspace and cfg_w.socket != cfg_h.socket
    stores = sorted(
        p.parent.name for p in (tmp_path / "data" / "wikid").glob("*/*/wikid-store.sqlite")
    )
    assert len(stores) == 2 and all(s.startswith("Notes_") for s in stores)
    graph_w = json.loads(_wikid("graph", "--vault", work, "--json", env=env).stdout)
    assert {n["id"] for n in graph_w["nodes"] if n["kind"] == "note"} == {"Work.md"}


def test_a_store_under_the_old_naming_is_moved_not_rebuilt(
    tmp_path: Path, env: dict[str, str]
) -> None:
    import asyncio

    from wikid.sync.index import Index

    vault = tmp_path / "Notes"
    shutil.copytree(EXAMPLE, vault)
    old_workdir = tmp_path / "data" / "wikid" / "Notes"

    async def build_old() -> None:  # what wikid 0.1 left: data/wikid/Notes/Notes/
        idx = await Index.open(vault, old_workdir, workspace="Notes")
        await idx.sync()
        await idx.close()

    asyncio.run(build_old())
    report = json.loads(_wikid("index", "--vault", vault, "--json", env=env).stdout)
    assert report["embedded"] == 0 and report["added"] == 0  # the same store, moved
    assert not old_workdir.exists()
    (moved,) = (tmp_path / "data" / "wikid").glob("Notes_*/Notes_*/wikid-store.sqlite")
    assert moved.exists()


def test_the_thin_client_finds_the_socket_config_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client call without a config file locates the daemon with ``os`` alone
    (``_where``, issue 54); it must agree with the full configuration, which the daemon
    reads, for a vault given through a symlink, by ``WIKID_PATH``, with ``WIKID_NAME``
    or ``WIKID_SOCKET``; the command line's vault wins over ``WIKID_PATH``."""
    from wikid._where import without_config
    from wikid.config import load

    for key in [k for k in os.environ if k.startswith("WIKID_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    real, other = tmp_path / "My Notes", tmp_path / "Other"
    real.mkdir(), other.mkdir()
    (tmp_path / "link").symlink_to(real)
    cases: list[tuple[str | None, dict[str, str]]] = [
        (str(tmp_path / "link"), {}),
        (None, {"WIKID_PATH": str(real)}),
        (str(real), {"WIKID_PATH": str(other)}),
        (str(real), {"WIKID_NAME": "notes"}),
        (str(real), {"WIKID_SOCKET": str(tmp_path / "s.sock")}),
    ]
    for vault, environ in cases:
        with monkeypatch.context() as m:
            for key, value in environ.items():
                m.setenv(key, value)
            light = without_config(vault, None)
            full = load(None, vault).daemon()
        assert light is not None
        assert (light.path, light.socket, light.name) == (full.path, full.socket, full.name)
        assert light.path == str(real.resolve()), (vault, environ)
    (tmp_path / "config" / "wikid").mkdir(parents=True)
    (tmp_path / "config" / "wikid" / "config.toml").write_text("", "utf-8")
    assert without_config(str(real), None) is None  # a config file: read it in full
