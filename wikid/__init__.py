"""wikid: keep a LightRAG graph-RAG index of an Obsidian vault fresh."""

import os

__version__ = "0.2.0"

# LightRAG's modules call load_dotenv(".env") when imported: a .env in whatever
# folder wikid happens to start in would silently override its settings (a
# workspace, a storage class). python-dotenv honours this switch; a user who sets
# it to 0 gets the old behaviour.
os.environ.setdefault("PYTHON_DOTENV_DISABLED", "1")

# numpy's OpenBLAS starts a thread per core for each matrix product. wikid already
# runs its work side by side (a query's retrievers, one model run per core), so those
# threads only fight over the cores: a query's vector scan of 104k rows took 84 ms
# beside two busy threads with them, 8.8 ms without (11.7 ms on an idle machine). Read
# when numpy loads, so it must be set first; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from wikid._lean import keep_out

keep_out()
