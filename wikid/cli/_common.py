"""What every click command shares: the vault options and loading the config (a
client command's through ``_client.client_config``, which the fast path shares).

Why stdlib + click only: every client command starts here, and a client call
must cost about one Python start-up, so nothing here may import LightRAG,
numpy or networkx (``tests/test_layers.py`` holds this).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from wikid._where import Where
from wikid.cli._client import client_config
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


def load(
    vault: str | None, config_path: Path | None, socket_path: Path | None, **overrides: Any
) -> VaultConfig:
    """The vault's configuration; a bad one is a usage error (one line, exit 2).

    The command reads the vault itself, so it must be a readable folder: a typo creates
    and removes nothing."""
    try:
        cfg = load_config(config_path, vault, overrides={"socket": socket_path, **overrides})
    except ConfigError as exc:
        raise UserError(str(exc)) from exc
    if not cfg.path.is_dir():
        raise UserError(f"the vault {cfg.path} does not exist or is not a folder")
    if not os.access(cfg.path, os.R_OK | os.X_OK):
        raise UserError(f"the vault {cfg.path} cannot be read")
    return cfg


def daemon(vault: str | None, config_path: Path | None, socket_path: Path | None) -> Where:
    """Where a client command's daemon listens: it needs only the socket, so
    ``--socket`` alone is enough; a bad configuration is a usage error."""
    try:
        return client_config(
            vault,
            str(config_path) if config_path else None,
            str(socket_path) if socket_path else None,
        )
    except ConfigError as exc:
        raise UserError(str(exc)) from exc


# Property filters (``sync/props.py``) on search and query.
where_option = click.option(
    "--where",
    multiple=True,
    help="Only notes whose properties pass this filter (repeatable: all must pass), "
    "e.g. type=book, year>=2020, 'author=[[Kevin Kelly]]', tags=project, folder=Books, "
    "modified>=30d.",
)
