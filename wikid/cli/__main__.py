"""``python -m wikid.cli`` is the ``wikid`` command too."""

from wikid.cli import main

main()
