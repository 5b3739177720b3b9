"""``python -m wikid.cli.demo VAULT``: what README command 1 runs on the example vault.

It shows the whole loop on a temporary copy (wikid never writes into a vault,
and the demo does not edit yours): start the daemon (index), ask a question
over the socket with no LLM (query), edit a note and watch the new link
arrive (watch), then stop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from wikid.client import DaemonNotRunning, request


def _wait(sock: Path, proc: subprocess.Popen[bytes], test: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited with {proc.returncode}")
        try:
            result = test()
            if result:
                return result
        except (DaemonNotRunning, ConnectionError, OSError):
            pass
        time.sleep(0.1)
    raise SystemExit("timed out")


def main(argv: list[str]) -> int:
    source = Path(argv[0] if argv else "config/example-vault")
    with tempfile.TemporaryDirectory(prefix="wikid-demo-") as tmp:
        vault = Path(tmp) / "example-vault"
        shutil.copytree(source, vault)
        sock = Path(tmp) / "run" / "demo.sock"
        env = {**os.environ, "XDG_DATA_HOME": str(Path(tmp) / "data"), "WIKID_DEBOUNCE_MS": "200"}
        print(f"1. index + watch: wikid run --vault {vault}")
        proc = subprocess.Popen(
            [sys.executable, "-m", "wikid", "run", "--vault", str(vault), "--socket", str(sock)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            status = _wait(sock, proc, lambda: (s := request(sock, "status")) and s["ready"] and s)
            print(
                f"   {status['notes']} notes -> {status['entities']} entities, {status['relations']} relations, "
                f"{status['chunks']} chunks; LLM calls: {status['llm_calls']}"
            )
            question = "Who wrote the first program for the Analytical Engine?"
            print(f"2. query (no LLM): {question}")
            result = request(sock, "query", text=question, budget=600)
            print(f"   evidence: {result['tokens']} tokens, 0 LLM calls")
            for e in result["entities"][:3]:
                print(f"   entity  {e['name']} in {e['path']}")
            for c in result["chunks"][:2]:
                print(f"   source  {c['path']}:{c['line']}: {' '.join(c['text'].split())[:80]!r}")
            print("3. edit: append a link to People/Ada Lovelace.md")
            started = time.monotonic()
            with open(vault / "People" / "Ada Lovelace.md", "a", encoding="utf-8") as fh:
                fh.write("\nShe corresponded with [[Mary Somerville]].\n")
            _wait(
                sock,
                proc,
                lambda: any(
                    e["target"] == "ghost:Mary Somerville"
                    for e in request(sock, "links", note="Ada Lovelace")["links"]
                ),
            )
            print(f"   the daemon saw the new link after {time.monotonic() - started:.2f} s")
            broken = request(sock, "broken")["broken"]
            print("   unresolved links now: " + ", ".join(b["target"] for b in broken))
        finally:
            try:
                request(sock, "stop")
            except (DaemonNotRunning, ConnectionError, OSError):
                proc.terminate()
            proc.wait(timeout=60)
        print("4. stopped. Run the tests with: bash .ci/test")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
