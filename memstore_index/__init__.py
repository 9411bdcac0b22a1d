"""memstore_index: embedders and the HNSW vector index (CellStore) behind semantic search.

>>> from memstore_index import CellStore, HashEmbedder, IndexEntry
>>> cells = CellStore(HashEmbedder(dim=64))
>>> cells.upsert(IndexEntry("n1"), "the ledger pool ran dry at peak")
>>> cells.search("ledger pool", 1)[0][0].id
'n1'

``OnnxMiniLMEmbedder`` (extra ``memstore-engine[embed]``) and
``OpenAICompatibleEmbedder`` (extra ``memstore-engine[http]``) live in their own
modules, imported on demand, so the core needs neither dependency.
"""

from memstore_index._vectorfile import (
    StoredVector,
    VectorFileCorruptError,
    VectorFileError,
    VectorFileFullError,
    VectorFileWarning,
    text_hash,
)
from memstore_index.cellstore import (
    DEFAULT_EF,
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_M,
    EXACT_THRESHOLD,
    CellStore,
    EmbedderMismatchError,
    SearchTiming,
)
from memstore_index.embedder import (
    Embedder,
    EmbedderConfigError,
    EmbedderInputError,
    EmbeddingError,
    default_embedder,
)
from memstore_index.entry import IndexEntry, embed_text, entry_for
from memstore_index.hash_embedder import HashEmbedder
from memstore_index.stored import stored_model, stored_vectors

__all__ = [
    "DEFAULT_EF",
    "DEFAULT_EF_CONSTRUCTION",
    "DEFAULT_M",
    "EXACT_THRESHOLD",
    "CellStore",
    "Embedder",
    "EmbedderConfigError",
    "EmbedderInputError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "HashEmbedder",
    "IndexEntry",
    "SearchTiming",
    "StoredVector",
    "VectorFileCorruptError",
    "VectorFileError",
    "VectorFileFullError",
    "VectorFileWarning",
    "default_embedder",
    "embed_text",
    "entry_for",
    "stored_model",
    "stored_vectors",
    "text_hash",
]
