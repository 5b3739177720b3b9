"""``python -m wikid`` is the ``wikid`` command."""

from wikid.cli import main

main()
