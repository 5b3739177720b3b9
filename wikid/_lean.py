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

import sys

TYPE_CHECKING = False  # a client call imports this module: annotations only
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

OPTIONAL = ("pypinyin", "langchain_text_splitters", "langchain_experimental", "langchain_core")


def _drop_pinyin_warning() -> None:
    import logging

    class NoPinyinWarning(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "pypinyin is not installed" not in record.getMessage()

    logging.getLogger("lightrag").addFilter(NoPinyinWarning())


class _BeforeLightRAG:
    """A finder that finds nothing: it sees ``lightrag`` about to be imported and adds
    the logging filter then. Why not at once: ``import logging`` cost a client call
    (``wikid status``) a third of a bare Python start-up, for a warning only a
    process that imports LightRAG can log."""

    def find_spec(
        self, name: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "lightrag":
            sys.meta_path.remove(self)
            _drop_pinyin_warning()
        return None


def keep_out() -> None:
    """Before LightRAG is first imported: mark its unused optional imports missing."""
    for name in OPTIONAL:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    if "lightrag" in sys.modules:
        _drop_pinyin_warning()
    elif not any(isinstance(f, _BeforeLightRAG) for f in sys.meta_path):
        sys.meta_path.insert(0, _BeforeLightRAG())
