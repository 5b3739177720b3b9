"""``wikid run`` (the daemon in the foreground) and ``wikid service`` (its systemd unit).

Why together: both are about the daemon's process, not about what it answers.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from wikid.cli._common import load, vault_option, workdir_option
from wikid.config import default_config_path


def tune_for_the_daemon() -> None:
    """Two process settings for the daemon alone, before it is imported.

    numpy's OpenBLAS starts a thread per core for each matrix product. The daemon runs
    its work side by side already (a query's retrievers, the model's runs, edits), so
    those threads only fight over the cores: a query's vector scan of 104k rows took
    84 ms beside two busy threads with them, 8.8 ms without, and a restarted 13k
    daemon's query p50 went 276 -> 66-97 ms. (A one-off build, ``wikid index``, gains
    from them.) Read when numpy loads; a user's own setting wins.

    The GIL's switch interval, 5 ms -> 1 ms: the event loop answers ``status`` between
    worker threads that plan, parse and load in Python, and each time it wants the GIL
    back it waited up to an interval per busy thread. Measured on 2 cores (status every
    10 ms): 13k restarts, p99 53 -> 32 ms and worst 99 -> 68 ms (medians of 5 each); a
    cold start of vaultofknowledge, p99 33 -> 16 ms, with serving no later; cold starts
    of 900 of its notes, fully embedded in 73.8 s against 73.5 s (medians of 3), p99
    18 -> 8 ms, worst 42 -> 21 ms."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.setswitchinterval(0.001)


@click.command()
@vault_option
@workdir_option
def run(
    vault: str | None, config_path: Path | None, socket_path: Path | None, workdir: Path | None
) -> None:
    """Run the daemon in the foreground: sync, then watch and serve the socket.

    Example: wikid run --vault ~/Notes"""
    tune_for_the_daemon()
    from wikid.server.daemon import run as run_daemon
    from wikid.server.log import configure

    cfg = load(vault, config_path, socket_path, workdir=workdir)
    configure(cfg.log_level)
    sys.exit(run_daemon(cfg, config_path))


@click.group()
def service() -> None:
    """The systemd user service.

    Example: wikid service install --vault notes"""


MARK = "# Written by `wikid service install`; `wikid service uninstall` removes it.\n"


def _unit_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user" / "wikid@.service"


def _ours(path: Path) -> bool:
    """A unit file wikid wrote (so wikid may replace or remove it), or none at all."""
    try:
        return path.read_text("utf-8").startswith(MARK)
    except FileNotFoundError:
        return True
    except (OSError, UnicodeDecodeError):
        return False


def _wikid_command() -> str:
    """How systemd should start this wikid: its console script beside this Python,
    else this Python with ``-m wikid``."""
    script = Path(sys.executable).with_name("wikid")
    return str(script) if script.exists() else f"{sys.executable} -m wikid"


@service.command("install")
@vault_option
def service_install(vault: str | None, config_path: Path | None, socket_path: Path | None) -> None:
    """Write the wikid@.service user unit and print how to enable it for a vault.

    Example: wikid service install --vault notes"""
    import importlib.resources

    cfg = load(vault, config_path, socket_path)
    template = (importlib.resources.files("wikid") / "data" / "wikid@.service").read_text("utf-8")
    if "ExecStart=" not in template:
        raise click.ClickException("this wikid install has no systemd unit template")
    unit = _unit_path()
    if not _ours(unit):
        raise click.ClickException(f"{unit} exists and was not written by wikid; not replacing it")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(MARK + template.replace("/usr/bin/env wikid", _wikid_command()), "utf-8")
    click.echo(f"wrote {unit}")
    if cfg.name not in _configured_names(config_path):
        # The unit runs `wikid run --vault NAME`: the name needs its [vaults.NAME] table.
        # A config file wikid would create is written; one the user has is only shown.
        table = f"[vaults.{json.dumps(cfg.name)}]\npath = {json.dumps(str(cfg.path))}\n"
        config = config_path or default_config_path()
        if not config.exists():
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(f"# written by wikid service install\n{table}", "utf-8")
            click.echo(f"wrote {config} with the vault's table, [vaults.{cfg.name}]")
        else:
            click.echo(f"add the vault to {config} first:\n{table}")
    click.echo(f"systemctl --user daemon-reload && systemctl --user enable --now wikid@{cfg.name}")


@service.command("uninstall")
def service_uninstall() -> None:
    """Remove the unit that `wikid service install` wrote (stop the instances first:
    systemctl --user disable --now wikid@NAME).

    Example: wikid service uninstall"""
    unit = _unit_path()
    if not unit.exists():
        click.echo(f"no unit at {unit}")
        return
    if not _ours(unit):
        raise click.ClickException(f"{unit} was not written by wikid; leaving it")
    unit.unlink()
    click.echo(f"removed {unit}; then: systemctl --user daemon-reload")


def _configured_names(config_path: Path | None) -> set[str]:
    from wikid.config import all_vaults

    try:
        return {v.name for v in all_vaults(config_path)}
    except Exception:
        return set()
