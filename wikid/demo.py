"""``python -m wikid.demo VAULT``: what README command 1 runs on the example vault.

Why a module and not a shell script: it shows the library's public surface in
a dozen lines, and it works the same on any machine the package installs on.
"""

from __future__ import annotations

import sys
from pathlib import Path

from wikid.cli import format_summary
from wikid.graph import VaultGraph


def main(argv: list[str]) -> int:
    vault = Path(argv[0] if argv else "config/example-vault")
    vg = VaultGraph.load(vault)
    print(format_summary(vg))
    target = next((p for p, n in sorted(vg.notes.items()) if n.title == "Analytical Engine"), None)
    if target:
        print(f"\nbacklinks of {target}:")
        for src, _, data in sorted(
            vg.g.in_edges(target, data=True), key=lambda e: (e[0], e[2]["line"])
        ):
            print(f"  {src} (line {data['line']}): {data['context']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
