"""Framework adapters: memstore behind another framework's memory interface.

Each adapter lives in its own module and imports its framework itself, so
importing this package never pulls one in:

- :mod:`memstore.integrations.langgraph`: ``MemstoreStore``, a LangGraph
  ``BaseStore`` (``pip install "memstore-engine[langgraph]"``).

Adapters translate between the framework and :class:`memstore.Memory`; they add
no storage rules of their own.
"""
