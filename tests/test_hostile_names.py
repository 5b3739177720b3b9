"""Any file name the file system allows (any bytes but "/" and NUL) goes through
``index`` and ``run`` without a crash: it is indexed under its name, or, when
its bytes are not UTF-8, reported with a reason. Real files, the real store."""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
from pathlib import Path

from daemontools import DaemonProc
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from storetools import unique_workspace

from wikid.core.vault import NOT_UTF8, VaultFilter, is_note, undecodable
from wikid.sync.index import Index

names = st.one_of(
    st.binary(min_size=1, max_size=24),  # mostly not UTF-8
    st.text(min_size=1, max_size=16).map(lambda t: t.encode("utf-8", "surrogatepass")),
).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


def _create(vault: Path, raw: bytes, suffix: bytes) -> str:
    path = os.fsencode(vault) + b"/" + raw + suffix
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, b"# A note\nwith a link to [[Home]]\n")
    os.close(fd)
    return os.fsdecode(raw + suffix)


def _expected(vault: Path, rel: str) -> str:
    if undecodable(rel):
        return "reported"
    return "ignored" if VaultFilter(vault).ignored(rel) else ("note" if is_note(rel) else "file")


def _check(
    vault: Path, created: list[str], notes: set[str], files: set[str], problems: dict[str, str]
) -> None:
    for rel in created:
        want = _expected(vault, rel)
        if want == "note":
            assert rel in notes, rel
        elif want == "file":
            assert rel in files, rel
        elif want == "reported":
            shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
            assert problems.get(shown) == NOT_UTF8, (rel, problems)


@example([(b"back\\slash", b".md"), (b"win\\path", b".png"), (b"caf\xe9", b".md")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(names, st.sampled_from([b".md", b".MD", b"", b".png"])), min_size=1, max_size=8
    )
)
def test_any_file_name_goes_through_index(entries: list[tuple[bytes, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        (vault / "Home.md").write_text("home\n", encoding="utf-8")
        created = sorted({_create(vault, raw, suffix) for raw, suffix in entries})

        async def run() -> None:
            idx = await Index.open(vault, Path(tmp) / "wd", workspace=unique_workspace("names"))
            try:
                report = await idx.sync()
                assert report["llm_calls"] == 0
                vg = idx.graph
                _check(vault, created, set(vg.notes), vg.attachments, vg.problems)
            finally:
                await idx.close()

        asyncio.run(run())


def test_random_file_names_through_a_running_daemon(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Home.md").write_text("home\n", encoding="utf-8")

    def some(n: int) -> list[str]:
        out = []
        for _ in range(n):
            raw = bytes(
                rng.choice([b for b in range(1, 256) if b != 0x2F])
                for _ in range(rng.randint(1, 16))
            )
            if raw in (b".", b".."):
                continue
            out.append(_create(vault, raw, rng.choice([b".md", b"", b".md"])))
        return sorted(set(out))

    at_start = some(40)
    d = DaemonProc(vault, tmp_path, env={"WIKID_RECONCILE_INTERVAL_S": "1"}).start()
    try:
        live = some(40)  # while it runs: the watcher, then the reconciliation scan
        created = at_start + live
        wanted_notes = {r for r in created if _expected(vault, r) == "note"}

        def settled() -> bool:
            graph = d.call("graph")
            ids = {n["id"] for n in graph["nodes"]}
            reported = set(d.call("status")["rejected"])
            bad = {
                os.fsencode(r).decode("utf-8", "backslashreplace")
                for r in created
                if undecodable(r)
            }
            return wanted_notes <= ids and bad <= reported

        import time

        deadline = time.monotonic() + 60
        while not settled():
            assert time.monotonic() < deadline, "names never all indexed or reported"
            time.sleep(0.2)
        assert d.proc is not None and d.proc.poll() is None
    finally:
        d.stop()
