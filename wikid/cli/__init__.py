"""The ``wikid`` command line.

Why two parsers: a client command (status, links, query, ...) costs one Python
start-up plus a socket round trip, so ``_fast`` parses a well-formed one with the
standard library and runs it without importing click; everything else, and every
``--help`` or mistake, goes to the click group in ``commands``, one module per
command group, each importing what is heavy only when it runs.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """``wikid``: the fast path for a client call, else click."""
    args = sys.argv[1:] if argv is None else list(argv)
    from wikid.cli._fast import run

    if run(args):
        return
    from wikid.cli.commands import main as group

    group.main(args=args)


__all__ = ["main"]
