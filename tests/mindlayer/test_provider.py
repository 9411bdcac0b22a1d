"""The optional provider, against a real server and a real fake provider on 127.0.0.1.

Embeddings and chat go to :class:`~tests.fake_provider.FakeProvider`; its
vectors are random per text, so semantic tests query with a memory's exact
text (cosine 1) and check scope isolation and fail-closed behaviour, not
paraphrase quality (``benchmarks/mindlayer.py`` measures that with a real model).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memstore import Memory
from memstore.mindlayer import MindLayer, Scope
from memstore.mindlayer.errors import INTERNAL_MESSAGE
from memstore.mindlayer.provider import (
    ChatClient,
    ProviderConfig,
    ProviderError,
    ProviderOutputError,
)
from tests.fake_provider import FakeProvider, Recorded
from tests.mindlayer.conftest import (
    API_KEY,
    Server,
    export,
    new_scope,
    provider_env,
    refused,
    search,
    start,
    store,
)

LEAK = "LEAK-MARKER-provider-internal-detail"


def facts_reply(*facts: Any) -> Any:
    """A chat reply: ``{"facts": [...]}`` for an extraction, a fixed answer otherwise."""

    def reply(body: Any) -> str:
        if "response_format" in body:
            return json.dumps({"facts": list(facts)})
        return "You are vegetarian, so suggest a lentil curry."

    return reply


def chats(fake: FakeProvider) -> list[Recorded]:
    return [r for r in fake.requests if r.path == "/v1/chat/completions"]


def embeddings(fake: FakeProvider) -> list[Recorded]:
    return [r for r in fake.requests if r.path == "/v1/embeddings"]


def assert_internal(r: Any) -> None:
    assert r.status_code == 500, r.text
    assert r.json() == {"error": "internal", "message": INTERNAL_MESSAGE}
    assert LEAK not in r.text and API_KEY not in r.text


class TestSemanticAndHybridRecall:
    def test_semantic_and_hybrid_find_the_memory_in_its_scope(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        a, b = new_scope(), new_scope()
        texts = {
            "diet": "The user is vegetarian and cooks dinner for two people.",
            "bike": "The user rides a red road bike to work.",
            "home": "The user lives in a flat in Lisbon.",
        }
        with provided.client() as c:
            for mid, text in texts.items():
                store(c, a, text, id=mid)
            store(c, b, "Another user entirely.", id="other")
            for mode in ("semantic", "hybrid"):
                hits = search(c, a, texts["bike"], mode=mode, limit=3)
                assert hits[0]["memory"]["id"] == "bike", mode
                assert {h["memory"]["id"] for h in hits} <= set(texts)
            top = search(c, a, texts["bike"], mode="semantic", limit=1)[0]
            assert top["score"] == pytest.approx(1.0, abs=1e-5)
            assert [h["memory"]["id"] for h in search(c, b, texts["bike"], mode="semantic")] == [
                "other"
            ]
            out = export(c, a)["memories"]
            assert all(len(m["vector"]) == fake.dim for m in out)
            assert {m["embedding_model"] for m in out} == {f"fake-embed@{fake.base_url}"}

    def test_hybrid_hits_carry_relevance_and_min_relevance_cuts(self, provided: Server) -> None:
        scope = new_scope()
        with provided.client() as c:
            store(c, scope, "The user rides a red road bike to work.", id="bike")
            store(c, scope, "The user lives in a flat in Lisbon.", id="home")
            hits = search(c, scope, "red road bike", mode="hybrid")
            assert hits and all(0.0 <= h["relevance"] <= 1.0 for h in hits)
            assert "relevance" not in search(c, scope, "red road bike")[0]  # lexical: seed shape
            assert search(c, scope, "red road bike", mode="hybrid", min_relevance=1.0) == []
            for body in (
                {"mode": "lexical", "min_relevance": 0.5},  # relevance is the hybrid search's
                {"mode": "hybrid", "min_relevance": True},
                {"mode": "hybrid", "min_relevance": 2},
            ):
                r = c.post("/v1/search", json={"scope": scope, "query": "bike", **body})
                assert r.status_code == 400, (body, r.text)
                assert "min_relevance" in r.text

    def test_lexical_search_calls_no_provider(self, provided: Server, fake: FakeProvider) -> None:
        scope = new_scope()
        with provided.client() as c:
            store(c, scope, "The user collects vintage fountain pens.", id="pens")
            before = len(fake.requests)
            assert search(c, scope, "fountain pens")[0]["memory"]["id"] == "pens"
            c.post("/v1/context", json={"scope": scope, "query": "pens"})
            assert len(fake.requests) == before

    def test_concurrent_hybrid_queries_whose_words_match_call_no_provider(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        """docs/mindlayer.md: a hybrid query whose words match costs no provider call, also
        when many arrive together (the server batches only the embeddings still wanted)."""
        scope = new_scope()
        fruits = ["apple", "banana", "cherry", "damson", "elderberry", "fig", "grape", "kiwi"]
        with provided.client() as c:
            for fruit in fruits:
                store(c, scope, f"The user bakes {fruit} pie on Sundays.", id=fruit)

        def hybrid(fruit: str, path: str) -> list[str]:
            with provided.client() as c:
                body = {"scope": scope, "query": f"{fruit} pie", "mode": "hybrid"}
                r = c.post(path, json=body)
                assert r.status_code == 200, r.text
                hits = r.json() if path == "/v1/search" else r.json()["memories"]
                return [h["memory"]["id"] for h in hits]

        before = len(embeddings(fake))
        with ThreadPoolExecutor(len(fruits)) as pool:
            for _ in range(4):
                for path in ("/v1/search", "/v1/context"):
                    found = list(pool.map(lambda f, p=path: hybrid(f, p), fruits))
                    assert [ids[0] for ids in found] == fruits
        assert len(embeddings(fake)) == before
        with provided.client() as c:  # a query the words do not answer still embeds
            assert search(c, scope, "The user bakes fig pie on Sundays.", mode="hybrid")
            search(c, scope, "zzzz qqqq", mode="hybrid")
        assert len(embeddings(fake)) > before

    def test_an_embedding_failure_stores_nothing(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.behaviour = "error"
        with provided.client() as c:
            assert_internal(c.post("/v1/memories", json={"scope": scope, "text": "Lost fact."}))
            assert_internal(
                c.post("/v1/search", json={"scope": scope, "query": "x", "mode": "semantic"})
            )
            fake.behaviour = "ok"
            assert export(c, scope)["memories"] == []


class TestExtractionAndGroundedChat:
    def test_ingest_stores_facts_not_the_transcript(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.chat_content = facts_reply("The user is vegetarian.", "The user cooks for two.")
        transcript = "User: I am vegetarian and cook for two. RAW-TRANSCRIPT-MARKER"
        with provided.client() as c:
            r = c.post("/v1/ingest", json={"scope": scope, "text": transcript, "session": "first"})
            assert r.status_code == 200, r.text
            stored = r.json()["memories"]
            assert [m["text"] for m in stored] == [
                "The user is vegetarian.",
                "The user cooks for two.",
            ]
            assert {m["session"] for m in stored} == {"first"}
            request = chats(fake)[-1]
            assert request.body["response_format"] == {"type": "json_object"}
            assert request.body["model"] == "fake-chat"
            assert request.headers["Authorization"] == f"Bearer {API_KEY}"
            assert transcript in [m["content"] for m in request.body["messages"]]
            assert '{"facts"' in request.body["messages"][0]["content"]
            memories = export(c, scope)["memories"]
            assert sorted(m["text"] for m in memories) == sorted(m["text"] for m in stored)
            assert not any("RAW-TRANSCRIPT-MARKER" in m["text"] for m in memories)
            again = c.post("/v1/ingest", json={"scope": scope, "text": transcript}).json()
            assert [m["id"] for m in again["memories"]] == [m["id"] for m in stored]
            assert len(export(c, scope)["memories"]) == 2  # the same facts collapse

    def test_chat_answers_from_retrieved_context_and_stores_nothing(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.chat_content = facts_reply()
        with provided.client() as c:
            store(c, scope, "The user is vegetarian.", id="diet")
            c.put("/v1/personality", json={"scope": scope, "personality": "Be practical."})
            r = c.post("/v1/chat", json={"scope": scope, "query": "vegetarian dinner ideas"})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["answer"] == "You are vegetarian, so suggest a lentil curry."
            assert body["context"]["personality"] == "Be practical."
            assert [h["memory"]["id"] for h in body["context"]["memories"]] == ["diet"]
            assert body["context"]["ids"] == ["diet"]
            messages = chats(fake)[-1].body["messages"]
            assert "response_format" not in chats(fake)[-1].body
            assert "- [diet] The user is vegetarian." in messages[0]["content"]
            assert "Be practical." in messages[0]["content"]
            assert messages[1] == {"role": "user", "content": "vegetarian dinner ideas"}
            assert [m["id"] for m in export(c, scope)["memories"]] == ["diet"]

    def test_ingested_facts_are_derived_in_the_engine(self, fake: FakeProvider) -> None:
        fake.chat_content = facts_reply("The user plays the cello.")
        with Memory(embedder=None) as mem, ChatClient(fake.base_url, "fake-chat") as chat:
            ml = MindLayer(mem, chat=chat)
            scope = Scope("assistant", "synthetic-user")
            (fact,) = ml.ingest(scope, "User: I play the cello.")["memories"]
            explicit = ml.remember(scope, "The user is left-handed.", id="hand")
            assert mem.get(scope.item_id(fact["id"])).origin == "derived"  # type: ignore[union-attr]
            assert mem.get(scope.item_id(explicit["id"])).origin == "human"  # type: ignore[union-attr]


class TestExtractionFailureDoesNotPersist:
    def test_chat_failure_stores_nothing(self, provided: Server, fake: FakeProvider) -> None:
        scope = new_scope()
        fake.chat_behaviour = "error"
        with provided.client() as c:
            before = len(chats(fake))
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert len(chats(fake)) == before + 1  # no retry
            assert_internal(c.post("/v1/chat", json={"scope": scope, "query": "hi"}))
            assert export(c, scope)["memories"] == []

    def test_embedding_failure_after_extraction_stores_nothing(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.chat_content = facts_reply("Fact one about tea.", "Fact two about coffee.")
        fake.behaviour = "error"
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: tea."}))
            fake.behaviour = "ok"
            assert export(c, scope)["memories"] == []
            assert search(c, scope, "tea coffee") == []


class TestProviderErrorRedaction:
    def test_provider_bodies_and_the_key_stay_out_of_answers_and_logs(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.error_body = json.dumps({"error": f"{LEAK} key={API_KEY}"}).encode()
        fake.chat_behaviour = "error"
        fake.behaviour = "error"
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert_internal(c.post("/v1/memories", json={"scope": scope, "text": "A fact."}))
        log = provided.log_text()
        assert "HTTP 500" in log and "response body withheld" in log
        assert LEAK not in log and API_KEY not in log

    def test_a_slow_provider_times_out(self, fake: FakeProvider) -> None:
        fake.chat_behaviour = "sleep"
        fake.sleep_seconds = 5.0
        with (
            ChatClient(fake.base_url, "m", API_KEY, timeout=0.3) as chat,
            pytest.raises(ProviderError, match=r"timed out after 0\.3s") as caught,
        ):
            chat.complete([{"role": "user", "content": "hi"}])
        assert API_KEY not in str(caught.value)

    def test_config_repr_hides_the_key(self, fake: FakeProvider) -> None:
        config = ProviderConfig.from_env(
            {
                "MIND_LAYER_BASE_URL": fake.base_url,
                "MIND_LAYER_API_KEY": API_KEY,
                "MIND_LAYER_CHAT_MODEL": "m",
            }
        )
        assert config is not None and config.api_key == API_KEY
        assert API_KEY not in repr(config)
        with ChatClient(fake.base_url, "m", API_KEY) as chat:
            assert API_KEY not in repr(chat)


class TestProviderRejectsRedirect:
    def test_redirects_are_not_followed(self, provided: Server, fake: FakeProvider) -> None:
        scope = new_scope()
        fake.chat_behaviour = "redirect"
        fake.behaviour = "redirect"
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert_internal(c.post("/v1/memories", json={"scope": scope, "text": "A fact."}))
            fake.behaviour = "ok"
            assert export(c, scope)["memories"] == []
        assert not any(r.path == "/elsewhere" for r in fake.requests)
        assert "redirects are refused" in provided.log_text()


class TestInvalidProviderOutput:
    @pytest.mark.parametrize(
        "content",
        [
            "not json at all",
            json.dumps(["a list"]),
            json.dumps({"memories": ["wrong key"]}),
            json.dumps({"facts": "one string"}),
            json.dumps({"facts": [1, 2]}),
            json.dumps({"facts": ["   "]}),
            json.dumps({"facts": [f"Fact {n}." for n in range(21)]}),
        ],
    )
    def test_bad_extraction_answers_store_nothing(
        self, provided: Server, fake: FakeProvider, content: str
    ) -> None:
        scope = new_scope()
        fake.chat_content = content
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert export(c, scope)["memories"] == []

    def test_a_reply_that_is_not_a_chat_completion(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.chat_behaviour = "not_json"
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert_internal(c.post("/v1/chat", json={"scope": scope, "query": "hi"}))
        fake.chat_behaviour = "ok"
        fake.chat_content = "   "
        with provided.client() as c:
            assert_internal(c.post("/v1/chat", json={"scope": scope, "query": "hi"}))

    def test_lone_surrogates_from_the_provider_are_its_fault(
        self, tmp_path: Path, fake: FakeProvider
    ) -> None:
        """JSON can escape half a surrogate pair (``"\\ud83d"``); no UTF-8 text holds one.
        A fact or an answer holding one is invalid provider output: a 500 like any other
        (never a 400 blaming the caller, never an unexpected exception), and nothing stored."""
        server = start(tmp_path / "chat-only", env=provider_env(fake, embedding=None))
        try:
            scope = new_scope()
            fake.chat_content = json.dumps({"facts": ["A good fact.", "A cut emoji \ud83d."]})
            with server.client() as c:
                assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
                assert export(c, scope)["memories"] == []
                fake.chat_content = "An answer cut in half \ud83d."
                assert_internal(c.post("/v1/chat", json={"scope": scope, "query": "hi"}))
            assert "Traceback" not in server.log_text()
        finally:
            assert server.stop() == 0, server.log_text()

    def test_twenty_facts_are_accepted(self, provided: Server, fake: FakeProvider) -> None:
        scope = new_scope()
        fake.chat_content = facts_reply(*[f"Numbered fact {n}." for n in range(20)])
        with provided.client() as c:
            r = c.post("/v1/ingest", json={"scope": scope, "text": "User: many things."})
            assert r.status_code == 200 and len(r.json()["memories"]) == 20


class TestInputValidationAndAtomicBatch:
    def test_one_bad_fact_keeps_the_whole_batch_out(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        fake.chat_content = facts_reply("A perfectly good fact.", "x" * 8193)
        with provided.client() as c:
            assert_internal(c.post("/v1/ingest", json={"scope": scope, "text": "User: hi."}))
            assert export(c, scope)["memories"] == []

    def test_invalid_requests_never_reach_the_provider(
        self, provided: Server, fake: FakeProvider
    ) -> None:
        scope = new_scope()
        before = len(fake.requests)
        with provided.client() as c:
            for path, body in (
                ("/v1/ingest", {"scope": scope, "text": "t" * 8193}),
                ("/v1/ingest", {"scope": scope, "text": "hi", "session": "s" * 129}),
                ("/v1/chat", {"scope": scope, "query": "hi", "limit": 0}),
                ("/v1/memories", {"scope": scope, "text": "hi", "extra": 1}),
            ):
                assert c.post(path, json=body).status_code == 400
        assert len(fake.requests) == before

    def test_the_python_api_validates_before_writing(self, fake: FakeProvider) -> None:
        fake.chat_content = facts_reply("Good fact.", "")
        with Memory(embedder=None) as mem, ChatClient(fake.base_url, "fake-chat") as chat:
            ml = MindLayer(mem, chat=chat)
            scope = Scope("assistant", "synthetic-user")
            with pytest.raises(ProviderOutputError, match="empty fact"):
                ml.ingest(scope, "User: hi.")
            assert ml.export(scope)["memories"] == []


class TestProviderURLValidation:
    @pytest.mark.parametrize(
        ("env", "words"),
        [
            ({"MEMSTORE_PROVIDER_BASE_URL": "http://example.com/v1"}, "https://"),
            ({"MIND_LAYER_BASE_URL": "http://10.0.0.1/v1"}, "https://"),
            ({"MEMSTORE_PROVIDER_BASE_URL": "https://u:p@api.example.com/v1"}, "credentials"),
            ({"MEMSTORE_PROVIDER_BASE_URL": "https://api.example.com/v1?k=1"}, "query"),
            ({"MEMSTORE_PROVIDER_BASE_URL": "ftp://api.example.com"}, "http(s) URL"),
        ],
    )
    def test_unsafe_urls_refuse_to_start(
        self, tmp_path: Path, env: dict[str, str], words: str
    ) -> None:
        env = {**env, "MEMSTORE_PROVIDER_CHAT_MODEL": "m"}
        code, out = refused(tmp_path / "data", env=env)
        assert code == 2 and words in out, out
        assert "p@" not in out and "k=1" not in out
        assert not (tmp_path / "data").exists()

    def test_half_configured_providers_refuse_to_start(self, tmp_path: Path) -> None:
        code, out = refused(
            tmp_path / "d", env={"MEMSTORE_PROVIDER_BASE_URL": "https://a.example/v1"}
        )
        assert code == 2 and "no model" in out
        code, out = refused(tmp_path / "d", env={"MIND_LAYER_CHAT_MODEL": "m"})
        assert code == 2 and "BASE_URL" in out

    def test_loopback_http_and_seed_names_are_accepted(self) -> None:
        config = ProviderConfig.from_env(
            {"MIND_LAYER_BASE_URL": "http://127.0.0.1:11434/v1/", "MIND_LAYER_EMBEDDING_MODEL": "e"}
        )
        assert config is not None
        assert (config.base_url, config.embedding_model, config.chat()) == (
            "http://127.0.0.1:11434/v1",
            "e",
            None,
        )
        first = ProviderConfig.from_env(
            {
                "MEMSTORE_PROVIDER_BASE_URL": "https://a.example",
                "MIND_LAYER_BASE_URL": "https://b",
                "MEMSTORE_PROVIDER_CHAT_MODEL": "m",
            }
        )
        assert first is not None and first.base_url == "https://a.example"
