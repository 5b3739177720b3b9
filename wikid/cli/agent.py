"""``wikid mcp``: serve the vault's index to agents over MCP (stdio).

Why a module of its own: the MCP SDK is imported only when this command runs,
so no other command pays for it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from wikid.cli._common import daemon, vault_option


@click.command("mcp")
@vault_option
@click.option("--print-config", is_flag=True, help="Print the JSON that registers this server.")
def mcp(
    vault: str | None, config_path: Path | None, socket_path: Path | None, print_config: bool
) -> None:
    """Serve the vault's fresh index to agents over MCP (stdio), read-only.

    It talks to the vault's running daemon (wikid run) and indexes nothing itself.

    Example: wikid mcp --vault ~/Notes --print-config"""
    cfg = daemon(vault, config_path, socket_path)
    try:
        from wikid.cli.mcp_server import build, client_config
    except ImportError as exc:
        raise click.ClickException(
            f"the MCP SDK is not installed ({exc}): pip install mcp"
        ) from exc
    if print_config:
        script = Path(sys.executable).with_name("wikid")
        command = str(script) if script.exists() else "wikid"
        click.echo(json.dumps(client_config(cfg, command), indent=2))
        return
    build(cfg).run("stdio")
