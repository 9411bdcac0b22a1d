"""Restarts: memories and personality are durable; vectors of another model fail closed."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from tests.fake_provider import FakeProvider
from tests.mindlayer.conftest import export, new_scope, provider_env, refused, search, start, store
from tests.pgtest import PgPlace


class TestDurableMemory:
    def test_memories_and_personality_survive_a_restart(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        scope = new_scope()
        server = start(data)
        with server.client() as c:
            first = store(c, scope, "The user is vegetarian.", id="diet", session="s1")
            store(c, scope, "The user lives in Lisbon.", id="home")
            c.put("/v1/personality", json={"scope": scope, "personality": "Be warm."})
            c.request("DELETE", "/v1/memories", params={**scope, "id": "home"})
            before = export(c, scope)
        assert server.stop() == 0
        again = start(data)
        try:
            with again.client() as c:
                assert export(c, scope) == before
                assert before["memories"][0] == {**first, "vector": None, "embedding_model": None}
                assert search(c, scope, "vegetarian")[0]["memory"] == first
                ctx = c.post("/v1/context", json={"scope": scope, "query": "vegetarian"}).json()
                assert ctx["personality"] == "Be warm." and ctx["ids"] == ["diet"]
                assert search(c, scope, "Lisbon") == []
        finally:
            assert again.stop() == 0


class TestPostgresJournal:
    def test_the_journal_lives_in_the_schema_named(self, tmp_path: Path, pg_place: PgPlace) -> None:
        """``--journal-schema`` is honoured: two servers on it share memories, in that schema."""
        flags = ("--journal", pg_place.dsn, "--journal-schema", pg_place.schema)
        scope = new_scope()
        server = start(tmp_path / "a", *flags)
        try:
            with server.client() as c:
                first = store(c, scope, "The user is vegetarian.", id="diet")
        finally:
            assert server.stop() == 0
        rows = pg_place.sql("SELECT count(*) FROM {s}.versions")
        assert rows[0][0] >= 1  # the write is in the schema asked for, not in the default one
        other = start(tmp_path / "b", *flags)  # another folder: the memory is the journal's
        try:
            with other.client() as c:
                assert export(c, scope)["memories"] == [
                    {**first, "vector": None, "embedding_model": None}
                ]
        finally:
            assert other.stop() == 0

    def test_two_servers_deleting_one_memory_answer_200_once(
        self, tmp_path: Path, pg_place: PgPlace
    ) -> None:
        """Each memory deleted at once through both servers: one 200, one 404, never two 200s."""
        flags = ("--journal", pg_place.dsn, "--journal-schema", pg_place.schema)
        scope = new_scope()
        ids = [f"m{n}" for n in range(10)]
        servers = [start(tmp_path / "a", *flags), start(tmp_path / "b", *flags)]
        try:
            clients = [s.client() for s in servers]
            for id in ids:
                store(clients[0], scope, f"The user likes {id}.", id=id)
            while len(export(clients[1], scope)["memories"]) < len(ids):
                time.sleep(0.01)  # the second server follows the first one's writes
            barrier = threading.Barrier(2)
            statuses: dict[int, list[int]] = {0: [], 1: []}

            def delete_all(n: int) -> None:
                for id in ids:
                    barrier.wait(30)
                    r = clients[n].request("DELETE", "/v1/memories", params={**scope, "id": id})
                    statuses[n].append(r.status_code)

            threads = [threading.Thread(target=delete_all, args=(n,)) for n in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            answers = list(zip(statuses[0], statuses[1], strict=True))
            assert len(answers) == len(ids)
            assert all(sorted(pair) == [200, 404] for pair in answers), answers
            for c in clients:
                assert export(c, scope)["memories"] == []
                c.close()
        finally:
            for s in servers:
                assert s.stop() == 0

    def test_a_delete_on_one_server_sees_what_the_other_acknowledged(
        self, tmp_path: Path, pg_place: PgPlace
    ) -> None:
        """A delete sent after another server acknowledged a write deletes that write too.

        Each server's store follows the others' writes a few milliseconds late.
        ``DELETE /v1/scope`` on the second server right after the first one
        answered 200 for a memory counted and deleted only what the second had
        applied, leaving that memory; ``DELETE /v1/memories`` of it was a 404
        while it was live; clearing a personality just set left it set. A
        delete now applies every write on record before it reads.
        """
        flags = ("--journal", pg_place.dsn, "--journal-schema", pg_place.schema)
        servers = [start(tmp_path / "a", *flags), start(tmp_path / "b", *flags)]
        try:
            with servers[0].client() as writer, servers[1].client() as deleter:
                for _ in range(8):
                    self._write_there_delete_here(writer, deleter, new_scope())
        finally:
            for s in servers:
                assert s.stop() == 0

    @staticmethod
    def _write_there_delete_here(
        writer: httpx.Client, deleter: httpx.Client, scope: dict[str, str]
    ) -> None:
        for n in range(5):
            store(writer, scope, f"The user likes fruit number {n}.", id=f"m{n}")
        gone = deleter.request("DELETE", "/v1/memories", params={**scope, "id": "m4"})
        assert gone.status_code == 200, gone.text
        r = writer.put("/v1/personality", json={"scope": scope, "personality": "Be brief."})
        assert r.status_code == 200, r.text
        r = deleter.put("/v1/personality", json={"scope": scope, "personality": ""})
        assert r.status_code == 200, r.text
        store(writer, scope, "The user likes one more fruit.", id="m5")
        r = deleter.request("DELETE", "/v1/scope", params=scope)
        assert r.json() == {"deleted": 5}, r.text  # m0-m3 and m5
        # A mark written after the deletes: once the writer holds it, it holds them too.
        mark = store(deleter, scope, "A mark written after the deletes.", id="mark")
        while "mark" not in [m["id"] for m in export(writer, scope)["memories"]]:
            time.sleep(0.01)
        for c in (writer, deleter):
            assert export(c, scope) == {
                "personality": "",
                "memories": [{**mark, "vector": None, "embedding_model": None}],
            }

    def test_a_schema_without_a_postgres_journal_is_refused(self, tmp_path: Path) -> None:
        code, out = refused(tmp_path / "data", "--journal-schema", "agents")
        assert code == 2 and "--journal-schema needs --journal postgresql://" in out


class TestModelMismatchFailsClosed:
    def test_vectors_of_another_model_are_refused(self, tmp_path: Path, fake: FakeProvider) -> None:
        data = tmp_path / "data"
        scope = new_scope()
        server = start(data, env=provider_env(fake, embedding="model-a"), embedder=None)
        with server.client() as c:
            store(c, scope, "The user is vegetarian.", id="diet")
        assert server.stop() == 0
        code, out = refused(data, env=provider_env(fake, embedding="model-b"))
        # exit 1 (the memory cannot be opened so now), as memstore serve, memstore mcp and
        # every data command answer vectors of another model; it was 2, a usage error
        assert code == 1, out
        assert f"model-a@{fake.base_url}" in out and f"model-b@{fake.base_url}" in out
        assert "reembed" in out and "MEMSTORE_PROVIDER_EMBEDDING_MODEL" in out
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
        # Without an embedding model the vectors are not used: lexical works,
        # semantic and hybrid are refused rather than answered from nothing.
        offline = start(data)
        try:
            with offline.client() as c:
                assert search(c, scope, "vegetarian")[0]["memory"]["id"] == "diet"
                r = c.post("/v1/search", json={"scope": scope, "query": "x", "mode": "semantic"})
                assert r.status_code == 400
        finally:
            assert offline.stop() == 0
        back = start(data, env=provider_env(fake, embedding="model-a"), embedder=None)
        try:
            with back.client() as c:
                hits = search(c, scope, "The user is vegetarian.", mode="semantic")
                assert [h["memory"]["id"] for h in hits] == ["diet"]
        finally:
            assert back.stop() == 0


def test_a_provider_or_journal_down_at_start_up_exits_1(tmp_path: Path) -> None:
    # What the command line calls "cannot be done now" (exit 1, one line), as memstore serve
    # and memstore mcp answer a journal that does not answer; both were exit 2, a usage error.
    with socket.socket() as closed:  # bound, never listening: nothing answers there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        down = {
            "MEMSTORE_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "MEMSTORE_PROVIDER_EMBEDDING_MODEL": "e",
        }
        code, out = refused(tmp_path / "a", env=down)
        assert code == 1 and "embedding request to 127.0.0.1 failed" in out, out
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
        journal = f"postgresql://postgres@127.0.0.1:{port}/test?connect_timeout=5"
        code, out = refused(tmp_path / "b", "--journal", journal)
        assert code == 1 and "cannot connect to PostgreSQL" in out, out
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
