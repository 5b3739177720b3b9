"""A venv with wikid installed from a wheel of this checkout, as a user installs it:
plain pip, no editable finder on the import path. Its dependencies are this
environment's (made visible to the new venv by a path file), so nothing is
downloaded. ``tests/test_wheel.py`` and ``bench/bench_client.py`` use it."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    """Run as a user would: from outside the checkout and with no PYTHONPATH (either
    would shadow the wheel)."""
    env = {k: v for k, v in (env or os.environ).items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=env, timeout=600, cwd="/"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def wheel_venv(tmp: Path) -> Path:
    """Build the wheel into ``tmp/dist`` and install it into the venv ``tmp/venv``
    (returned): its ``bin/wikid`` is the user's command."""
    dist, venv = tmp / "dist", tmp / "venv"
    build = ("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, REPO)
    run(sys.executable, "-m", "pip", *build)
    (wheel,) = dist.glob("wikid_rag-*.whl")
    run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    run(py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel)
    # Only now the dependencies: before, pip would see this environment's wikid too.
    (site / "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv
