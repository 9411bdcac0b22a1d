"""MemoryProtocol 0.1 over HTTP: the pure pieces of the adapter (extra ``memstore[server]``).

Nothing imported here needs a web framework: the filter DSL, chunking,
the error taxonomy, bearer-token auth and rate limits, and hard-delete
confirmations are plain Python, usable and tested without a server.
"""
