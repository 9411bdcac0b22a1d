"""memstore: an embeddable, in-process memory engine for AI agents.

Keep memory items (facts, hypotheses, events, watch items) in a :class:`Store`
under your own rules and find them again with a lexical search that never
scans every item.

>>> from memstore import Item, Store
>>> store = Store()
>>> _ = store.upsert(Item(kind="stable_fact", title="Deploys freeze on Fridays",
...                       content="no production deploys after noon on Friday",
...                       confidence="high"))
>>> [it.title for it in store.keyword_search("friday deploy")]
['Deploys freeze on Fridays']
"""

# First, before the heavy imports: Ctrl-C while the memstore command starts (see there).
from memstore import _startup  # noqa: F401
from memstore.async_memory import AsyncMemory
from memstore.config import DEFAULT_ID_PREFIX, Change, Config, Locker
from memstore.consolidate import ConsolidationGroup, ConsolidationReport
from memstore.errors import (
    InvalidItemError,
    ItemNotFoundError,
    JournalClosedError,
    JournalCorruptError,
    JournalError,
    JournalFullError,
    JournalLockedError,
    JournalSchemaError,
    MemstoreError,
    ReadOnlyError,
    WriteConflictError,
)
from memstore.eventdate import event_time_annotation, parse_event_date, valid_event_date
from memstore.graph import spread
from memstore.item import (
    DEFAULT_HYPOTHESIS_STALE_AFTER,
    DEFAULT_UNKNOWN_STALE_AFTER,
    EXACT_ID_MATCH_SCORE,
    KIND_EVENT,
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_UNKNOWN,
    KIND_WATCH_ITEM,
    MAX_MODEL_LINKS,
    ORIGIN_DERIVED,
    ORIGIN_HUMAN,
    ORIGIN_OBSERVED,
    ORIGIN_VERIFIED,
    REFUTED_DATA_KEY,
    SCOPE_PRIVATE,
    SCOPE_PUBLIC,
    STATUS_ACTIVE,
    STATUS_STALE,
    STATUS_SUPERSEDED,
    VALID_THOUGHT_LINK_RELATIONS,
    Item,
    MemoryCellSpec,
    RefutedRecord,
    Removed,
    ScoredItem,
    ThoughtLink,
)
from memstore.lexical import Lexicon
from memstore.memory import Memory, MemoryStats
from memstore.neardup import (
    MEMORY_NEAR_DUP_THRESHOLD,
    NEAR_DUP_MIN_TOKENS,
    better_routing_fact,
    cluster_near_duplicates,
    dedup_comparable,
    find_near_duplicate,
    near_duplicate_memory,
)
from memstore.rerank import RERANK_RANK_DECAY, rerank_base_score
from memstore.search import (
    Explanation,
    SearchConfig,
    Searcher,
    SearchResult,
    default_visible,
)
from memstore.stats import (
    STAT_EXHAUSTIVE_FALLBACKS,
    STAT_KEYWORD_HITS,
    STAT_KW_TRIGRAM_HITS,
    STAT_KW_VOICE_HITS,
    STAT_KW_VOICE_MISSES,
    STAT_SEMANTIC_CALLS,
    STAT_SEMANTIC_FALLBACKS,
    STAT_TOTAL,
    CallerStat,
    PhaseStat,
    PhaseStats,
    SearchStats,
    SearchStatsSnapshot,
    StatsSink,
    snapshot_from_ops,
)
from memstore.store import Store
from memstore.tags import (
    AUTHOR_TAG_PREFIX,
    PARTITION_ALL,
    PARTITION_TAG_PREFIX,
    PRIVATE_OWNER_TAG_PREFIX,
    SERVICE_TAG_PREFIX,
    SHARED_TAG,
    TOPIC_TAG_PREFIX,
    author_tag_value,
    filter_visible_to_user,
    has_shared_tag,
    is_private_item,
    is_shared_item,
    partition_from_tags,
    private_owner,
    restored_origin,
    sanitize_tag_value,
    service_tag_value,
    stamp_author_tag,
    strip_author_tags,
    visible_to_user,
)
from memstore.text import dedup_tokens, kw_tokens, normalize_query, token_grams
from memstore.validate import stamp_knowledge_retention, thought_link_rejection
from memstore.validate import validate_base as _validate_base
from memstore.vocabulary import Vocabulary, base_vocabulary

__version__ = "0.1.0"


def validate_base(vocabulary: Vocabulary, item: Item) -> str:
    """Why ``item`` breaks the rules every item obeys, or ``""``.

    The :meth:`Store.validate_base` rules for a caller with a vocabulary but no store.
    """
    return _validate_base(vocabulary, item)


__all__ = [
    "AUTHOR_TAG_PREFIX",
    "DEFAULT_HYPOTHESIS_STALE_AFTER",
    "DEFAULT_ID_PREFIX",
    "DEFAULT_UNKNOWN_STALE_AFTER",
    "EXACT_ID_MATCH_SCORE",
    "KIND_EVENT",
    "KIND_HYPOTHESIS",
    "KIND_OPERATIONAL_PATTERN",
    "KIND_STABLE_FACT",
    "KIND_UNKNOWN",
    "KIND_WATCH_ITEM",
    "MAX_MODEL_LINKS",
    "MEMORY_NEAR_DUP_THRESHOLD",
    "NEAR_DUP_MIN_TOKENS",
    "ORIGIN_DERIVED",
    "ORIGIN_HUMAN",
    "ORIGIN_OBSERVED",
    "ORIGIN_VERIFIED",
    "PARTITION_ALL",
    "PARTITION_TAG_PREFIX",
    "PRIVATE_OWNER_TAG_PREFIX",
    "REFUTED_DATA_KEY",
    "RERANK_RANK_DECAY",
    "SCOPE_PRIVATE",
    "SCOPE_PUBLIC",
    "SERVICE_TAG_PREFIX",
    "SHARED_TAG",
    "STATUS_ACTIVE",
    "STATUS_STALE",
    "STATUS_SUPERSEDED",
    "STAT_EXHAUSTIVE_FALLBACKS",
    "STAT_KEYWORD_HITS",
    "STAT_KW_TRIGRAM_HITS",
    "STAT_KW_VOICE_HITS",
    "STAT_KW_VOICE_MISSES",
    "STAT_SEMANTIC_CALLS",
    "STAT_SEMANTIC_FALLBACKS",
    "STAT_TOTAL",
    "TOPIC_TAG_PREFIX",
    "VALID_THOUGHT_LINK_RELATIONS",
    "AsyncMemory",
    "CallerStat",
    "Change",
    "Config",
    "ConsolidationGroup",
    "ConsolidationReport",
    "Explanation",
    "InvalidItemError",
    "Item",
    "ItemNotFoundError",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalError",
    "JournalFullError",
    "JournalLockedError",
    "JournalSchemaError",
    "Lexicon",
    "Locker",
    "Memory",
    "MemoryCellSpec",
    "MemoryStats",
    "MemstoreError",
    "PhaseStat",
    "PhaseStats",
    "ReadOnlyError",
    "RefutedRecord",
    "Removed",
    "ScoredItem",
    "SearchConfig",
    "SearchResult",
    "SearchStats",
    "SearchStatsSnapshot",
    "Searcher",
    "StatsSink",
    "Store",
    "ThoughtLink",
    "Vocabulary",
    "WriteConflictError",
    "__version__",
    "author_tag_value",
    "base_vocabulary",
    "better_routing_fact",
    "cluster_near_duplicates",
    "dedup_comparable",
    "dedup_tokens",
    "default_visible",
    "event_time_annotation",
    "filter_visible_to_user",
    "find_near_duplicate",
    "has_shared_tag",
    "is_private_item",
    "is_shared_item",
    "kw_tokens",
    "near_duplicate_memory",
    "normalize_query",
    "parse_event_date",
    "partition_from_tags",
    "private_owner",
    "rerank_base_score",
    "restored_origin",
    "sanitize_tag_value",
    "service_tag_value",
    "snapshot_from_ops",
    "spread",
    "stamp_author_tag",
    "stamp_knowledge_retention",
    "strip_author_tags",
    "thought_link_rejection",
    "token_grams",
    "valid_event_date",
    "validate_base",
    "visible_to_user",
]
