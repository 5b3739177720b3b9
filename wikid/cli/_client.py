"""The client commands' work, with the standard library alone: find the daemon's
socket, send one op, print the reply readably or as JSON.

Why apart from the click commands: a client call should cost about one Python
start-up, and importing click alone cost several times that (issue 40: 53 ms for
``wikid status --json`` against 8 ms for a bare ``python -c pass``). ``_fast``
parses a well-formed client call with this module only; the click commands
(``navigate``, ``ask``) call the same functions, so the two paths print the same.
"""

from __future__ import annotations

import json
import sys

from wikid._where import UNKNOWN, ConfigError, Where, socket_alone, without_config
from wikid.client import DaemonNotRunning, RemoteError, request

TYPE_CHECKING = False  # typing's own costs a client call ~4 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def client_config(vault: str | None, config: str | None, socket: str | None) -> Where:
    """Where a client command's daemon listens: it needs only the socket, so
    ``--socket`` alone is enough. Without a config file this is ``os`` work
    (``_where``); with one, the configuration is read in full. Raises
    ``ConfigError`` for a bad one."""
    found = None if config else without_config(vault, socket)
    if found is not None:
        return found
    from pathlib import Path

    from wikid.config import load as load_config

    socket = socket or _env_socket()
    config_path = Path(config) if config else None
    try:
        socket_path = Path(socket) if socket else None
        return load_config(config_path, vault, overrides={"socket": socket_path}).daemon()
    except ConfigError:
        if socket is not None and vault is None:  # the vault is the daemon's business
            return socket_alone(socket)
        raise


def _env_socket() -> str | None:
    import os

    return os.environ.get("WIKID_SOCKET") or None


def not_running(cfg: Where, op: str) -> str:
    """What to say when nothing listens on the vault's socket: the socket, and how to
    start a daemon there (with the same ``--socket``, the service's instance name)."""
    from wikid._where import default_socket, safe_name

    sock = cfg.socket
    known = cfg.name != UNKNOWN
    if op == "stop":
        return f"no wikid daemon listens on {sock}: nothing to stop"
    head = (
        f"no wikid daemon is running for vault {cfg.path} (nothing listens on {sock})."
        if known
        else f"no wikid daemon listens on {sock}."
    )
    custom = sock != default_socket(safe_name(cfg.name)) if known else True
    run = f"wikid run --vault {cfg.path if known else 'PATH'}" + (
        f" --socket {sock}" if custom else ""
    )
    lines = [head, f"Start one with:  {run}"]
    if known and not custom:
        lines.append("(A daemon started with --socket is found only with the same --socket.)")
        lines.append(f"or as a service:  systemctl --user start wikid@{cfg.name}")
    return "\n".join(lines)


def show(data: Any, as_json: bool, readable: Callable[[Any], str]) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=1) if as_json else readable(data))


def call(cfg: Where, op: str, **args: Any) -> Any:
    """One request to the vault's daemon; no daemon is exit 3, an error reply exit 4."""
    try:
        return request(cfg.socket, op, vault=str(cfg.path), **args)
    except DaemonNotRunning:
        print(not_running(cfg, op), file=sys.stderr)
        sys.exit(3)
    except RemoteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(4)


# -- readable printouts ------------------------------------------------------


def status_text(s: dict[str, Any]) -> str:
    lines = [
        f"vault       {s['vault']}",
        f"state       {s.get('phase', '?')}; "
        + ("ready" if s["ready"] else "not ready yet")
        + ("; applying a batch" if s["busy"] else ""),
        f"notes       {s['notes']}  entities {s['entities']}  relations {s['relations']}  chunks {s['chunks']}",
        f"queue       {s['queue']} paths, lag {s['lag_seconds']} s, {s['batches']} batches",
        f"store       {s['store']['backend']} at {s['store']['workdir']}"
        + ("  (BEHIND: " + str(s["store"]["last_error"]) + ")" if s["store"]["behind"] else ""),
        f"embedding   {s['embedding_model']}; LLM calls while indexing {s['llm_calls']}",
        f"llm         {s['llm']['model'] if s['llm']['configured'] else 'not configured (evidence only)'}; "
        f"{s['cost']['calls']} calls, {s['cost']['input_tokens']} tokens in, "
        f"{s['cost']['output_tokens']} out"
        + (f", est. {s['cost']['cost']:.4f}" if s["cost"]["cost"] is not None else ""),
        _extraction_line(s.get("extraction") or {}),
        f"uptime      {s['uptime_seconds']} s (pid {s['pid']})",
        f"rejected    {len(s['rejected'])} files",
    ]
    lines += [f"  {p}: {why}" for p, why in s["rejected"].items()]
    if s["watcher"].get("overflows"):
        lines.append(
            f"watcher     the OS dropped file events {s['watcher']['overflows']} times; "
            "each time the vault was rescanned"
        )
    if s.get("conflicts"):
        lines.append(f"conflicts   {len(s['conflicts'])} sync-conflict copies, oldest first")
        lines += [f"  {c['path']}  (a copy of {c['original']})" for c in s["conflicts"]]
    return "\n".join(lines)


def _extraction_line(x: dict[str, Any]) -> str:
    if not x.get("enabled"):
        return "extraction  off (extract = true in the config turns it on)"
    line = (
        f"extraction  {x['extracted_chunks']} chunks extracted, {x['waiting_chunks']} waiting, "
        f"{x['skipped_chunks']} skipped by salience (< {x['threshold']}), "
        f"{x['failed_chunks']} failed"
    )
    if not x.get("llm"):
        line += "; no LLM configured, so nothing new is sent"
    if x.get("last_error") and x["failed_chunks"]:
        line += f"; last error: {x['last_error']}"
    return line


def edges_text(key: str) -> Callable[[dict[str, Any]], str]:
    def text(data: dict[str, Any]) -> str:
        rows = [f"{data['note']}:"]
        for e in data[key]:
            other = e["target"] if key == "links" else e["source"]
            mark = " (unresolved)" if e.get("unresolved") else ""
            rows.append(
                f"  {other}{mark}  [{e['kind']}, line {e['line']}]  {e['context'] or ''}".rstrip()
            )
        return "\n".join(rows) if data[key] else rows[0] + " none"

    return text


def broken_text(data: dict[str, Any]) -> str:
    return (
        "\n".join(f"{b['target']}  <- {', '.join(b['sources'])}" for b in data["broken"]) or "none"
    )


def neighbors_text(data: dict[str, Any]) -> str:
    rows = [f"{data['note']}: {data['total']} notes nearby"]
    for n in data["neighbors"]:
        mark = " (unresolved)" if n["unresolved"] else ""
        rows.append(f"  {n['note']}{mark}  [hop {n['hop']}: {', '.join(n['kinds'])}]")
    return "\n".join(rows)


def _why(item: dict[str, Any]) -> str:
    """One line of --explain: what retrieval saw in the item."""
    why = item.get("why")
    if not why:
        return ""
    parts = [f"rank {why['fused_rank']}" if why.get("fused_rank") is not None else "unranked"]
    if "named" in why:
        parts.append(f"from {why['named']!r}, hop {why['hop']}, edge {why['edge']}")
    if item.get("covers"):
        parts.append("covers " + ", ".join(item["covers"]))
    return "\n          why: " + "; ".join(parts)


ITEM_CHARS = 300  # characters of an item's text printed for a person


def evidence_text(res: dict[str, Any]) -> str:
    """The evidence best first (the order it was chosen in), each relation once, each
    item's text cut to a few lines; the LLM notice in one line."""
    rows = [f"evidence: {res['tokens']} of {res['budget']} tokens, mode {res['mode']}"]
    if res.get("partial"):
        p = res["partial"]
        rows.append(
            f"partial: {p['embedded']} of {p['total']} texts embedded; graph and full text only"
        )

    def where(item: dict[str, Any]) -> str:
        loc = item["path"] or "?"
        if item.get("line"):
            loc += f":{item['line']}"
        return loc + (f" ({item['heading']})" if item.get("heading") else "")

    def cut(text: str) -> str:
        text = " ".join(text.split())
        return text[:ITEM_CHARS] + ("…" if len(text) > ITEM_CHARS else "")

    items = [(k, i) for k in ("entities", "relations", "chunks") for i in res[k]]
    items.sort(key=lambda ki: ki[1].get("pick", 0))
    pairs: set[frozenset[str]] = set()
    for kind, i in items:
        if kind == "relations":
            pair = frozenset((i["src"], i["tgt"]))
            if pair in pairs:
                continue
            pairs.add(pair)
            head = f"relation  {i['src']} -- {i['tgt']}  {where(i)}"
        elif kind == "entities":
            head = f"entity    {i['name']}  {where(i)}"
        else:
            head = f"chunk     {where(i)}"
        rows.append(f"{head}\n          {cut(i['text'])}{_why(i)}")
    if res.get("uncovered"):
        rows.append("not covered: " + ", ".join(res["uncovered"]))
    if res.get("stopped"):
        rows.append(f"stopped: {res['stopped']['why']}")
    if "llm" in res and res["llm"] != "configured":
        rows.append(
            "(no LLM configured: evidence only; set WIKID_LLM_BASE_URL and WIKID_LLM_MODEL)"
        )
    return "\n".join(rows)


def search_text(res: dict[str, Any]) -> str:
    rows = []
    for h in res["hits"]:
        tags = " ".join("#" + t for t in h["tags"])
        rows.append(f"{h['path']}  {tags}\n    {' '.join(h['snippet'].split())}")
    return "\n".join(rows) or "no match"


def related_text(res: dict[str, Any]) -> str:
    rows = [f"related to {res['note']} (not linked to it): {res['total']} notes"]
    if res.get("meaning"):
        rows[0] += f"; meaning {res['meaning']}"
    for r in res["related"]:
        why, parts = r["why"], []
        if "meaning" in why:
            m = why["meaning"]
            parts.append(f"line {m['line']} ~ line {m['their_line']} ({m['score']}): {m['text']}")
        if "graph" in why:
            parts.append("shares " + ", ".join(why["graph"]["shared"]))
        rows.append(f"{r['path']}" + "".join(f"\n    {p}" for p in parts))
    if res.get("next_cursor"):
        rows.append("(more: --limit)")
    return "\n".join(rows)


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def cost_text(res: dict[str, Any]) -> str:
    rows = [
        f"{r['phase']:<10} {r['model']:<24} {r['calls']:>6} calls {r['input_tokens']:>10} in "
        f"{r['output_tokens']:>10} out  {_money(r['cost'])}"
        for r in res["by_phase"]
    ]
    total = "n/a (set llm_prices)" if res["cost"] is None else _money(res["cost"])
    rows.append(
        f"total: {res['calls']} calls, {res['input_tokens']} in, {res['output_tokens']} out, est. {total}"
    )
    return "\n".join(rows)


# -- the commands' work --------------------------------------------------------

DONE = {"stop": "stopping", "reindex": "reindex started (wikid status shows when it is done)"}
PRINTERS: dict[str, Callable[[Any], str]] = {
    "status": status_text,
    "links": edges_text("links"),
    "backlinks": edges_text("backlinks"),
    "broken": broken_text,
    "neighbors": neighbors_text,
    "search": search_text,
    "related": related_text,
    "cost": cost_text,
}


def run_op(cfg: Where, op: str, as_json: bool, **args: Any) -> None:
    """A client command that is one op and a printout (every one but ``query``)."""
    reply = call(cfg, op, **args)
    if op in DONE:
        print(DONE[op])
    else:
        show(reply, as_json, PRINTERS[op])


SCREEN_BUDGET = 1000  # tokens of evidence printed for a person when --budget is not given


def run_query(cfg: Where, args: dict[str, Any], answer: bool, as_json: bool) -> None:
    """``wikid query``: the evidence, or with ``answer`` the LLM's answer streamed. Read
    by a person, the evidence is about one screen unless ``--budget`` asks for more;
    as JSON (a program's), the configured budget."""
    if not answer:
        if not as_json and args.get("budget") is None:
            args = {**args, "budget": SCREEN_BUDGET}
        show(call(cfg, "query", **args), as_json, evidence_text)
        return

    def stream(piece: str) -> None:
        if not as_json:
            sys.stdout.write(piece)
            sys.stdout.flush()

    res = call(cfg, "query", answer=True, on_partial=stream, timeout=600, **args)
    if as_json:
        show(res, True, str)
        return
    a = res["answer"]
    notes = {i["path"] for k in ("entities", "relations", "chunks") for i in res[k]}
    print(
        f"\n\n({a['model']}: {a['input_tokens']} tokens in, {a['output_tokens']} out; "
        f"evidence {res['tokens']} tokens from {len(notes)} notes)"
    )
