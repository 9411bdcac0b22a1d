"""Owner token, loopback defaults, browser isolation and input validation, over real HTTP."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mindlayer.conftest import Server, export, new_scope, refused, start, store

TOKEN = "owner-token-" + "x" * 40


def token_file(folder: Path, token: str, mode: int = 0o600) -> Path:
    path = folder / "owner-token"
    path.write_text(token + "\n")
    os.chmod(path, mode)
    return path


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("guarded")
    server = start(folder / "data", "--owner-token-file", str(token_file(folder, TOKEN)))
    yield server
    assert server.stop() == 0, server.log_text()


class TestHTTPAuthenticationAndBrowserIsolation:
    def test_owner_token_is_required(self, guarded: Server) -> None:
        scope = new_scope()
        body = {"scope": scope, "text": "The user likes tea."}
        with guarded.client() as anon, guarded.client("wrong-" + TOKEN) as wrong:
            for c in (anon, wrong):
                r = c.post("/v1/memories", json=body)
                assert r.status_code == 401, r.text
                assert r.headers["www-authenticate"] == "Bearer"
                assert c.get("/v1/export", params=scope).status_code == 401
            assert anon.get("/healthz").status_code == 200  # liveness needs no token
        # The start-up line names the Host names served in words, not a repr.
        assert "answers Host 127.0.0.1, localhost, [::1])" in guarded.log_text()
        with guarded.client(TOKEN) as c:
            store(c, scope, "The user likes tea.")
            assert len(export(c, scope)["memories"]) == 1
        with guarded.client() as c:
            twice = [("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer other")]
            r = c.get("/v1/export", params=scope, headers=httpx.Headers(twice))
            assert r.status_code == 400  # two Authorization headers: refused, not guessed

    def test_token_file_changes_apply_without_restart(self, tmp_path: Path) -> None:
        path = token_file(tmp_path, TOKEN)
        server = start(tmp_path / "data", "--owner-token-file", str(path))
        try:
            scope = new_scope()
            with server.client(TOKEN) as old:
                assert old.get("/v1/export", params=scope).status_code == 200
                path.write_text("rotated-" + TOKEN + "\n")
                assert old.get("/v1/export", params=scope).status_code == 401
            with server.client("rotated-" + TOKEN) as new:
                assert new.get("/v1/export", params=scope).status_code == 200
        finally:
            assert server.stop() == 0

    def test_browser_origins_and_foreign_hosts_are_refused(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            for headers in (
                {"Origin": "https://evil.example"},
                {"Origin": "http://127.0.0.1:1"},  # another local page
                {"Origin": "null"},
                {"Host": "evil.example"},  # DNS rebinding
                {"Host": "127.0.0.1.evil.example"},
            ):
                r = c.post("/v1/memories", json={"scope": scope, "text": "x"}, headers=headers)
                assert r.status_code == 403, headers
                assert r.json()["error"] in ("forbidden_origin", "forbidden_host")
                assert "access-control-allow-origin" not in r.headers
            preflight = c.options(
                "/v1/memories",
                headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
            )
            assert preflight.status_code == 403
            assert export(c, scope)["memories"] == []

    def test_public_bind_needs_a_long_token(self, tmp_path: Path) -> None:
        code, out = refused(tmp_path / "a", host="0.0.0.0")
        assert code == 2 and "--owner-token-file" in out
        short = token_file(tmp_path, "short-token")
        code, out = refused(tmp_path / "b", "--owner-token-file", str(short), host="0.0.0.0")
        assert code == 2 and "at least 32 characters" in out
        assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()

    def test_the_seeds_token_variable_is_the_owner_token(self, tmp_path: Path) -> None:
        """``MIND_LAYER_TOKEN`` (seed 002's way to give it) is required as the owner token."""
        env = {"MIND_LAYER_TOKEN": TOKEN}
        server = start(tmp_path / "data", env=env)
        try:
            with server.client() as anon:
                assert anon.get("/v1/export", params=new_scope()).status_code == 401
            with server.client("wrong-" + TOKEN) as wrong:
                assert wrong.get("/v1/export", params=new_scope()).status_code == 401
            with server.client(TOKEN) as owner:
                assert owner.get("/v1/export", params=new_scope()).status_code == 200
        finally:
            assert server.stop() == 0
        assert TOKEN not in server.log_text()
        # The same rules as a token file's: one line of printable ASCII, and 32+
        # characters on a public bind (here refused before anything opens).
        code, out = refused(tmp_path / "d2", env={"MIND_LAYER_TOKEN": "two words"})
        assert code == 2 and "MIND_LAYER_TOKEN" in out and "printable ASCII" in out
        code, out = refused(tmp_path / "d3", env={"MIND_LAYER_TOKEN": "short"}, host="0.0.0.0")
        assert code == 2 and "at least 32 characters" in out and "short" not in out
        assert not (tmp_path / "d2").exists() and not (tmp_path / "d3").exists()

    def test_a_token_file_and_the_variable_together_are_refused(self, tmp_path: Path) -> None:
        env = {"MIND_LAYER_TOKEN": TOKEN}
        file = str(token_file(tmp_path, TOKEN))
        code, out = refused(tmp_path / "data", "--owner-token-file", file, env=env)
        assert code == 2 and "give one" in out and TOKEN not in out

    def test_token_file_readable_by_others_is_refused(self, tmp_path: Path) -> None:
        loose = token_file(tmp_path, TOKEN, mode=0o644)
        code, out = refused(tmp_path / "data", "--owner-token-file", str(loose))
        assert code == 2 and "chmod 600" in out
        empty = tmp_path / "empty"
        empty.write_text("\n")
        os.chmod(empty, 0o600)
        code, out = refused(tmp_path / "data", "--owner-token-file", str(empty))
        assert code == 2 and "one line of printable ASCII" in out

    def test_public_bind_with_a_long_token_serves(self, tmp_path: Path) -> None:
        server = start(
            tmp_path / "data",
            "--owner-token-file",
            str(token_file(tmp_path, TOKEN)),
            host="0.0.0.0",
        )
        try:
            with server.client() as anon, server.client(TOKEN) as c:
                assert anon.get("/v1/export", params=new_scope()).status_code == 401
                assert c.get("/v1/export", params=new_scope()).status_code == 200
        finally:
            assert server.stop() == 0

    def test_a_rotated_token_obeys_the_start_up_rules(self, tmp_path: Path) -> None:
        """The token file is re-read when it changes, under the rules start-up applies: on
        a public bind, a token too short, or a file others may read, is not taken (the
        last good token keeps serving, the log says why); a good rotation applies."""
        path = token_file(tmp_path, TOKEN)
        server = start(tmp_path / "data", "--owner-token-file", str(path), host="0.0.0.0")
        scope = new_scope()
        try:
            with server.client(TOKEN) as old, server.client("short") as short:
                path.write_text("short\n")
                assert short.get("/v1/export", params=scope).status_code == 401
                assert old.get("/v1/export", params=scope).status_code == 200
            loose = "loose-" + TOKEN
            with server.client(TOKEN) as old, server.client(loose) as other:
                path.write_text(loose + "\n")
                os.chmod(path, 0o644)
                assert other.get("/v1/export", params=scope).status_code == 401
                assert old.get("/v1/export", params=scope).status_code == 200
            rotated = "rotated-" + TOKEN
            with server.client(TOKEN) as old, server.client(rotated) as new:
                path.write_text(rotated + "\n")
                os.chmod(path, 0o600)
                assert new.get("/v1/export", params=scope).status_code == 200
                assert old.get("/v1/export", params=scope).status_code == 401
            log = server.log_text()
            assert "at least 32 characters" in log and "chmod 600" in log
            assert "short" not in log.replace("too short", "")  # the token is never quoted
        finally:
            assert server.stop() == 0


def _post(c: httpx.Client, path: str, body: Any, **kw: Any) -> httpx.Response:
    return c.post(path, json=body, **kw)


class TestHTTPRejectsInvalidInput:
    def refused_400(self, r: httpx.Response, words: str) -> None:
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "invalid_request"
        assert words in r.json()["message"], r.json()["message"]

    def test_bad_fields_are_refused_and_store_nothing(self, plain: Server) -> None:
        scope = new_scope()
        ok = {"scope": scope, "text": "The user likes tea."}
        cases: list[tuple[dict[str, Any], str]] = [
            ({**ok, "scope": {"agent": "a/b", "user": "u"}}, "scope.agent"),
            ({**ok, "scope": {"agent": "", "user": "u"}}, "scope.agent"),
            ({**ok, "scope": {"agent": "a" * 129, "user": "u"}}, "scope.agent"),
            ({**ok, "scope": {"agent": "a", "user": "ü"}}, "scope.user"),
            ({**ok, "scope": {"agent": "a"}}, "scope.user: is required"),
            ({**ok, "id": "has space"}, "id"),
            ({**ok, "id": "x" * 129}, "id"),
            ({**ok, "text": "   "}, "text: must not be empty"),
            ({**ok, "text": "é" * 4097}, "at most 8192"),
            ({**ok, "session": "s" * 129}, "session"),
            ({**ok, "colour": "blue"}, "colour: unknown field"),
            ({**ok, "text": 5}, "text"),
            ({"text": "no scope"}, "scope: is required"),
        ]
        with plain.client() as c:
            for body, words in cases:
                self.refused_400(_post(c, "/v1/memories", body), words)
            assert _post(c, "/v1/memories", {**ok, "text": "é" * 4096}).status_code == 200
            assert _post(c, "/v1/memories", {**ok, "session": "s" * 128}).status_code == 200
            assert len(export(c, scope)["memories"]) == 2

    def test_bad_search_fields(self, plain: Server) -> None:
        scope = new_scope()
        base = {"scope": scope, "query": "tea"}
        with plain.client() as c:
            for path in ("/v1/search", "/v1/context", "/v1/chat"):
                self.refused_400(_post(c, path, {**base, "limit": 0}), "limit")
                self.refused_400(_post(c, path, {**base, "limit": 101}), "limit")
                self.refused_400(_post(c, path, {**base, "limit": "5"}), "limit")
                self.refused_400(_post(c, path, {**base, "limit": True}), "limit")
                self.refused_400(_post(c, path, {**base, "mode": "fuzzy"}), "mode")
                self.refused_400(_post(c, path, {**base, "query": ""}), "query")
                self.refused_400(_post(c, path, {**base, "query": "q" * 8193}), "query")
            self.refused_400(_post(c, "/v1/search", {**base, "max_chars": 10}), "unknown field")
            # an unknown key is named, not echoed whole: not a megabyte, not a terminal escape
            for key in ("k" * 500_000, "\x1b[2Jcolour"):
                r = _post(c, "/v1/search", {**base, key: 1})
                self.refused_400(r, "unknown field")
                assert len(r.content) < 500 and "\x1b" not in r.json()["message"], r.text[:200]
            too_long = {"scope": scope, "personality": "p" * 8193}
            r = c.put("/v1/personality", json=too_long)
            self.refused_400(r, "personality")

    def test_bodies_that_are_not_one_json_object(self, plain: Server) -> None:
        scope = new_scope()
        good = json.dumps({"scope": scope, "text": "The user likes tea."})
        json_type = {"Content-Type": "application/json"}
        with plain.client() as c:
            for raw, words in (
                (good + " {}", "Extra data"),
                (good + "x", "Extra data"),
                ("{", "not one JSON value"),
                ("[1, 2]", "JSON object"),
                ('{"scope": {"agent": "a", "user": "u"}, "text": NaN}', "NaN"),
                (good[:-1] + ', "text": "again"}', "the key 'text' is named twice in one object"),
                ("[" * 40 + "]" * 40, "levels deep"),
            ):
                r = c.post("/v1/memories", content=raw.encode(), headers=json_type)
                self.refused_400(r, words)
            r = c.post("/v1/memories", content=b'{"text": "\xff"}', headers=json_type)
            self.refused_400(r, "UTF-8")
            for headers in ({"Content-Type": "text/plain"}, {}):
                r = c.post("/v1/memories", content=good.encode(), headers=headers)
                self.refused_400(r, "Content-Type: application/json")
            big = json.dumps({"scope": scope, "text": "x" * (1024 * 1024)})
            r = c.post("/v1/memories", content=big.encode(), headers=json_type)
            assert r.status_code == 413 and r.json()["error"] == "payload_too_large", r.text
            assert export(c, scope)["memories"] == []

    def test_a_coded_body_is_refused_not_read_as_text_it_is_not(self, plain: Server) -> None:
        """Before: a gzip body was 400 "the body is not UTF-8 text" (the bytes read as
        text), and plain JSON labelled ``Content-Encoding: br`` was stored as if the
        label were not there. Now both are 400 naming the coding, with
        ``Accept-Encoding: identity``; ``identity`` itself is served."""
        scope = new_scope()
        good = json.dumps({"scope": scope, "text": "The user likes tea."}).encode()
        json_type = {"Content-Type": "application/json"}
        with plain.client() as c:
            for coding, raw in (("gzip", gzip.compress(good)), ("br", good), ("gzip, br", good)):
                r = c.post(
                    "/v1/memories", content=raw, headers={**json_type, "Content-Encoding": coding}
                )
                self.refused_400(r, f"Content-Encoding {coding!r} is not supported")
                assert r.headers["accept-encoding"] == "identity"
            assert export(c, scope)["memories"] == []
            sent = {**json_type, "Content-Encoding": "identity"}
            assert c.post("/v1/memories", content=good, headers=sent).status_code == 200

    def test_a_number_of_too_many_digits_is_named(self, plain: Server) -> None:
        """Before: ``"limit": 999...9`` (5000 digits) was refused with Python's own words,
        ``Exceeds the limit (4300 digits) ... use sys.set_int_max_str_digits()``."""
        scope = new_scope()
        raw = b'{"scope": %s, "query": "tea", "limit": %s}' % (
            json.dumps(scope).encode(),
            b"9" * 5000,
        )
        with plain.client() as c:
            r = c.post("/v1/search", content=raw, headers={"Content-Type": "application/json"})
            self.refused_400(r, "a number of more than 4300 digits")
            assert "sys." not in r.json()["message"]

    def test_lone_surrogates_are_refused_by_field(self, plain: Server) -> None:
        """JSON can escape a lone surrogate (``\\ud800``); UTF-8 cannot hold it: 400, not 500."""
        scope = new_scope()
        json_type = {"Content-Type": "application/json"}
        s = json.dumps(scope)
        with plain.client() as c:
            for path, raw, field in (
                ("/v1/memories", f'{{"scope": {s}, "text": "tea \\ud800"}}', "text"),
                (
                    "/v1/memories",
                    f'{{"scope": {s}, "text": "tea", "id": "t", "session": "\\udc00"}}',
                    "session",
                ),
                ("/v1/search", f'{{"scope": {s}, "query": "\\ud800 tea"}}', "query"),
                ("/v1/context", f'{{"scope": {s}, "query": "\\ud800"}}', "query"),
                ("/v1/ingest", f'{{"scope": {s}, "text": "\\ud800"}}', "text"),
            ):
                r = c.post(path, content=raw.encode(), headers=json_type)
                self.refused_400(r, f"{field}: ")
                assert "surrogate" in r.json()["message"]
            raw = f'{{"scope": {s}, "personality": "be \\ud800"}}'
            r = c.put("/v1/personality", content=raw.encode(), headers=json_type)
            self.refused_400(r, "personality: ")
            assert export(c, scope) == {"personality": "", "memories": []}

    def test_bad_query_strings(self, plain: Server) -> None:
        scope = new_scope()
        with plain.client() as c:
            for params, words in (
                ({"agent": scope["agent"]}, "'user' is required"),
                ({**scope, "agent": "a b"}, "agent must be"),
                ({**scope, "extra": "1"}, "unknown query parameter"),
            ):
                self.refused_400(c.get("/v1/export", params=params), words)
            self.refused_400(c.request("DELETE", "/v1/memories", params=scope), "'id' is required")
            self.refused_400(
                c.request("DELETE", "/v1/memories", params={**scope, "id": "a/b"}), "id must be"
            )
            r = c.get(f"/v1/export?agent={scope['agent']}&agent=x&user=u")
            self.refused_400(r, "appears twice")

    def test_a_body_route_refuses_query_parameters(self, plain: Server) -> None:
        """A POST or PUT reads its body alone: a query parameter is refused, not ignored.

        ``POST /v1/memories?id=diet`` (the id where DELETE takes it) was stored under
        the id derived from its text, and ``?limit=1`` on a search was dropped: a 200
        for a request the API did not read as sent. Refused, it changes nothing.
        """
        scope = new_scope()
        with plain.client() as c:
            for method, path, body in (
                ("POST", "/v1/memories", {"scope": scope, "text": "The user likes tea."}),
                ("POST", "/v1/search", {"scope": scope, "query": "tea"}),
                ("POST", "/v1/context", {"scope": scope, "query": "tea"}),
                ("POST", "/v1/chat", {"scope": scope, "query": "tea"}),
                ("POST", "/v1/ingest", {"scope": scope, "text": "I like tea."}),
                ("PUT", "/v1/personality", {"scope": scope, "personality": "Be brief."}),
            ):
                for query in ("id=diet", "limit=1&limit=2", "agent=other"):
                    r = c.request(method, f"{path}?{query}", json=body)
                    self.refused_400(r, "unknown query parameter")
            assert export(c, scope) == {"personality": "", "memories": []}
            # an empty query string is no parameter
            assert c.post("/v1/search?", json={"scope": scope, "query": "tea"}).status_code == 200
