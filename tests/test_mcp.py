"""``wikid mcp`` driven by the official MCP SDK client (ClientSession over
stdio_client) against a real daemon on a small vault."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from daemontools import DaemonProc
from graphtools import write
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = {
    "search",
    "related_notes",
    "query",
    "links",
    "backlinks",
    "neighbors",
    "broken_links",
    "list_tags",
    "recent_changes",
    "status",
    "read_note",
}


def _vault(tmp: Path) -> Path:
    vault = tmp / "notes"
    write(vault, "Hub.md", "# Hub\nThe centre. #topic\n\n## Part\nSecond part [[Missing Page]].\n")
    for i in range(30):
        write(vault, f"Spokes/Spoke {i:02d}.md", f"# Spoke {i}\nPoints at [[Hub]]. #spoke\n")
    write(vault, unicodedata.normalize("NFD", "Café.md"), "# Café\nAn accented note.\n")
    write(vault, ".obsidian/app.json", json.dumps({"userIgnoreFilters": ["Private/"]}))
    write(vault, ".obsidian/hidden.md", "hidden\n")
    write(vault, "Private/diary.md", "ignored by the user\n")
    write(vault, "pic.png", "png")
    write(tmp / "notes-secret", "secret.md", "SIBLING-SECRET\n")
    write(tmp / "outside", "secret.md", "OUTSIDE-SECRET\n")
    (vault / "leak.md").symlink_to(tmp / "outside" / "secret.md")
    os.mkfifo(vault / "pipe.md")
    return vault


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes (SQLite's shared-memory
    index, which readers update, left out)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and not p.name.endswith("-shm"):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@asynccontextmanager
async def _session(d: DaemonProc, socket: Path | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "wikid", "mcp", "--vault", str(d.vault), "--socket", str(socket or d.socket)],
        env={k: v for k, v in d.env.items() if isinstance(v, str)},
        cwd=str(d.tmp),
    )
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        session.wikid_init = await session.initialize()  # type: ignore[attr-defined]
        yield session


async def _call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.content and result.content[0].text  # the one-line summary
    data: dict[str, Any] = result.structured_content  # type: ignore[assignment]
    return data


def _run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())


def test_every_tool_is_listed_read_only_and_answers(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    d = DaemonProc(vault, tmp_path).start()
    try:

        async def check() -> None:
            async with _session(d) as s:
                before = _snapshot(tmp_path)
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert set(tools) == TOOLS
                for t in tools.values():
                    assert t.annotations is not None
                    assert t.annotations.read_only_hint is True
                    assert t.annotations.open_world_hint is False
                # The instructions name the real parameters of the tools they mention.
                text = s.wikid_init.instructions  # type: ignore[attr-defined]
                notes = d.call("status")["notes"]
                assert f"has {notes} notes; the index is ready" in text  # the index state
                mentioned = re.findall(r"(\w+)\(([\w, ]*)\)", text)
                assert {name for name, _ in mentioned} == set(tools)  # every tool, no other
                for name, params in mentioned:
                    schema = tools[name].input_schema["properties"]
                    assert {p.strip() for p in params.split(",") if p.strip()} <= set(schema)

                hits = await _call(s, "search", text="centre")
                assert hits["hits"][0]["path"] == "Hub.md" and hits["hits"][0]["line"] == 2
                assert hits["hits"][0]["stale"] is False
                ev = await _call(s, "query", text="What points at the hub?", budget=400)
                assert ev["tokens"] <= 400 and ev["llm_calls"] == 0
                out = await _call(s, "links", note="Hub")
                assert {e["target"] for e in out["links"]} == {"ghost:Missing Page"}  # tags apart
                near = await _call(s, "neighbors", note="Spokes/Spoke 00.md", depth=2)
                assert any(
                    n["note"] == "Spokes/Spoke 01.md" and n["hop"] == 2 for n in near["neighbors"]
                )
                kin = await _call(s, "related_notes", note="Spokes/Spoke 00.md", limit=5)
                assert len(kin["related"]) == 5 and kin["total"] >= 29 and kin["next_cursor"]
                first = kin["related"][0]  # a sibling spoke; the hub it links is left out
                assert first["path"].startswith("Spokes/") and kin["linked_left_out"] == 1
                assert first["why"]["graph"]["shared"] == ["#spoke", "Hub.md"]
                assert first["why"]["meaning"]["line"] == first["why"]["meaning"]["their_line"]
                broken = await _call(s, "broken_links")
                assert [b["target"] for b in broken["broken"]] == ["Missing Page"]
                tags = await _call(s, "list_tags", limit=1)
                assert tags["tags"] == [{"tag": "spoke", "notes": 30}] and tags["truncated"]
                recent = await _call(s, "recent_changes", limit=5)
                assert recent["total"] >= 31 and len(recent["notes"]) == 5
                st = await _call(s, "status")
                assert st["ready"] and st["watcher"]["alive"]
                note = await _call(s, "read_note", path="Hub.md", heading="Part")
                assert note["start_line"] == 4 and note["text"].startswith("## Part")
                # NFC and NFD spellings are one note.
                for form in ("NFC", "NFD"):
                    got = await _call(s, "read_note", path=unicodedata.normalize(form, "Café.md"))
                    assert "accented" in got["text"]
                res = await s.read_resource("wikid://note/Spokes/Spoke%2003.md")
                assert "Spoke 3" in res.contents[0].text  # type: ignore[union-attr]
                listed = json.loads((await s.read_resource("wikid://notes")).contents[0].text)  # type: ignore[union-attr]
                assert listed["total"] >= 32
                after = _snapshot(tmp_path)
                changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
                assert not changed, changed  # no tool or resource wrote anything

        _run(check)
    finally:
        d.stop()


def test_caps_and_cursors_page_through_a_large_result(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path), tmp_path).start()
    try:

        async def check() -> None:
            async with _session(d) as s:
                seen, cursor, pages = [], None, 0
                while True:
                    page = await _call(s, "backlinks", note="Hub", limit=8, cursor=cursor)
                    assert page["total"] == 30 and len(page["backlinks"]) <= 8
                    seen += [b["source"] for b in page["backlinks"]]
                    pages += 1
                    cursor = page["next_cursor"]
                    if cursor is None:
                        break
                assert pages == 4 and len(set(seen)) == 30

        _run(check)
    finally:
        d.stop()


ESCAPES = [
    "../notes-secret/secret.md",
    "Spokes/../../notes-secret/secret.md",
    "%2e%2e/notes-secret/secret.md",
    "..%2Fnotes-secret%2Fsecret.md",
    "/etc/hostname",
    "%2Fetc%2Fhostname",
    "C:/Windows/win.ini",
    "Spokes\\Spoke 01.md",
    "Spokes%5CSpoke 01.md",
    "Hub.md\x00.png",
    "Hub.md%00",
    "leak.md",
    "pipe.md",
    ".obsidian/hidden.md",
    ".obsidian/app.json",
    "Private/diary.md",
    "pic.png",
    "hub.md",  # no fuzzy or case-insensitive fallback: the exact path only
]


def test_read_note_refuses_every_escape(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path), tmp_path).start()
    try:

        async def check() -> None:
            async with _session(d) as s:
                for path in ESCAPES:
                    result = await s.call_tool("read_note", {"path": path})
                    assert result.is_error, path
                    text = result.content[0].text  # type: ignore[union-attr]
                    assert "SECRET" not in text and "root:" not in text, path
                missing = await s.call_tool("read_note", {"path": "Spokes/Spoke 1.md"})
                assert missing.is_error and "Spokes/Spoke 01.md" in missing.content[0].text  # type: ignore[union-attr]

        _run(check)
    finally:
        d.stop()


def test_an_edit_is_visible_through_links_within_two_seconds(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path), tmp_path).start()
    try:

        async def check() -> None:
            async with _session(d) as s:
                started = time.monotonic()
                with open(d.vault / "Hub.md", "a", encoding="utf-8") as fh:
                    fh.write("\nNow also [[Brand New]].\n")
                while True:
                    out = await _call(s, "links", note="Hub")
                    if any(e["target"] == "ghost:Brand New" for e in out["links"]):
                        break
                    assert time.monotonic() - started < 2.0
                    await asyncio.sleep(0.05)

        _run(check)
    finally:
        d.stop()


def test_without_a_daemon_every_tool_says_how_to_start_one(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path), tmp_path)  # never started

    async def check() -> None:
        async with _session(d, socket=tmp_path / "nothing.sock") as s:
            for tool, args in (
                ("status", {}),
                ("links", {"note": "Hub"}),
                ("search", {"text": "x"}),
            ):
                result = await s.call_tool(tool, args)
                assert result.is_error
                assert "wikid run" in result.content[0].text  # type: ignore[union-attr]

    _run(check)


def test_the_server_exits_cleanly_when_stdin_closes(tmp_path: Path) -> None:
    import subprocess

    d = DaemonProc(_vault(tmp_path), tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wikid",
            "mcp",
            "--vault",
            str(d.vault),
            "--socket",
            str(tmp_path / "x.sock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=d.env,
    )
    _, err = proc.communicate(input=b"", timeout=60)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_print_config_registers_the_server(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from wikid.cli.commands import main

    vault = _vault(tmp_path)
    out = CliRunner().invoke(main, ["mcp", "--vault", str(vault), "--print-config"])
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(out.output)["mcpServers"].values()
    assert entry["args"][:3] == ["mcp", "--vault", str(vault)]
