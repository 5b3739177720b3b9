"""wikid: keep a LightRAG graph-RAG index of an Obsidian vault fresh."""

import os

__version__ = "0.2.0"

# LightRAG's modules call load_dotenv(".env") when imported: a .env in whatever
# folder wikid happens to start in would silently override its settings (a
# workspace, a storage class). python-dotenv honours this switch; a user who sets
# it to 0 gets the old behaviour.
os.environ.setdefault("PYTHON_DOTENV_DISABLED", "1")

from wikid._lean import keep_out

keep_out()
