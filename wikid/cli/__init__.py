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
    """``wikid``: the fast path for a client call, else click. Output cut short by its
    reader (``wikid query ... | head -1``) ends the command quietly, as ``cat`` does."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        _main(args)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        _quiet_exit()


def _main(args: list[str]) -> None:
    from wikid.cli._fast import run

    if run(args):
        return
    from wikid.cli.commands import main as group

    group.main(args=args)


def _quiet_exit() -> None:
    """The reader left: nothing more can be said to it. Point stdout at /dev/null so
    that the interpreter's own flush at exit raises nothing, and exit as a shell
    reports a command killed by SIGPIPE (128 + 13)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os._exit(141)


__all__ = ["main"]
