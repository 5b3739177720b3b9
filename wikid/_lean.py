"""LightRAG's optional imports that wikid never uses, kept out of every process.

Why: ``from lightrag import LightRAG`` imports, if they are installed, pypinyin (for
sorting Chinese file names in the WebUI's document list) and LangChain's text
splitters (LightRAG's own chunkers; wikid chunks notes itself). Measured: 151 MB of
RSS after ``import wikid.sync.index`` with them, 89 MB without, and the import takes
0.6 s instead of 1.1. LightRAG guards each import and falls back (plain string sorting), so they
are marked missing here (``sys.modules[name] = None`` makes ``import`` raise
ImportError), and the one warning LightRAG logs about pypinyin is dropped.
"""

from __future__ import annotations

import logging
import sys

OPTIONAL = ("pypinyin", "langchain_text_splitters", "langchain_experimental", "langchain_core")


class _NoPinyinWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pypinyin is not installed" not in record.getMessage()


def keep_out() -> None:
    """Before LightRAG is first imported: mark its unused optional imports missing."""
    for name in OPTIONAL:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    logging.getLogger("lightrag").addFilter(_NoPinyinWarning())
