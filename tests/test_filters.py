"""Property filters (issue 41): ``where`` on search and query, run in SQLite over the
``props`` rows that the search index writes in each batch (``sync/props.py``). The
expected notes are computed from tests/typedvault.py's own tables, not typed by hand."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from pathlib import Path

import pytest
import typedvault
from graphtools import write
from storetools import unique_workspace

from wikid.ask.when import when
from wikid.server import api
from wikid.server.protocol import ProtocolError
from wikid.sync import props
from wikid.sync.index import Index

Typed = tuple[Index, asyncio.AbstractEventLoop]


def _passing(idx: Index, *where: str) -> set[str]:
    return idx.passing([props.parse(w) for w in where])


def _books(test: object) -> set[str]:
    return {f"Books/{t}.md" for t, row in typedvault.BOOKS.items() if test(row)}  # type: ignore[operator]


def test_each_kind_of_filter_selects_exactly_its_notes(typed: Typed) -> None:
    idx, _ = typed
    every = set(idx.vg.notes)
    daily = {p for p in every if p.startswith("Daily/")}
    seafood = {
        f"Restaurants/{t}.md" for t, r in typedvault.RESTAURANTS.items() if r[1] == "Seafood"
    }
    cases = {
        ("cuisine=Seafood",): seafood,
        ("cuisine=seafood",): seafood,  # values compare case-insensitively
        ("author=[[Mara Quill]]",): _books(lambda r: r[0] == "Mara Quill"),
        ("author=[[People/Mara Quill]]",): _books(lambda r: r[0] == "Mara Quill"),  # resolved
        ("author=[[Mara Quill|Mara]]",): _books(lambda r: r[0] == "Mara Quill"),
        ("categories=[[Books]]",): _books(lambda r: True),
        ("year>=2018",): _books(lambda r: r[2] >= 2018),
        ("year>=2018", "year<2021"): _books(lambda r: 2018 <= r[2] < 2021),
        ("year=2018",): _books(lambda r: r[2] == 2018),
        ("year!=2018",): every - _books(lambda r: r[2] == 2018),  # a note with no year too
        ("folder=Daily",): daily,
        ("folder=daily/",): daily,
        ("folder!=Daily",): every - daily,
        ("tags=daily",): daily,
        ("tag=daily", "folder=Daily"): daily,
        ("modified>=1d",): every,  # written minutes ago: the files' mtimes
        ("modified<2000-01-01",): set(),
        ("cuisine=Seafood", "folder=Daily"): set(),
    }
    assert len(seafood) == 2 and len(daily) == 28
    for where, expected in cases.items():
        assert expected <= every, where
        assert _passing(idx, *where) == expected, where


def test_search_and_query_results_all_pass_the_filter(typed: Typed) -> None:
    idx, loop = typed
    where = ["author=[[Mara Quill]]"]
    allowed = _passing(idx, *where)
    plain = {h["path"] for h in api.search(idx, "sea lighthouse storms", 20)["hits"]}
    assert plain - allowed  # without the filter, other notes match too
    hits = {h["path"] for h in api.search(idx, "sea lighthouse storms", 20, where=where)["hits"]}
    assert hits and hits <= allowed

    question = "which books are about the sea?"
    ev = loop.run_until_complete(api.query(idx, question, where=["categories=[[Books]]"]))
    books = _books(lambda r: True)
    assert ev["notes"] and set(ev["notes"]) <= books
    for kind in ("entities", "relations", "chunks"):
        assert all(item["path"] in books for item in ev[kind]), kind
    assert ev["where"] == {"filters": ["categories=books"], "notes": len(books)}
    unfiltered = loop.run_until_complete(api.query(idx, question))
    assert set(unfiltered["notes"]) - books and "where" not in unfiltered


@pytest.mark.parametrize(
    "bad",
    ["type~book", "=book", "year", "type=", "modified>=soon", "folder>=Books", "tags<x", 3],
)
def test_a_malformed_filter_is_refused_in_one_line(typed: Typed, bad: object) -> None:
    idx, _ = typed
    with pytest.raises(ProtocolError) as err:
        api.search(idx, "sea", 5, where=[bad])
    assert err.value.code == "bad_request" and "\n" not in str(err.value)
    assert "filter" in str(err.value)


def test_filters_follow_edits_and_a_date_in_the_frontmatter(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "A.md", "---\nstatus: draft\nmodified: 2020-01-01\n---\nA.\n")
    write(vault, "B.md", "---\nstatus: done\n---\nB.\n")
    for name in ("A.md", "B.md"):  # old files, trusted by their stat (not racy)
        os.utime(vault / name, (1_700_000_000, 1_700_000_000))

    async def main() -> None:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace())
        try:
            await idx.sync()
            assert _passing(idx, "status=draft") == {"A.md"}
            assert _passing(idx, "modified<2021-01-01") == {"A.md"}  # the frontmatter's date
            assert _passing(idx, "created<2021-01-01") == set()  # none given: the mtime
            write(vault, "A.md", "---\nstatus: done\n---\nA.\n")
            await idx.sink.apply(idx.vg.update(["A.md"]))
            assert _passing(idx, "status=draft") == set()
            assert _passing(idx, "status=done") == {"A.md", "B.md"}
            assert _passing(idx, "modified<2021-01-01") == set()
            june_2019 = 1_559_390_400
            os.utime(vault / "B.md", (june_2019, june_2019))  # a touch: the same text
            await idx.update({"B.md"})
            assert _passing(idx, "modified<2020-01-01") == {"B.md"}  # its mtime moved
            (vault / "B.md").unlink()
            await idx.update({"B.md"})
            assert _passing(idx, "status=done") == {"A.md"}
        finally:
            await idx.close()

    asyncio.run(main())


FRIDAY = dt.datetime(2026, 12, 4, 15, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("what did I write about gardens last month?", ("2026-11-01", "2026-12-01")),
        ("notes from this week", ("2026-11-30", "2026-12-05")),  # ISO weeks: from Monday
        ("what changed last week", ("2026-11-23", "2026-11-30")),
        ("what did I do yesterday", ("2026-12-03", "2026-12-04")),
        ("today's meetings", ("2026-12-04", "2026-12-05")),
        ("ideas in the last 10 days", ("2026-11-25", "2026-12-05")),
        ("over the past 2 weeks", ("2026-11-21", "2026-12-05")),
        ("what I read in 2024", ("2024-01-01", "2025-01-01")),
        ("books I finished last year", ("2025-01-01", "2026-01-01")),
        ("this year so far", ("2026-01-01", "2026-12-05")),
        ("who wrote the first program?", None),
        ("the last chapter of the month", None),
        ("in the last 5 minutes", None),
    ],
)
def test_a_question_that_dates_itself_names_its_span(
    question: str, span: tuple[str, str] | None
) -> None:
    got = when(question, FRIDAY)
    assert (got and (got.start.date().isoformat(), got.end.date().isoformat())) == span
    if got is not None:  # a half-open span: what the date filters select
        assert [(f.key, f.op, f.num) for f in got.filters()] == [
            ("modified", ">=", got.start.timestamp()),
            ("modified", "<", got.end.timestamp()),
        ]


def test_last_month_in_january_is_last_december() -> None:
    got = when("what did I write last month", dt.datetime(2026, 1, 15, tzinfo=dt.UTC))
    assert got is not None and (got.start.date(), got.end.date()) == (
        dt.date(2025, 12, 1),
        dt.date(2026, 1, 1),
    )


def test_a_dated_question_is_asked_of_the_notes_modified_then(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    recent = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).date().isoformat()
    write(vault, "Fresh.md", f"---\nmodified: {recent}\n---\nPruned the garden roses.\n")
    write(vault, "Old.md", "---\nmodified: 2020-03-01\n---\nPlanted the garden roses.\n")

    async def main() -> None:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace())
        try:
            await idx.sync()
            question = "what did I write about the garden roses in the last 7 days?"
            ev = await api.query(idx, question, explain=True)
            assert ev["notes"] == ["Fresh.md"]
            assert ev["when"]["phrase"] == "in the last 7 days" and ev["when"]["notes"] == 1
            assert ev["explain"]["when"] == ev["when"]
            undated = await api.query(idx, "what did I write about the garden roses?")
            assert set(undated["notes"]) == {"Fresh.md", "Old.md"} and "when" not in undated
        finally:
            await idx.close()

    asyncio.run(main())


def test_lists_and_links_match_as_obsidian_users_write_them(tmp_path: Path) -> None:
    """Through the real CLI and a real daemon (issue 48): a type written as a link or a
    list matches its name; a link in a folder matches its target's name; a filter with
    no words lists the notes that pass; a doubled operator is an error, not no match."""
    import json
    import subprocess
    import sys

    from daemontools import DaemonProc

    vault = tmp_path / "v"
    write(vault, "a.md", '---\ntype: "[[Book]]"\n---\nA linked type.\n')
    write(vault, "b.md", "---\ntype: [book]\n---\nA listed type.\n")
    write(vault, "c.md", "---\ntype: book\n---\nA plain type.\n")
    write(vault, "tart.md", "---\ntype: [[Dessert]]\n---\nA tart.\n")
    write(vault, "pie.md", '---\ncategories:\n  - "[[Recipes/Dessert]]"\n---\nA pie.\n')
    d = DaemonProc(vault, tmp_path).start()

    def wikid(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "wikid", *args, "--vault", str(vault)]
        argv += ["--socket", str(d.socket)]
        return subprocess.run(argv, capture_output=True, text=True, env=d.env, timeout=120)

    def listed(*where: str) -> set[str]:
        flags = [f"--where={w}" for w in where]
        proc = wikid("search", *flags, "--json")
        assert proc.returncode == 0, proc.stderr
        return {h["path"] for h in json.loads(proc.stdout)["hits"]}

    try:
        assert listed("type=book") == {"a.md", "b.md", "c.md"}
        assert listed("type=[[Book]]") == {"a.md", "b.md", "c.md"}
        assert listed("type=Dessert") == {"tart.md"}
        assert "tart.md" not in listed("type!=Dessert")
        assert listed("categories=Dessert") == {"pie.md"}
        assert listed("categories=[[Recipes/Dessert]]") == {"pie.md"}
        bad = wikid("search", "pie", "--where", "year>>2020")
        assert bad.returncode != 0 and "one operator only" in bad.stderr
        assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
        none = wikid("search")
        assert none.returncode != 0 and "Traceback" not in none.stderr
    finally:
        d.stop()
