"""memstore_index: embedders and the HNSW vector index (CellStore) behind semantic search."""

__all__: list[str] = []
