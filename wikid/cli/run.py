"""``wikid run`` (the daemon in the foreground) and ``wikid service`` (its systemd unit).

Why together: both are about the daemon's process, not about what it answers.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from wikid.cli._common import load, vault_option, workdir_option


@click.command()
@vault_option
@workdir_option
def run(
    vault: str | None, config_path: Path | None, socket_path: Path | None, workdir: Path | None
) -> None:
    """Run the daemon in the foreground: sync, then watch and serve the socket."""
    from wikid.server.daemon import run as run_daemon
    from wikid.server.log import configure

    cfg = load(vault, config_path, socket_path, workdir=workdir)
    configure(cfg.log_level)
    sys.exit(run_daemon(cfg, config_path))


@click.group()
def service() -> None:
    """The systemd user service."""


UNIT = Path(__file__).resolve().parents[2] / "systemd" / "wikid@.service"


@service.command("install")
@vault_option
def service_install(vault: str | None, config_path: Path | None, socket_path: Path | None) -> None:
    """Write the wikid@.service user unit and print how to enable it for a vault."""
    cfg = load(vault, config_path, socket_path)
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
