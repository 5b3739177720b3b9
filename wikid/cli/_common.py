"""What every command shares: the vault options, loading the config, printing a
reply, and calling the daemon.

Why stdlib + click only: every client command starts here, and a client call
must cost about one Python start-up, so nothing here may import LightRAG,
numpy or networkx (``tests/test_layers.py`` holds this).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from wikid.client import DaemonNotRunning, RemoteError, request
from wikid.config import ConfigError, VaultConfig
from wikid.config import load as load_config


class UserError(click.ClickException):
    """A mistake of the user's: one line ("Error: ..."), exit 2, nothing changed."""

    exit_code = 2


def vault_option(f: Any) -> Any:
    """--vault, --config and --socket, accepted by every command."""
    f = click.option(
        "--socket",
        "socket_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The daemon's socket (default: $XDG_RUNTIME_DIR/wikid/<vault>.sock).",
    )(f)
    f = click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Config file (default: $XDG_CONFIG_HOME/wikid/config.toml).",
    )(f)
    return click.option(
        "--vault",
        "vault",
        default=None,
        help="The vault folder, or the name of a [vaults.NAME] table in the config.",
    )(f)


workdir_option = click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="LightRAG working dir (default: $XDG_DATA_HOME/wikid/<vault-name>/).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")


def load(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    *,
    client: bool = False,
    **overrides: Any,
) -> VaultConfig:
    """The vault's configuration; a bad one is a usage error (one line, exit 2).

    A command that reads the vault itself (not ``client``) needs it to be a readable
    folder, so a typo creates and removes nothing; a client command needs only the
    daemon's socket, so ``--socket`` alone is enough."""
    try:
        cfg = load_config(config_path, vault, overrides={"socket": socket_path, **overrides})
    except ConfigError as exc:
        if client and socket_path is not None and vault is None:
            return VaultConfig(path=Path.cwd(), socket=socket_path).resolved()
        raise UserError(str(exc)) from exc
    if not client:
        if not cfg.path.is_dir():
            raise UserError(f"the vault {cfg.path} does not exist or is not a folder")
        if not os.access(cfg.path, os.R_OK | os.X_OK):
            raise UserError(f"the vault {cfg.path} cannot be read")
    return cfg


def show(data: Any, as_json: bool, readable: Any) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=1))
    else:
        click.echo(readable(data))


def call(cfg: VaultConfig, op: str, **args: Any) -> Any:
    """One request to the vault's daemon; no daemon is exit 3, an error reply exit 4."""
    assert cfg.socket is not None
    try:
        return request(cfg.socket, op, vault=str(cfg.path), **args)
    except DaemonNotRunning as exc:
        click.echo(str(exc), err=True)
        sys.exit(3)
    except RemoteError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(4)
