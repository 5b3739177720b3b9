"""Client commands parsed with the standard library, before click is imported.

Why: a client call (``wikid status``, ``links``, ``query``, ...) should cost about
one Python start-up, and importing click cost several (issue 40). Only a
well-formed call is taken here: ``--help``, ``--version``, an unknown option, a
missing argument or a value click would refuse all return ``False``, and the
click command then runs as before, so help texts and error messages are click's,
unchanged. Each spec below mirrors its click command's options
(``tests/test_cli.py`` checks that they agree).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's own costs a client call ~4 ms
if TYPE_CHECKING:
    from typing import Any

COMMON = {"--vault": "vault", "--config": "config", "--socket": "socket"}
# command -> (its positional argument, {option: (name, kind)}); kind "flag", "str",
# "int", "many" (a string, repeatable: a list), "budget" or "mode" (checked as click does). ``--json`` is every command's but stop's and reindex's.
SPECS: dict[str, tuple[str | None, dict[str, tuple[str, str]]]] = {
    "status": (None, {}),
    "links": ("note", {}),
    "backlinks": ("note", {}),
    "broken": (None, {}),
    "neighbors": ("note", {"--depth": ("depth", "int"), "--limit": ("limit", "int")}),
    "related": (
        "note",
        {
            "--limit": ("limit", "int"),
            "--include-linked": ("include_linked", "flag"),
            "--where": ("where", "many"),
        },
    ),
    "search": (
        "text",
        {
            "-k": ("k", "int"),
            "--limit": ("k", "int"),
            "--folder": ("folder", "str"),
            "--tag": ("tag", "str"),
            "--where": ("where", "many"),
        },
    ),
    "query": (
        "text",
        {
            "--mode": ("mode", "mode"),
            "--budget": ("budget", "budget"),
            "--answer": ("answer", "flag"),
            "--explain": ("explain", "flag"),
            "--where": ("where", "many"),
        },
    ),
    "cost": (None, {}),
    "stop": (None, {}),
    "reindex": (None, {}),
}
NO_JSON = ("stop", "reindex")
BUDGET = (50, 100_000)  # --budget's range, as config.RANGES["query_budget"] and click's


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """(command, values) of a well-formed client call, else None (click takes it)."""
    if not argv or argv[0] not in SPECS:
        return None
    command, rest = argv[0], argv[1:]
    positional, options = SPECS[command]
    known: dict[str, tuple[str, str]] = {k: (v, "str") for k, v in COMMON.items()}
    known.update(options)
    if command not in NO_JSON:
        known["--json"] = ("json", "flag")
    values: dict[str, Any] = {}
    args: list[str] = []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "--":
            args += rest[i + 1 :]
            break
        if not word.startswith("-") or word == "-":
            args.append(word)
            i += 1
            continue
        flag, eq, inline = word.partition("=")
        if flag not in known:
            return None  # --help, a typo, a short form: click says what it says
        name, kind = known[flag]
        if kind == "flag":
            if eq:
                return None
            values[name] = True
            i += 1
            continue
        if eq:
            raw = inline
            i += 1
        elif i + 1 < len(rest):
            raw = rest[i + 1]
            i += 2
        else:
            return None
        value = _value(raw, kind)
        if value is None:
            return None
        if kind == "many":
            values.setdefault(name, []).append(value)
        else:
            values[name] = value
    if len(args) != (1 if positional else 0):
        return None
    if positional:
        values[positional] = args[0]
    return command, values


def _value(raw: str, kind: str) -> Any:
    if kind in ("int", "budget"):
        try:
            number = int(raw.strip())
        except ValueError:
            return None
        if kind == "budget" and not BUDGET[0] <= number <= BUDGET[1]:
            return None  # click's own range error, exit 2
        return number
    if kind == "mode":  # config is not light: imported only when a mode is given
        from wikid.config import QUERY_MODES

        return raw if raw in QUERY_MODES else None
    return raw


def run(argv: list[str]) -> bool:
    """Run a well-formed client call and return True, or return False untouched."""
    parsed = parse(argv)
    if parsed is None:
        return False
    from wikid._where import ConfigError
    from wikid.cli._client import client_config, run_op, run_query

    command, v = parsed
    try:
        cfg = client_config(v.get("vault"), v.get("config"), v.get("socket"))
    except ConfigError:
        return False  # click's command says so, in its words
    as_json = bool(v.pop("json", False))
    # The op's arguments are what was given; the daemon defaults the rest as click's
    # options do (k 8, depth 1, limit 50, no explain, the config's mode and budget).
    args = {k: x for k, x in v.items() if k not in COMMON.values()}
    if command == "query":
        run_query(cfg, args, bool(args.pop("answer", False)), as_json)
    else:
        run_op(cfg, command, as_json, **args)
    sys.stdout.flush()
    return True
