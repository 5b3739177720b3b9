"""The package's shape, read with ``ast``: layers point inward, no import cycles,
small modules, and a client command that stays thin.

Layers, innermost first: core < store < sync < ask < server < cli. A module may
import its own layer and inner ones. ``wikid/config.py``, ``wikid/client.py`` and
``wikid/_lean.py`` are leaves that import no other wikid module (stdlib only) but
``wikid/_where.py``, the innermost leaf, so any layer may use them. An import inside a function counts (it runs sooner or later); one under
``if TYPE_CHECKING:`` does not (it never runs).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from daemontools import DaemonProc

PKG = Path(__file__).resolve().parents[1] / "wikid"
LAYERS = ("core", "store", "sync", "ask", "server", "cli")
LEAVES = {"wikid.config", "wikid.client", "wikid._lean", "wikid._where"}
INNERMOST = "wikid._where"  # a leaf other leaves may import: it imports none
# Outside the layers, for tests, benchmarks and users' own tests: it may import any
# layer, and no wikid module may import it.
HELPERS = {"wikid.testing"}
HEAVY = ("lightrag", "numpy", "networkx", "aiohttp", "tiktoken", "onnxruntime")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip |= {id(n) for n in ast.walk(child)}
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The wikid modules that ``name`` imports (resolved to existing modules)."""
    tree = ast.parse(path.read_text("utf-8"))
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target not in (name, "wikid"):
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(v: str, stack: list[str]) -> None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                cycles.append([*stack[stack.index(w) :], w])
            elif w not in state:
                visit(w, stack)
        stack.pop()
        state[v] = 2

    for v in sorted(graph):
        if v not in state:
            visit(v, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_modules_are_small() -> None:
    big = {
        str(p.relative_to(PKG.parent)): n
        for p in PKG.rglob("*.py")
        if (n := p.read_text("utf-8").count("\n")) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_the_codemap_names_every_module() -> None:
    """ARCHITECTURE.md's codemap names each module in its layer's table, so a module
    added or split is placed on the map (issue 54): a newcomer finds their room."""
    arch = (PKG.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    codemap = arch[arch.index("## Codemap") : arch.index("## Threads and the event loop")]
    tables = re.split(r"^### ", codemap, flags=re.M)
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "__main__.py" or (
            path.name == "__init__.py" and path.parent.name not in ("wikid", "cli")
        ):
            continue
        layer = path.parent.name
        if layer == "wikid":
            where, name = "Leaves", f"`wikid/{path.name}`"
        else:
            where, name = f"`wikid/{layer}/`", f"`{path.name}`"
        table = next((t for t in tables if t.startswith(where)), "")
        if name not in table:
            missing.append(str(path.relative_to(PKG.parent)))
    assert not missing, f"not in ARCHITECTURE.md's codemap: {missing}"


def test_layers_point_inward() -> None:
    wrong = []
    for module, deps in _graph().items():
        if module in LEAVES:
            inner = set() if module == INNERMOST else {INNERMOST}
            wrong += [f"{module} (a leaf) imports {d}" for d in sorted(deps - inner)]
            continue
        wrong += [f"{module} imports the test helper {d}" for d in sorted(deps & HELPERS)]
        if module in HELPERS:
            continue
        mine = _layer(module)
        for dep in sorted(deps):
            theirs = _layer(dep)
            if dep in LEAVES or (theirs is None and dep == "wikid.__init__"):
                continue
            if mine is None:  # wikid/__main__.py: the console script's module only
                if dep != "wikid.cli":
                    wrong.append(f"{module} imports {dep}")
            elif theirs is None or theirs > mine:
                wrong.append(f"{module} ({LAYERS[mine]}) imports {dep}")
    assert not wrong, "imports that point outward:\n" + "\n".join(wrong)


def test_the_checker_sees_what_it_must() -> None:
    """The checks above would be worthless if the parser missed imports: a function
    level import and a relative one are seen, a TYPE_CHECKING one is not."""
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from wikid.cli import x\n"
        "def f():\n    from wikid.server import daemon\n"
        "from . import graph\n"
    )
    path = PKG.parent / "build" / "probe_layers.py"
    path.parent.mkdir(exist_ok=True)
    try:
        path.write_text(src, encoding="utf-8")
        modules = {**_modules(), "wikid.core.probe": path}
        found = imports_of("wikid.core.probe", path, modules)
    finally:
        path.unlink()
    # importing a submodule imports its package too, so both count
    assert found == {"wikid.server", "wikid.server.daemon", "wikid.core", "wikid.core.graph"}


def test_outer_layers_use_the_index_facade() -> None:
    """The daemon, the CLI and the ask layer call ``Index``'s methods only: reaching
    through it (``index.store.ledger``, ``index.sink.search``) ties them to its insides."""
    reach = re.compile(r"\bindex\.(store|sink|vg|extractor)\b")
    found = [
        f"{p.relative_to(PKG.parent)}:{n}: {line.strip()}"
        for layer in ("ask", "server", "cli")
        for p in sorted((PKG / layer).rglob("*.py"))
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if reach.search(line)
    ]
    assert not found, "\n".join(found)


def _loaded_by(
    code: str, env: dict[str, str] | None = None, heavy: tuple[str, ...] = HEAVY
) -> list[str]:
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]), file=sys.__stderr__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    last = proc.stderr.strip().splitlines()[-1]
    return list(json.loads(last))


def test_the_declared_api_is_light() -> None:
    """``from wikid import request`` (the declared client API) loads none of the heavy
    libraries, and ``wikid.testing``'s embedder is MiniLM's shape without the model."""
    code = "from wikid import DaemonNotRunning, RemoteError, request\nassert callable(request)"
    assert _loaded_by(code) == []
    import wikid
    from wikid.store.embed import MINILM_DIM
    from wikid.testing import HashEmbedder

    assert set(wikid.__all__) == {"__version__", "request", "DaemonNotRunning", "RemoteError"}
    vectors = HashEmbedder().embed(["a", "b", "a"])
    assert vectors.shape == (3, MINILM_DIM) and (vectors[0] == vectors[2]).all()


def test_client_help_imports_nothing_heavy() -> None:
    code = (
        "from wikid.cli import main\n"
        "try:\n    main(['status', '--help'])\n"
        "except SystemExit:\n    pass\n"
    )
    assert _loaded_by(code) == []


def test_client_calls_against_a_daemon_import_nothing_heavy(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("# A\nSee [[B]].\n", encoding="utf-8")
    (vault / "B.md").write_text("# B\nback to [[A]]\n", encoding="utf-8")
    daemon = DaemonProc(vault, tmp_path).start()
    try:
        calls = (["status"], ["links", "A"], ["search", "back"], ["neighbors", "A"], ["cost"])
        for args in calls:
            argv = [*args, "--json", "--vault", str(vault), "--socket", str(daemon.socket)]
            code = (
                "import contextlib, io\n"
                "from wikid.cli import main\n"
                "out = io.StringIO()\n"
                "with contextlib.redirect_stdout(out):\n"
                f"    try:\n        main({argv!r})\n"
                "    except SystemExit as exc:\n        assert not exc.code, exc.code\n"
                "assert json.loads(out.getvalue()), out.getvalue()\n"
            )
            # Parsed by the standard library (cli._fast): not even click is imported.
            # (nor config with typing and hashlib: pathlib the editable install loads)
            light = (*HEAVY, "click", "logging", "wikid.config", "typing", "hashlib")
            assert _loaded_by(code, daemon.env, light) == [], args
    finally:
        daemon.stop()
