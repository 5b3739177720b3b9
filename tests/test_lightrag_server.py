"""LightRAG's own API server and WebUI on wikid's store (``wikid lightrag-server``): the
real server on a free loopback port, on a store a running daemon keeps fresh, asked
over its REST API with httpx. It answers ``/query/data`` in every mode with the store's
own model, sees each edit, refuses every write, and its WebUI shows the vault's graph."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest
from daemontools import DaemonProc, copy_example
from graphtools import write
from servertools import LightRAGServer, chromium, paths_in

from wikid.core.graph import VaultGraph

MODES = ("local", "global", "hybrid", "mix", "naive")
QUESTION = "Who wrote the first program for the Analytical Engine?"
HL, LL = ["history of programming"], ["Ada Lovelace", "Analytical Engine", "first program"]
WRITES = [
    ("POST", "/documents/text", {"text": "an intruder", "file_source": "x.md"}),
    ("POST", "/documents/texts", {"texts": ["an intruder"]}),
    ("POST", "/documents/scan", None),
    ("DELETE", "/documents", None),
    ("DELETE", "/documents/delete_document", {"doc_ids": ["doc-x"]}),
    ("POST", "/documents/clear_cache", {}),
    (
        "POST",
        "/graph/entity/edit",
        {"entity_name": "Ada Lovelace", "updated_data": {"description": "x"}},
    ),
    ("POST", "/graph/entity/create", {"entity_name": "Intruder", "entity_data": {}}),
    ("DELETE", "/graph/entity/delete", {"entity_name": "Ada Lovelace"}),
    (
        "POST",
        "/graph/relation/edit",
        {"source_id": "Ada Lovelace", "target_id": "Welcome", "updated_data": {}},
    ),
]


def _export(workdir: Path, *args: str) -> bytes:
    cmd = [sys.executable, "-m", "wikid", "export", "--workdir", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, timeout=120, check=True).stdout


def _neighbours(server: LightRAGServer, label: str) -> set[str]:
    sub = server.http.get("/graphs", params={"label": label, "max_depth": 1}).json()
    return {n["id"] for n in sub["nodes"]}


def test_the_server_answers_with_the_store_model_sees_edits_and_refuses_writes(
    tmp_path: Path,
) -> None:
    vault = copy_example(tmp_path / "example")
    d = DaemonProc(vault, tmp_path).start()
    server = LightRAGServer(
        ["--vault", str(vault), "--workdir", str(d.workdir)], tmp_path, env=d.env
    )
    try:
        server.wait()
        labels = server.http.get("/graph/label/list").json()
        assert {
            "Ada Lovelace",
            "Charles Babbage",
            "Analytical Engine",
            "Welcome",
            "#person",
        } <= set(labels)
        assert {"Analytical Engine", "Charles Babbage"} <= _neighbours(server, "Ada Lovelace")
        sub = server.http.get("/graphs", params={"label": "Ada Lovelace", "max_depth": 1}).json()
        ada = next(n for n in sub["nodes"] if n["id"] == "Ada Lovelace")["properties"]
        assert (ada["file_path"], ada["title"], ada["tags"]) == (
            "People/Ada Lovelace.md",
            "Ada Lovelace",
            "person",
        )

        for mode in MODES:  # questions are embedded by the model the store was built with
            data = server.query_data(QUESTION, mode, HL, LL)
            assert data["chunks"], mode
            if mode != "naive":
                assert data["entities"], mode
            assert "People/Ada Lovelace.md" in paths_in(data), mode

        before = _export(d.workdir)
        for method, path, body in WRITES:
            r = server.http.request(method, path, json=body)
            assert r.status_code == 403, (method, path, r.status_code, r.text)
            assert r.json()["read_only"] and "source of truth" in r.json()["detail"]
        assert _export(d.workdir) == before  # byte for byte: nothing was written
        assert "Intruder" not in server.http.get("/graph/label/list").json()

        saved = time.monotonic()
        write(vault, "Grace Hopper.md", "Grace Hopper admired [[Ada Lovelace]].\n")
        while "Grace Hopper" not in _neighbours(server, "Ada Lovelace"):
            assert time.monotonic() - saved < 5, "the edit did not show in /graphs within 5 s"
            time.sleep(0.2)
        data = server.query_data(
            "Who admired Ada Lovelace?", "local", ["admiration"], ["Grace Hopper"]
        )
        assert "Grace Hopper.md" in paths_in(data)

        browser = chromium()
        if browser is None:
            pytest.fail("chromium is not installed (.ci/setup installs it with apt)")
        import screenshot

        shot = screenshot.webui_graph(browser, server.url + "/webui/", tmp_path / "webui.png")
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000
        if os.environ.get("WIKID_DOCS_SCREENSHOT"):  # how docs/webui-graph.png was made
            Path(os.environ["WIKID_DOCS_SCREENSHOT"]).write_bytes(png)
    finally:
        server.stop()
        d.stop()


def test_a_graphml_export_leads_back_to_the_notes(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "wikid",
            "index",
            "--vault",
            str(vault),
            "--workdir",
            str(tmp_path / "wd"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert out.returncode == 0, out.stderr
    _export(tmp_path / "wd", "--format", "graphml", "-o", str(tmp_path / "g.graphml"))
    g = nx.read_graphml(tmp_path / "g.graphml")
    notes = set(VaultGraph.load(vault).notes)  # (Templates/ is in userIgnoreFilters)
    with_note = {
        n: d
        for n, d in g.nodes(data=True)
        if d["entity_type"] not in ("tag", "unresolved", "attachment")
    }
    assert {d["file_path"] for d in with_note.values()} == notes
    assert (
        g.nodes["Ada Lovelace"]["title"] == "Ada Lovelace"
        and g.nodes["Ada Lovelace"]["tags"] == "person"
    )
    assert all(d["source_id"] for d in with_note.values())
    assert all(d["file_path"] and d["source_id"] for *_, d in g.edges(data=True))
