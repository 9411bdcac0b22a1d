"""Seed 002's offline capabilities against a real server: memories, retrieval, scopes."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstore import Memory
from memstore.mindlayer import MindLayer, Scope
from memstore.mindlayer.errors import MindLayerError
from tests.mindlayer.conftest import Server, export, new_scope, search, store

DIET = "The user is vegetarian and cooks dinner for two people."


def ids(hits: list[dict[str, Any]]) -> list[str]:
    return [h["memory"]["id"] for h in hits]


class TestNoProviderRequired:
    def test_store_and_retrieve_without_any_provider(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            stored = store(c, scope, DIET, id="diet", session="first-conversation")
            assert set(stored) == {"id", "text", "session", "created_at", "updated_at"}
            assert stored["id"] == "diet" and stored["session"] == "first-conversation"
            hits = search(c, scope, "vegetarian dinner")
            assert ids(hits) == ["diet"] and hits[0]["score"] > 0

    def test_provider_routes_say_what_is_missing(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            for path, body in (
                ("/v1/ingest", {"scope": scope, "text": "User: I am vegetarian."}),
                ("/v1/chat", {"scope": scope, "query": "what do I eat?"}),
                ("/v1/search", {"scope": scope, "query": "x", "mode": "semantic"}),
                ("/v1/context", {"scope": scope, "query": "x", "mode": "hybrid"}),
            ):
                r = c.post(path, json=body)
                assert r.status_code == 400, (path, r.text)
                assert "model" in r.json()["message"]
            assert export(c, scope)["memories"] == []


class TestLexicalRecall:
    def test_stems_typos_and_no_match(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            store(c, scope, DIET, id="diet")
            store(c, scope, "The user's bicycle is a red road bike.", id="bike")
            assert ids(search(c, scope, "cooking"))[0] == "diet"  # stem of "cooks"
            assert ids(search(c, scope, "vegetarain"))[0] == "diet"  # a typo
            assert ids(search(c, scope, "bicycles", mode="lexical"))[0] == "bike"
            assert search(c, scope, "astronomy telescope") == []

    def test_limit_bounds_the_hits(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            for n in range(8):
                store(c, scope, f"Note {n} about the garden and its tomatoes.")
            assert len(search(c, scope, "garden tomatoes")) == 5  # the default
            assert len(search(c, scope, "garden tomatoes", limit=2)) == 2
            assert len(search(c, scope, "garden tomatoes", limit=100)) == 8


class TestScopeIsolation:
    def test_search_export_and_deletion_stay_in_their_scope(self, plain: Server) -> None:
        a, b = new_scope(), new_scope()
        other_user = {"agent": a["agent"], "user": "someone-else"}
        with plain.client() as c:
            store(c, a, DIET, id="diet")
            store(c, b, "The user eats fish on Fridays.", id="diet")
            assert search(c, other_user, "vegetarian") == []
            assert [h["memory"]["text"] for h in search(c, b, "diet fish")] == [
                "The user eats fish on Fridays."
            ]
            assert search(c, b, "vegetarian") == []
            r = c.request("DELETE", "/v1/scope", params=b)
            assert r.status_code == 200 and r.json() == {"deleted": 1}
            assert [m["id"] for m in export(c, a)["memories"]] == ["diet"]
            assert export(c, b)["memories"] == []

    def test_the_longest_agent_and_user_ids_are_a_scope_like_any(self, plain: Server) -> None:
        """Seed 002 accepts agent and user ids of 128 characters each: such a scope stores,
        searches, exports and deletes, and stays apart from the scope one character shorter."""
        agent = "a" * 128
        long_scope = {"agent": agent, "user": "u" * 128}
        shorter = {"agent": agent, "user": "u" * 127}
        with plain.client() as c:
            store(c, long_scope, DIET, id="diet")
            r = c.put("/v1/personality", json={"scope": long_scope, "personality": "Be brief."})
            assert r.status_code == 200, r.text
            assert ids(search(c, long_scope, "vegetarian dinner")) == ["diet"]
            assert search(c, shorter, "vegetarian dinner") == []
            assert export(c, shorter) == {"personality": "", "memories": []}
            exported = export(c, long_scope)
            assert exported["personality"] == "Be brief."
            assert [m["id"] for m in exported["memories"]] == ["diet"]
            r = c.request("DELETE", "/v1/scope", params=long_scope)
            assert r.status_code == 200 and r.json() == {"deleted": 1}
            assert export(c, long_scope) == {"personality": "", "memories": []}

    def test_other_surfaces_items_in_the_folder_never_crowd_a_scope_out(
        self, tmp_path: Path
    ) -> None:
        """Untagged items of kind ``memory`` (an MCP agent's, say) outranking a scope's own
        memory by the dozen: every mode still finds the scope's memory, and only it."""
        with Memory(tmp_path / "data", embedder="hash") as mem:
            ml = MindLayer(mem)
            scope = Scope("assistant", "synthetic-user")
            ml.remember(scope, "The user cooks vegetarian dinner on weekdays.", id="diet")
            for n in range(60):
                mem.add(
                    f"Vegetarian dinner idea {n}: lentil dinner, vegetarian dinner.", kind="memory"
                )
            for mode in ("lexical", "semantic", "hybrid"):
                assert ids(ml.search(scope, "vegetarian dinner", mode=mode)) == ["diet"], mode
                ctx = ml.context(scope, "vegetarian dinner", mode=mode)
                assert ctx["ids"] == ["diet"], mode


class TestExplicitUpdatesAndDeduplication:
    def test_update_by_id_keeps_created_at(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            first = store(c, scope, DIET, id="diet")
            time.sleep(0.01)
            second = store(c, scope, "The user is vegan now.", id="diet", session="s2")
            assert second["id"] == "diet" and second["text"] == "The user is vegan now."
            assert second["created_at"] == first["created_at"]
            assert second["updated_at"] > first["updated_at"]
            memories = export(c, scope)["memories"]
            assert [(m["id"], m["text"], m["session"]) for m in memories] == [
                ("diet", "The user is vegan now.", "s2")
            ]
            assert search(c, scope, "vegetarian") == []

    def test_exact_trimmed_duplicates_collapse(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            one = store(c, scope, DIET)
            two = store(c, scope, f"  {DIET}\n")
            other = store(c, scope, DIET.replace("two", "three"))
            assert one == two and one["text"] == DIET
            assert one["id"].startswith("m-") and other["id"] != one["id"]
            assert len(export(c, scope)["memories"]) == 2


class TestExportAndDeletion:
    def test_export_then_delete_one_then_the_scope(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            store(c, scope, DIET, id="diet")
            store(c, scope, "The user lives in Lisbon.", id="home")
            c.put("/v1/personality", json={"scope": scope, "personality": "Be brief."})
            out = export(c, scope)
            assert out["personality"] == "Be brief."
            assert [m["id"] for m in out["memories"]] == ["diet", "home"]
            assert all(
                m["vector"] is None and m["embedding_model"] is None for m in out["memories"]
            )
            r = c.request("DELETE", "/v1/memories", params={**scope, "id": "diet"})
            assert r.status_code == 200 and r.json() == {"deleted": "diet"}
            again = c.request("DELETE", "/v1/memories", params={**scope, "id": "diet"})
            assert again.status_code == 404 and again.json()["error"] == "not_found"
            assert search(c, scope, "vegetarian") == []
            assert c.request("DELETE", "/v1/scope", params=scope).json() == {"deleted": 1}
            assert export(c, scope) == {"personality": "", "memories": []}


class TestPersonalityContext:
    def test_context_holds_personality_memories_and_receipt(self, plain: Server) -> None:
        scope, other = new_scope(), new_scope()
        with plain.client() as c:
            store(c, scope, DIET, id="diet")
            r = c.put("/v1/personality", json={"scope": scope, "personality": "Be warm."})
            assert r.status_code == 200 and r.json() == {"personality": "Be warm."}
            ctx = c.post("/v1/context", json={"scope": scope, "query": "dinner"}).json()
            assert ctx["personality"] == "Be warm."
            assert ids(ctx["memories"]) == ["diet"] and ctx["ids"] == ["diet"]
            assert ctx["prompt"] == f"Personality:\nBe warm.\n\nMemories:\n- [diet] {DIET}"
            tight = c.post(
                "/v1/context", json={"scope": scope, "query": "dinner", "max_chars": 30}
            ).json()
            assert tight["ids"] == [] and tight["omitted"] == ["diet"]
            assert len(tight["prompt"]) <= 30
            bare = c.post("/v1/context", json={"scope": other, "query": "dinner"}).json()
            assert bare == {
                "personality": "",
                "memories": [],
                "prompt": "",
                "ids": [],
                "omitted": [],
            }
            c.put("/v1/personality", json={"scope": scope, "personality": ""})
            assert export(c, scope)["personality"] == ""


class TestHTTPMemoryLifecycle:
    def test_every_route_in_order(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            assert c.get("/healthz").json()["status"] == "ok"
            store(c, scope, DIET, id="diet", session="first-conversation")
            assert (
                c.put(
                    "/v1/personality", json={"scope": scope, "personality": "Practical."}
                ).status_code
                == 200
            )
            assert ids(search(c, scope, "vegetarian dinner", mode="lexical", limit=5)) == ["diet"]
            ctx = c.post("/v1/context", json={"scope": scope, "query": "vegetarian"}).json()
            assert ctx["personality"] == "Practical." and ids(ctx["memories"]) == ["diet"]
            assert [m["id"] for m in export(c, scope)["memories"]] == ["diet"]
            assert (
                c.request("DELETE", "/v1/memories", params={**scope, "id": "diet"}).status_code
                == 200
            )
            assert c.request("DELETE", "/v1/scope", params=scope).status_code == 200
            assert export(c, scope) == {"personality": "", "memories": []}

    def test_unknown_routes_and_methods(self, plain: Server) -> None:
        with plain.client() as c:
            assert c.get("/v1/memories").status_code == 405
            assert c.put("/v1/search", json={}).status_code == 405
            assert c.get("/v1/nothing-here").status_code == 404
            assert c.get("/v1/nothing-here").json()["error"] == "not_found"
            # With no JSON body too: the route is found before the body is asked for.
            for method, path, status, code in (
                ("POST", "/v1/export?agent=a&user=u", 405, "method_not_allowed"),
                ("PUT", "/v1/search", 405, "method_not_allowed"),
                ("POST", "/v1/scope?agent=a&user=u", 405, "method_not_allowed"),
                ("POST", "/v1/nope", 404, "not_found"),
                ("PUT", "/v1/nope", 404, "not_found"),
                ("POST", "/v1/search/", 404, "not_found"),  # not a 307 to /v1/search
                ("GET", "/healthz/", 404, "not_found"),
            ):
                r = c.request(method, path)
                assert (r.status_code, r.json()["error"]) == (status, code), (method, path)

    def test_a_405_names_the_methods_the_path_takes(self, plain: Server) -> None:
        """RFC 9110: a 405 carries ``Allow``, every method of the path (two routes share one)."""
        with plain.client() as c:
            for method, path, allowed in (
                ("GET", "/v1/memories", {"POST", "DELETE"}),
                ("PUT", "/v1/memories", {"POST", "DELETE"}),
                ("GET", "/v1/search", {"POST"}),
                ("POST", "/v1/personality", {"PUT"}),
                ("DELETE", "/v1/export", {"GET", "HEAD"}),
                ("POST", "/v1/scope", {"DELETE"}),
                ("POST", "/healthz", {"GET", "HEAD"}),
            ):
                r = c.request(method, path)
                assert r.status_code == 405, (method, path)
                assert set(r.headers["allow"].split(", ")) == allowed, (method, path)

    def test_answers_carry_security_headers(self, plain: Server) -> None:
        with plain.client() as c:
            r = c.get("/healthz")
            assert r.headers["x-content-type-options"] == "nosniff"
            assert "access-control-allow-origin" not in r.headers


class TestPythonAPI:
    def test_the_python_api_refuses_what_the_routes_refuse(self, tmp_path: Path) -> None:
        """``MindLayer`` answers what the routes answer: out-of-bounds input is a 400
        :class:`MindLayerError`, and nothing is written."""
        with Memory(tmp_path / "data", embedder=None) as mem:
            ml = MindLayer(mem)
            scope = Scope("assistant", "synthetic-user")
            calls: list[tuple[str, Callable[[], object]]] = [
                ("id", lambda: ml.remember(scope, "tea", id="a/b")),
                ("id", lambda: ml.remember(scope, "tea", id="")),
                ("text", lambda: ml.remember(scope, "t" * 8193)),
                ("session", lambda: ml.remember(scope, "tea", session="s" * 129)),
                ("personality", lambda: ml.set_personality(scope, "p" * 8193)),
                ("id", lambda: ml.forget(scope, "a/b")),
                ("limit", lambda: ml.search(scope, "tea", limit=0)),
                ("limit", lambda: ml.search(scope, "tea", limit=101)),
                ("query", lambda: ml.search(scope, "q" * 8193)),
                ("query", lambda: ml.context(scope, "  ")),
                ("max_chars", lambda: ml.context(scope, "tea", max_chars=0)),
                # the route's 0-1 bound (pydantic) held for HTTP alone: -1 was served
                ("min_relevance", lambda: ml.search(scope, "tea", min_relevance=-1.0)),
                ("min_relevance", lambda: ml.context(scope, "tea", min_relevance=-0.5)),
                ("min_relevance", lambda: ml.search(scope, "tea", min_relevance=float("nan"))),
                ("min_relevance", lambda: ml.search(scope, "tea", min_relevance="1")),  # type: ignore[arg-type]
                # a value of the wrong type was an AttributeError from inside the check
                ("text", lambda: ml.remember(scope, 5)),  # type: ignore[arg-type]
                ("session", lambda: ml.remember(scope, "tea", session=None)),  # type: ignore[arg-type]
                ("personality", lambda: ml.set_personality(scope, None)),  # type: ignore[arg-type]
                ("query", lambda: ml.search(scope, b"tea")),  # type: ignore[arg-type]
            ]
            for field, call in calls:
                with pytest.raises(MindLayerError) as refused:
                    call()
                assert refused.value.status == 400, field
                # A number out of range in the words every adapter uses (memstore.bounded).
                named = (f"{field}: ", f"{field} must be between ")
                assert refused.value.message.startswith(named), refused.value.message
            assert ml.export(scope) == {"personality": "", "memories": []}


class TestConcurrentMemoryAccess:
    def test_parallel_writes_and_reads_all_land(self, plain: Server) -> None:
        scope = new_scope()
        n = 40

        def write(i: int) -> str:
            with httpx.Client(base_url=plain.url, timeout=30) as c:
                stored = store(c, scope, f"Concurrent fact number {i} about sailing.", id=f"f{i}")
                search(c, scope, "sailing fact", limit=3)
                return str(stored["id"])

        with ThreadPoolExecutor(8) as pool:
            written = sorted(pool.map(write, range(n)))
        with plain.client() as c:
            exported = sorted(m["id"] for m in export(c, scope)["memories"])
            assert written == exported == sorted(f"f{i}" for i in range(n))
            assert len(search(c, scope, "sailing", limit=100)) == n

    def test_parallel_updates_of_one_id_leave_one_memory(self, plain: Server) -> None:
        scope = new_scope()

        def write(i: int) -> None:
            with httpx.Client(base_url=plain.url, timeout=30) as c:
                store(c, scope, f"Version {i} of the plan.", id="plan")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, range(24)))
        with plain.client() as c:
            memories = export(c, scope)["memories"]
            assert [m["id"] for m in memories] == ["plan"]
