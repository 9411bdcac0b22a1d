"""A snapshot at a position shows the tenant's state as it was then, never the future.

For random histories of ingests, re-ingests and forgets (soft, by id and by
source), the snapshot taken at each acknowledged position is recorded; at the
end every recorded position is asked again and must answer the same lines,
byte for byte. A later forget must not reach back into an earlier snapshot
(it used to close the chunk's ``valid`` span there).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from memstore import Memory
from memstore.journal import Lsn
from memstore.protocol.mapping import episode_id
from memstore.protocol.models import ForgetRequest, IngestRequest
from memstore.protocol.verbs import Verbs

TENANT = "t1"
EPISODES = [str(ULID()) for _ in range(3)]

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("ingest"),
            st.sampled_from(EPISODES),
            st.sampled_from(["a/x", "a/y", "b/z"]),
            st.sampled_from(["alpha text", "# H\nbeta text\n\n# I\ngamma", "delta"]),
        ),
        st.tuples(st.just("forget_id"), st.sampled_from(EPISODES)),
        st.tuples(st.just("forget_source"), st.sampled_from(["a/", "b/", "a/x"])),
    ),
    min_size=1,
    max_size=8,
)


def _lines(verbs: Verbs, at: Lsn) -> list[dict[str, Any]]:
    return [json.loads(line) for line in verbs.snapshot(TENANT, str(at))]


def _run(verbs: Verbs, op: tuple[Any, ...]) -> Lsn:
    if op[0] == "ingest":
        out = verbs.ingest(TENANT, IngestRequest(id=op[1], source=op[2], content=op[3]))
        return Lsn(out["lsn"]["wall_ms"], out["lsn"]["counter"])
    target = {"Id": op[1]} if op[0] == "forget_id" else {"Scope": {"BySource": op[1]}}
    receipt = verbs.forget(TENANT, ForgetRequest.model_validate({"target": target}))
    return Lsn(receipt["audit_lsn"]["wall_ms"], receipt["audit_lsn"]["counter"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_a_snapshot_at_each_position_is_what_it_was_then(history: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder, Memory(Path(folder), embedder=None) as mem:
        verbs = Verbs(mem)
        seen: list[tuple[Lsn, list[dict[str, Any]]]] = []
        for op in history:
            at = _run(verbs, op)
            seen.append((at, _lines(verbs, at)))
        for at, then in seen:
            assert _lines(verbs, at) == then, f"the snapshot at {at} changed"
            for line in then:
                assert line["value"]["bt"]["valid"][1] is None, "a visible version is open then"


def test_a_forget_does_not_reach_back_into_an_earlier_snapshot(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        verbs = Verbs(mem)
        at = _run(verbs, ("ingest", EPISODES[0], "s/1", "the text"))
        before = _lines(verbs, at)
        _run(verbs, ("forget_source", "s/"))
        assert _lines(verbs, at) == before
        assert {line["value"]["bt"]["valid"][1] for line in before} == {None}


def test_a_hard_forget_by_source_erases_what_a_soft_forget_left_on_record(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        verbs = Verbs(mem)
        at = _run(verbs, ("ingest", EPISODES[1], "tmp/1", "erase me later"))
        _run(verbs, ("forget_source", "tmp/"))
        assert len(_lines(verbs, at)) == 2, "a soft forget keeps the past"
        hard = {"target": {"Scope": {"BySource": "tmp/"}}, "hard": True}
        preview = verbs.forget(TENANT, ForgetRequest.model_validate({**hard, "dry_run": True}))
        assert preview["rows_deleted"] == 2, "the soft-deleted episode and chunk are on record"
        token = json.dumps(preview)
        done = verbs.forget(
            TENANT, ForgetRequest.model_validate({**hard, "confirmation_token": token})
        )
        assert done["rows_deleted"] == 2
        assert _lines(verbs, at) == [], "gone from the past too"


def test_a_snapshot_line_is_json_or_nothing(tmp_path: Path) -> None:
    """A ``NaN`` on record (the server used to take it) fails the snapshot, never its JSON."""
    with Memory(tmp_path, embedder=None) as mem:
        verbs = Verbs(mem)
        _run(verbs, ("ingest", EPISODES[0], "s/1", "the text"))
        ep = mem.store.get(episode_id(TENANT, EPISODES[0]))
        assert ep is not None
        mem.store.upsert(ep.model_copy(update={"data": {**ep.data, "metadata": '{"n":NaN}'}}))
        at = mem.journal.head()
        with pytest.raises(ValueError, match="not JSON compliant"):
            list(verbs.snapshot(TENANT, str(at)))


def test_a_position_on_record_is_never_out_of_range(tmp_path: Path) -> None:
    """A server whose wall clock is behind the writer's (a replica with clock skew)
    still serves the snapshot at a position it holds: only a later one is the future."""
    from memstore.journal.hlc import wall_clock_ms
    from memstore.protocol.errors import ProtocolError

    with Memory(tmp_path, embedder="hash") as memory:
        verbs = Verbs(memory, wall_ms=lambda: wall_clock_ms() - 60_000)
        out = verbs.ingest(TENANT, IngestRequest(source="s", content="skewed clocks"))
        at = Lsn(out["lsn"]["wall_ms"], out["lsn"]["counter"])
        assert [line["key"].split(":")[0] for line in _lines(verbs, at)] == ["chunk", "episode"]
        with pytest.raises(ProtocolError) as refused:
            _lines(verbs, Lsn(at.wall_ms + 1, 0))
        assert refused.value.code == "snapshot_out_of_range"
