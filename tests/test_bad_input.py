"""Bad input never raises out of the parsing layer and never stops other notes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from graphtools import write

from wikid.core._markdown import scan
from wikid.core.graph import VaultGraph
from wikid.core.vault import VaultOptions


def test_every_kind_of_bad_note_is_reported_and_the_rest_indexed(tmp_path: Path) -> None:
    write(
        tmp_path,
        "good.md",
        "[[template]] [[bom]] [[crlf]] [[latin]] [[binary]] [[big]] [[brackets]]\n",
    )
    write(tmp_path, "template.md", "---\ncreated: {{date}}\ntags: [x\n---\nbody [[Still Parsed]]\n")
    (tmp_path / "bom.md").write_bytes("\ufeff---\ntitle: Bom\n---\n[[A]]\n".encode())
    (tmp_path / "crlf.md").write_bytes(b"---\r\ntitle: Crlf\r\n---\r\nline [[B]]\r\n")
    (tmp_path / "latin.md").write_bytes("caf\xe9 [[C]]\n".encode("latin-1"))
    (tmp_path / "binary.md").write_bytes(b"\x89PNG\x00\x00\x01\x02binary")
    (tmp_path / "big.md").write_bytes(b"x" * 2048)
    write(tmp_path, "brackets.md", "[[" * 500_000)
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop2.md")
    (tmp_path / "loop2.md").symlink_to(tmp_path / "loop.md")
    (tmp_path / "dirloop").mkdir()
    (tmp_path / "dirloop" / "up").symlink_to(tmp_path, target_is_directory=True)

    vg = VaultGraph.load(tmp_path, VaultOptions(max_note_bytes=1024))
    problems = vg.problems
    assert "invalid frontmatter YAML" in problems["template.md"]
    assert "not valid UTF-8" in problems["latin.md"]
    assert "binary" in problems["binary.md"]
    assert "too large" in problems["big.md"]
    assert "loop.md" in problems and "loop2.md" in problems
    # Readable parts were kept.
    assert vg.notes["template.md"].properties["created"] == "{{date}}"
    assert [lk.target for lk in vg.notes["template.md"].links] == ["Still Parsed"]
    assert vg.notes["bom.md"].title == "Bom" and vg.notes["crlf.md"].title == "Crlf"
    assert vg.notes["crlf.md"].links[0].line == 4
    assert vg.notes["latin.md"].body.startswith("café")
    # Every note, bad or not, is still a link target.
    assert {v for _, v in vg.g.out_edges("good.md")} == {
        "template.md",
        "bom.md",
        "crlf.md",
        "latin.md",
        "binary.md",
        "big.md",
        "brackets.md",
    }


def test_a_note_that_vanishes_before_the_read_is_just_gone(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "x")
    vg = VaultGraph.load(tmp_path)
    (tmp_path / "a.md").unlink()
    delta = vg.update(["a.md", "never-existed.md"])
    assert delta.notes_removed == {"a.md"} and "a.md" not in vg.g


def _load_as_unprivileged(root: Path) -> dict[str, object]:
    """Load the vault in a forked child that dropped root, report problems as JSON.

    Root reads everything, so as root (CI) the check needs a real unprivileged
    process; forking avoids exec'ing an interpreter 'nobody' may not reach."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            vg = VaultGraph.load(root)
            os.write(
                write_fd, json.dumps({"problems": vg.problems, "notes": sorted(vg.notes)}).encode()
            )
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data, "the unprivileged loader failed"
    return json.loads(data)


def test_permission_denied_file_and_folder_are_reported() -> None:
    # Root reads everything, so as root (CI) the load runs as the unprivileged 'nobody'.
    root = Path(tempfile.mkdtemp(prefix="wikid-perm-"))
    try:
        write(root, "ok.md", "[[locked]]\n")
        write(root, "locked.md", "secret\n")
        write(root, "closed/inner.md", "x\n")
        for path in (root, root / "closed"):
            path.chmod(0o755)
        for path in (root / "ok.md", root / "closed" / "inner.md"):
            path.chmod(0o644)
        (root / "locked.md").chmod(0)
        (root / "closed").chmod(0)
        report = _load_as_unprivileged(root)
        assert "cannot read" in report["problems"]["locked.md"]
        assert "cannot list folder" in report["problems"]["closed"]
        assert report["notes"] == ["locked.md", "ok.md"]  # the locked note still resolves
    finally:
        (root / "closed").chmod(0o755)
        shutil.rmtree(root)


ADVERSARIAL = [
    "[[" * 200_000,
    "[[a" * 150_000,
    "![" * 200_000,
    "[a](" * 150_000,
    "`" * 100_000 + "x",
    "` `` " * 60_000,
    "$a " * 150_000,
    "%%" + "[[x]]" * 100_000,
    "<!--" * 100_000,
    "#a" * 200_000,
    "x ^" * 200_000,
    "[" + "\\]" * 200_000,
    "a\n" * 300_000,
    "[[x]] " * 100_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:6]))
def test_parser_is_linear_on_adversarial_lines(text: str) -> None:
    # Inputs built to make backtracking regexes or rescanning loops quadratic:
    # at these sizes quadratic work takes minutes, linear work a fraction of a second.
    # The bound is deliberately loose; the speed itself is measured in bench/.
    start = time.process_time()
    scan(text)
    scan("\n".join([text[:5000]] * 40))
    assert time.process_time() - start < 10


def test_many_links_between_one_pair_cost_linear_time(tmp_path: Path) -> None:
    """A pair's links are one tuple (``core.edges.LinkGraph``): a note that links one
    target n times, and a canvas that joins the same two cards n / 5 times, are linked,
    updated and unlinked in time linear in n. Made again a link at a time, the tuple
    was quadratic: 4x the links took ~16x the time, not ~4x."""
    from test_graph_invariant import _canvas_text

    from wikid.testing import assert_same, snapshot

    def cycle(root: Path, n: int) -> float:
        write(root, "B.md", "target\n")
        write(root, "C.md", "another\n")
        write(root, "A.md", "[[B]] " * n)
        write(root, "Board.canvas", _canvas_text(["B.md", "C.md"], [], [(0, 1, False)] * (n // 5)))
        start = time.process_time()
        vg = VaultGraph.load(root)
        assert len(vg.g.between("A.md", "B.md")) == n
        assert len(vg.g.between("B.md", "C.md")) == n // 5
        write(root, "A.md", "[[B]] " * (n - 1) + "[[C]]")
        write(root, "Board.canvas", _canvas_text(["B.md", "C.md"], [], [(0, 1, True)] * (n // 5)))
        vg.update(["A.md", "Board.canvas"])
        (root / "A.md").unlink()
        (root / "Board.canvas").unlink()
        vg.update(["A.md", "Board.canvas"])
        took = time.process_time() - start
        assert not vg.g.succ["B.md"] and not vg.g.pred["B.md"]
        assert_same(snapshot(vg), snapshot(VaultGraph.load(root)))
        return took

    small = cycle(tmp_path / "small", 20_000)
    big = cycle(tmp_path / "big", 80_000)
    assert big < 8 * small + 1, (small, big)
