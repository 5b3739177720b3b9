"""One SQLite connection, used from the event loop and from worker threads.

A batch's statements come from several threads inside one transaction, and a
statement on the event loop is a stall whenever another thread holds the
connection (630 ms for one KV delete at 13k notes). Real files, the real store.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from pathlib import Path

from graphtools import write
from storetools import unique_workspace

from wikid.store._sqlite import Database
from wikid.sync.index import Index


def test_a_batch_runs_no_sql_on_the_event_loop_but_its_begin(tmp_path: Path) -> None:
    """Edits and a deletion (chunks, documents and doc status deleted, records
    upserted): every statement but the batch's BEGIN runs in a worker thread."""
    vault = tmp_path / "vault"
    for i in range(8):
        write(vault, f"n{i}.md", f"# N{i}\nSee [[n{(i + 1) % 8}]] #t\n\nMore text {i}.\n")

    async def main() -> collections.Counter[str]:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace("loop"))
        try:
            await idx.sync()
            loop_thread, on_loop = threading.get_ident(), collections.Counter[str]()

            def trace(sql: str) -> None:
                if threading.get_ident() == loop_thread:
                    on_loop[sql.split()[0]] += 1

            conn = idx.store.ledger.database.conn
            conn.set_trace_callback(trace)
            write(vault, "n1.md", "# N1\nNow only [[n5]].\n")
            (vault / "n2.md").unlink()
            _, report = await idx.update({"n1.md", "n2.md"})
            conn.set_trace_callback(None)
            assert report.writes["chunk"] and report.writes["doc"]
            return on_loop
        finally:
            await idx.close()

    assert asyncio.run(main()) == {"BEGIN": 1}


def test_a_write_waits_for_another_threads_snapshot_and_commits_whole(tmp_path: Path) -> None:
    """A snapshot's read transaction is no write transaction to join: a write that
    starts meanwhile waits for it, so the snapshot's end commits none of it."""
    db = Database(tmp_path / "t.sqlite")
    db.conn.execute("CREATE TABLE t (x INTEGER)")
    inside, release, order = threading.Event(), threading.Event(), []

    def reader() -> None:
        with db.snapshot() as conn:
            inside.set()
            release.wait(5)
            order.append(("read", conn.execute("SELECT count(*) FROM t").fetchone()[0]))

    def writer() -> None:
        with db.transaction() as conn:
            order.append(("write", 0))
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (2)")

    r = threading.Thread(target=reader)
    r.start()
    inside.wait(5)
    w = threading.Thread(target=writer)
    w.start()
    time.sleep(0.2)
    assert order == []  # the writer waits for the snapshot
    release.set()
    r.join(5)
    w.join(5)
    assert order == [("read", 0), ("write", 0)]
    assert not db.in_transaction
    other = Database(tmp_path / "t.sqlite", read_only=True)
    assert other.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 2


def test_many_threads_join_one_transaction_and_its_depth_returns_to_zero(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.sqlite")
    db.conn.execute("CREATE TABLE t (x INTEGER)")

    def join(i: int) -> None:
        for j in range(200):
            with db.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (?)", (i * 1000 + j,))

    with db.transaction():
        threads = [threading.Thread(target=join, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert db.in_transaction
    assert not db.in_transaction
    other = Database(tmp_path / "t.sqlite", read_only=True)
    assert other.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1600


def test_an_async_batch_commits_only_after_a_write_that_joined_it_from_another_thread(
    tmp_path: Path,
) -> None:
    """The embedding cache is written from a worker thread while a slice's batch is open
    (the next slice embeds during the write): that write joins the batch and may outlive
    its body. The batch commits once it has left, with its rows, and a thread that wants
    to write meanwhile begins the next transaction."""
    db = Database(tmp_path / "t.sqlite")
    db.conn.execute("CREATE TABLE t (x INTEGER)")
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def cache() -> None:
        try:
            with db.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (1)")
                inside.set()
                release.wait(5)
                conn.execute("INSERT INTO t VALUES (2)")
        except BaseException as exc:  # the thread's failure is the test's
            errors.append(exc)

    def later() -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (3)")

    async def main() -> None:
        writer = threading.Thread(target=cache)
        async with db.transaction_async() as conn:
            conn.execute("INSERT INTO t VALUES (0)")
            writer.start()
            await asyncio.to_thread(inside.wait, 5)
        # the batch's body is over; its COMMIT waited for the joined write (and the
        # waiting thread may have written since, in a transaction of its own)
        assert {0, 1, 2} <= {r[0] for r in db.conn.execute("SELECT x FROM t")}

    async def run() -> None:
        task = asyncio.create_task(main())
        await asyncio.sleep(0.2)
        third = threading.Thread(target=later)
        third.start()  # waits: the batch's owner is closing
        await asyncio.sleep(0.1)
        release.set()
        await task
        await asyncio.to_thread(third.join, 5)

    asyncio.run(run())
    assert errors == [] and not db.in_transaction
    other = Database(tmp_path / "t.sqlite", read_only=True)
    assert sorted(r[0] for r in other.conn.execute("SELECT x FROM t")) == [0, 1, 2, 3]


def test_a_thread_waiting_for_the_connection_does_not_freeze_the_process(
    tmp_path: Path,
) -> None:
    """While one worker's statement steps (a long scan, as on a cold disk), another
    worker runs a statement SQLite already prepared. CPython binds its parameters
    holding the GIL, so without the connection's lock that thread waited for
    SQLite's mutex with the GIL held, and every other thread (the event loop) froze
    for the whole scan: 1.4 s in a 13k restart."""
    db = Database(tmp_path / "t.sqlite")
    db.conn.execute("SELECT ?", (1,)).fetchone()  # now in the statement cache
    scan = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000)"
        " SELECT sum(x) FROM c"
    )
    took: dict[str, float] = {}

    def long_scan() -> None:
        t0 = time.perf_counter()
        db.conn.execute(scan).fetchone()
        took["scan"] = time.perf_counter() - t0

    def quick() -> None:
        time.sleep(0.2)
        db.conn.execute("SELECT ?", (2,)).fetchone()
        took["quick"] = time.perf_counter()

    threads = [threading.Thread(target=long_scan), threading.Thread(target=quick)]
    for t in threads:
        t.start()
    worst, last = 0.0, time.perf_counter()
    while any(t.is_alive() for t in threads):
        time.sleep(0.005)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    db.conn.close()
    assert took["scan"] > 0.6, "the scan must outlast the quick statement's start"
    assert worst < took["scan"] / 3, (worst, took)
