"""wikid: keep a LightRAG graph-RAG index of an Obsidian vault fresh."""

__version__ = "0.2.0"
