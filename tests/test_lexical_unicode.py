"""Keyword search on text as agents store and send it: any Unicode form, script or paste.

Each test is a user's expectation: a memory is found by the natural query,
whichever way the text was typed (composed or decomposed accents, pasted
zero-width characters, ...), and a document and a query that differ only in
such a form score alike.
"""

from __future__ import annotations

import json
import unicodedata
import zipfile
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore._lexsnapshot import LexiconSnapshotError, load_lexicon, save_lexicon
from memstore.journal import SqliteJournal
from memstore.journal import base as journal_base
from memstore.journal.sqlite import LEXICON_SUFFIX
from memstore.lexical import Lexicon
from memstore.text import TOKENS_VERSION, words


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _nfd(s: str) -> str:
    return unicodedata.normalize("NFD", s)


def _ranked(store: Store, query: str) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in store.keyword_ranked(query, limit=20)[0]]


# Letters that carry accents in NFC, their marks alone, upper case next to them.
_ACCENTED = st.text(
    alphabet=st.sampled_from([*"aeEBcçÇéÉèñÑüÜåÅœŒ", "\u0301", "\u0308", "\u0327", " ", "-", "1"]),
    max_size=16,
)


@settings(max_examples=500, deadline=None)
@given(_ACCENTED)
def test_composed_and_decomposed_text_make_the_same_words(text: str) -> None:
    assert words(_nfc(text)) == words(_nfd(text))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12))
def test_any_text_makes_the_same_words_in_nfc_and_nfd(text: str) -> None:
    assert words(_nfc(text)) == words(_nfd(text))


@pytest.mark.parametrize("doc_form", [_nfc, _nfd])
@pytest.mark.parametrize("query_form", [_nfc, _nfd])
def test_an_accented_camel_case_word_is_found_in_either_form(
    doc_form: type[str], query_form: type[str]
) -> None:
    # In NFD, "caféBar" holds a combining mark between "e" and "B": the
    # CamelCase boundary was missed there, so the NFD document was one word
    # "cafebar" that "bar" matched only as an inner substring (0.6, not 1.0).
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="config", content=doc_form("set caféBar to on")))
    store.upsert(Item(id="k2", kind="note", title="config", content="set Bar to off"))
    for q in ("bar", "café", "caféBar"):
        ranked = _ranked(store, query_form(q))
        assert ranked and ranked[0][1] == pytest.approx(_ranked(store, _nfc(q))[0][1])
    assert dict(_ranked(store, query_form("bar")))["k1"] == pytest.approx(
        dict(_ranked(store, "bar"))["k2"]
    )


def _saved(tmp_path: Path) -> Path:
    lex = Lexicon()
    lex.index("a", "Payment API", "timeouts after 30s")
    path = tmp_path / "lex.npz"
    save_lexicon(lex, path, generation=1)
    return path


def _rewrite_meta(path: Path, change: dict[str, object], drop: str = "") -> Path:
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes())
        arrays = {k: z[k] for k in z.files if k != "meta"}
    meta.update(change)
    meta.pop(drop, None)
    other = path.with_name("other.npz")
    np.savez(other, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    return other


def test_a_snapshot_of_other_tokenisation_rules_is_refused(tmp_path: Path) -> None:
    # Its words were made by rules a query no longer follows: read as they
    # are, a document's words and a query's would not meet.
    path = _saved(tmp_path)
    assert load_lexicon(path, expect_generation=1).candidates("payment") == {"a"}
    with zipfile.ZipFile(path) as z:
        assert "meta.npy" in z.namelist()
    older = _rewrite_meta(path, {"tokens": TOKENS_VERSION - 1})
    with pytest.raises(LexiconSnapshotError, match="tokenisation"):
        load_lexicon(older)
    unversioned = _rewrite_meta(path, {}, drop="tokens")  # saved before versions were kept
    with pytest.raises(LexiconSnapshotError, match="tokenisation None"):
        load_lexicon(unversioned)


@pytest.mark.parametrize(
    "pasted",
    [
        "re\u200bcon\u200bcili\u200bation",  # zero-width spaces
        "re\u00adcon\u00adcili\u00adation",  # soft hyphens (word processors, web pages)
        "re\u2060con\u200dcili\u200cation",  # word joiner, zero-width joiner and non-joiner
        "\ufeffre\u200econ\u200fciliation",  # a BOM and bidi marks
    ],
)
def test_a_word_pasted_with_invisible_characters_is_the_word(pasted: str) -> None:
    # Before, each invisible character cut the word: "re con cili ation" was
    # found by "reconciliation" neither way round.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="jobs", content=f"the {pasted} job failed"))
    store.upsert(Item(id="k2", kind="note", title="jobs", content="the export job failed"))
    assert words(pasted) == ["reconciliation"]
    assert [h[0] for h in _ranked(store, "reconciliation")] == ["k1"]
    assert _ranked(store, pasted) == _ranked(store, "reconciliation")


def test_an_emoji_variation_selector_is_no_word() -> None:
    # "❤️" is "❤" and U+FE0F (draw as emoji): the selector was a word of its own.
    # A skin tone is no word either: "👍🏽" is found by "👍".
    expected = ["i", "❤", "it", "👍", "and", "👨", "👩", "👧"]
    assert words("I ❤️ it, 👍🏽 and 👨\u200d👩\u200d👧") == expected
    assert words("❤️") == words("❤")


_CJK_SENTENCES = {
    "zh-db": "今天的会议讨论了数据库迁移方案，我们决定下周开始执行。",
    "zh-ml": "我喜欢用Python编程和机器学习",
    "ja-tower": "東京タワーに行きました、とても楽しかったです。",
    "ja-weather": "明日の天気は雨らしい",
}


def _cjk_store() -> Store:
    store = Store()
    for id, text in _CJK_SENTENCES.items():
        store.upsert(Item(id=id, kind="note", title="", content=text))
    store.upsert(Item(id="en", kind="note", title="", content="database migration plan"))
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("数据库迁移", "zh-db"),  # a phrase from the sentence
        ("数据库的迁移", "zh-db"),  # the same words, another particle between them
        ("迁移方案是什么", "zh-db"),  # a question around a phrase ("what is the plan")
        ("什么是机器学习", "zh-ml"),
        ("Python编程", "zh-ml"),
        ("東京タワー", "ja-tower"),
        ("タワー", "ja-tower"),  # the long-vowel mark belongs to the word
        ("明日の天気", "ja-weather"),
        ("天気", "ja-weather"),
        ("机", "zh-ml"),  # one ideograph
    ],
)
def test_a_chinese_or_japanese_sentence_is_found_by_a_phrase_in_it(
    query: str, expected: str
) -> None:
    # A CJK run was one word: a query that was not a substring of that run (a
    # question around the phrase, a particle between its words) found nothing.
    assert [h[0] for h in _ranked(_cjk_store(), query)][:1] == [expected]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(_CJK_SENTENCES)), st.data())
def test_any_stretch_of_a_cjk_sentence_finds_it(id: str, data: st.DataObject) -> None:
    text = _CJK_SENTENCES[id]
    start = data.draw(st.integers(0, len(text) - 2))
    stretch = text[start : data.draw(st.integers(start + 2, len(text)))]
    if not words(stretch):
        return  # punctuation alone
    ranked = dict(_ranked(_STORE, stretch))
    assert id in ranked and ranked[id] == max(ranked.values())  # found, nothing above it


_STORE = _cjk_store()


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Büro in der Hauptstraße", "hauptstrasse"),  # ß is ss
        ("Büro in der HAUPTSTRASSE", "Hauptstraße"),
        ("Der Fuß ist verletzt", "fuss"),  # short: no one-edit or fuzzy rescue
        ("Maße prüfen", "MASSE"),
        ("ΟΔΥΣΣΕΥΣ", "οδυσσευς"),  # Greek final sigma against the capital
        ("İstanbul ofisi", "istanbul"),  # Turkish dotted capital I
    ],
)
def test_case_folds_beyond_ascii(stored: str, query: str) -> None:
    # "fuß" and "fuss" were two edits apart (ß for s, one s more): not found.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=stored))
    store.upsert(Item(id="k2", kind="note", title="", content="unrelated note"))
    assert [h[0] for h in _ranked(store, query)] == ["k1"]
    assert set(words(query)) <= set(words(stored))


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("مَرْحَبًا بِالْعَالَمِ", "مرحبا"),  # Arabic vowel points (harakat)
        ("مرحبا بالعالم", "مَرْحَبًا"),  # the other way round
        ("مـــرحبا", "مرحبا"),  # tatweel (kashida) stretching a word
        ("أحمد وصل", "احمد"),  # hamza on the alef
        ("שָׁלוֹם עוֹלָם", "שלום"),  # Hebrew points (niqqud)
        ("Οδυσσεύς", "οδυσσευς"),  # Greek tonos
        ("ΟΔΥΣΣΕΥΣ", "Οδυσσεύς"),
    ],
)
def test_vowel_points_and_greek_accents_fold_as_latin_accents_do(stored: str, query: str) -> None:
    # Text with and without points was several edits apart: not found.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=stored))
    store.upsert(Item(id="k2", kind="note", title="", content="unrelated note"))
    assert [h[0] for h in _ranked(store, query)] == ["k1"]
    assert set(words(query)) <= set(words(stored))


def test_marks_that_spell_stay() -> None:
    # Devanagari vowel signs and the Cyrillic breve are letters' parts, not accents.
    assert words("हिन्दी") == ["हिन्दी"] and words("हिन्दी") != words("हनद")
    assert words("Йошкар") == ["йошкар"]


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Upgraded postgres to v14.2.1 yesterday", "14.2.1"),
        ("Upgraded postgres to v14.2.1 yesterday", "postgres 14.2.1"),
        ("Upgraded postgres to version 14.2.1", "v14.2.1"),
        ("Use python3.11 for the worker", "python 3.11"),
        ("Use python3.11 for the worker", "3.11"),
        ("Use Python 3.11 for the worker", "python3.11"),
        ("ｖ１４.２.１ in full width", "v14.2.1"),
    ],
)
def test_a_version_after_letters_is_found_by_the_number(stored: str, query: str) -> None:
    # "v14.2.1" was the words "v14" and "2.1": "14.2.1" and "3.11" found nothing.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=stored))
    store.upsert(Item(id="k2", kind="note", title="", content="postgres 13 python 2.7 notes"))
    assert [h[0] for h in _ranked(store, query)][:1] == ["k1"]
    assert words(query)[-1] in words(stored)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZv0.1:9 _-", max_size=20))
def test_ascii_and_unicode_paths_split_alike(text: str) -> None:
    # The ASCII fast path and the Unicode path must find the same words.
    assert [*words(text), "e"] == words(text + " é")


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Invoice ٤٥٦٧ was paid", "4567"),  # Arabic-Indic
        ("Invoice 4567 was paid", "٤٥٦٧"),
        ("Invoice ۴۵۶۷ was paid", "4567"),  # Extended Arabic-Indic (Persian, Urdu)
        ("बिल ४५६७ का भुगतान", "4567"),  # Devanagari
        ("請求書 ４５６７ 支払済", "4567"),  # full width
        ("Invoice 4567 was paid", "invoice #４５６７"),
    ],
)
def test_digits_of_any_script_are_one_number(stored: str, query: str) -> None:
    # "٤٥٦٧" stayed Arabic-Indic: "4567" (four edits away) did not find it.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=stored))
    store.upsert(Item(id="k2", kind="note", title="", content="invoice 1234 unrelated"))
    assert [h[0] for h in _ranked(store, query)][:1] == ["k1"]
    assert "4567" in words(stored)


_RESTORE_TEXTS = [
    "今天的会议讨论了数据库迁移方案",
    "東京タワーに行きました",
    "مَرْحَبًا بِالْعَالَمِ",
    "Büro in der Hauptstraße",
    "re\u200bconciliation job for invoice ٤٥٦٧",
    _nfd("caféBar upgraded to v14.2.1"),
]
_RESTORE_QUERIES = [
    *("数据库迁移", "タワー", "مرحبا", "strasse", "reconciliation 4567", "bar", "14.2.1")
]


def _journal_store(path: Path) -> tuple[SqliteJournal, Store]:
    journal, store = SqliteJournal(path), Store()
    journal.attach(store)
    return journal, store


def _answers(store: Store) -> list[list[tuple[str, float]]]:
    return [_ranked(store, q) for q in _RESTORE_QUERIES]


def test_a_reopened_store_finds_what_it_found_and_follows_updates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(journal_base, "LEXICON_SNAPSHOT_MIN_ITEMS", 30)
    path = tmp_path / "journal.db"
    journal, store = _journal_store(path)
    with store.batch():
        for i in range(36):
            store.upsert(Item(id=f"n{i}", kind="note", title="", content=_RESTORE_TEXTS[i % 6]))
    before = _answers(store)
    assert all(before), before
    journal.close()
    saved = Path(f"{path}{LEXICON_SUFFIX}")
    assert saved.exists()
    journal, store = _journal_store(path)  # loads the saved index
    try:
        assert _answers(store) == before
        store.upsert(Item(id="n0", kind="note", title="", content="ＰＬＡＮ Ｂ for the 数据库"))
        store.delete("n6")
        hits = _ranked(store, "数据库迁移")  # n0 now holds two of its four pairs, n6 is gone
        assert {h[0] for h in hits[:4]} == {"n12", "n18", "n24", "n30"}
        assert hits[4][0] == "n0" and hits[4][1] < hits[3][1] and len(hits) == 5
        assert [h[0] for h in _ranked(store, "plan b")][:1] == ["n0"]
    finally:
        journal.close()
    # A saved index of other tokenisation rules is not used: the items are
    # tokenised again, and answer as a store that never had the file.
    with np.load(saved) as z:
        meta = json.loads(z["meta"].tobytes())
        arrays = {k: z[k] for k in z.files if k != "meta"}
    meta["tokens"] = TOKENS_VERSION - 1
    with open(saved, "wb") as f:
        np.savez(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    caplog.set_level("INFO")
    journal, store = _journal_store(path)
    try:
        assert "tokenisation" in caplog.text
        store._check()
        after = _answers(store)
    finally:
        journal.close()
    saved.unlink()
    journal, store = _journal_store(path)
    try:
        assert after == _answers(store)
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Toplantı: ısıtma sistemi arızalı", "isitma"),  # Turkish dotless i
        ("ISITMA sistemi", "ısıtma"),
        ("Smørrebrød på menuen", "smorrebrod"),  # two letters: no one-edit rescue
        ("Spotkanie w Łodzi", "lodzi"),
        ("Cœur de la mission", "coeur"),
        ("Þórsmörk trip", "thorsmork"),
    ],
)
def test_latin_letters_without_decomposition_fold_as_accents_do(stored: str, query: str) -> None:
    # "ısıtma" is two letters from "isitma" and "smørrebrød" two from
    # "smorrebrod": a user typing without those keys found nothing.
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=stored))
    store.upsert(Item(id="k2", kind="note", title="", content="unrelated note"))
    assert [h[0] for h in _ranked(store, query)] == ["k1"]
    assert set(words(query)) <= set(words(stored))


_MIXED = st.text(
    alphabet=st.sampled_from(
        [*"aeEBcéÉñüÅœ", "\u0301", "\u0308", *"机器学习数据", *"タワー", *"مَرحبا", *"٣4ßı"]
    ),
    max_size=14,
).map(lambda s: s.replace("4", " \u200b"))  # spaces and zero-width spaces too


@settings(max_examples=150, deadline=None)
@given(_MIXED, _MIXED)
def test_a_document_and_a_query_score_alike_in_any_form(doc: str, query: str) -> None:
    # The same text stored in NFC and in NFD, shared and private: every form of
    # the query finds the copies with one score (the index and the brute-force
    # scan of private items follow the same rules). Ids are words too: these
    # share no letter with the alphabet.
    store = Store()
    store.upsert(Item(id="zzk", kind="note", title="t", content=_nfc(doc)))
    store.upsert(Item(id="zzj", kind="note", title="t", content=_nfd(doc)))
    store.upsert(
        Item(id="zzq", kind="note", title="t", content=doc, scope="private", tags=["user:u1"])
    )
    for q in (_nfc(query), _nfd(query)):
        shared = dict(_ranked(store, q))
        assert shared.get("zzk") == shared.get("zzj")
        mine = {it.id for it in store.keyword_search_for_user("u1", q, limit=5)}
        assert ("zzq" in mine) == ("zzk" in shared)


def test_a_digit_newer_than_pythons_unicode_tables_is_kept() -> None:
    # The regex module's tables (Unicode 16) know the Sunuwar digits, Python
    # 3.11's unicodedata (Unicode 14) does not: folding them raised ValueError
    # ("not a decimal") from every write and query that held one.
    sunuwar_one = "\U00011bf1"
    # Kept as it is (or read as "1" where Python knows it), next to a folded "٣".
    assert words(f"item {sunuwar_one}٣") in (["item", f"{sunuwar_one}3"], ["item", "13"])
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content=f"ticket {sunuwar_one} open"))
    assert [h[0] for h in _ranked(store, f"ticket {sunuwar_one}")] == ["k1"]


def test_vowel_points_on_a_tatweel_go_with_it() -> None:
    # A tatweel may carry the vowel points ("مـَرحبا"), and NFKD makes one of
    # some ligatures ("ﳲ" is a tatweel, a fatha and a shadda): the tatweel was
    # dropped before the points were, which left them as a word of their own,
    # and a second normalisation read the text differently from the first.
    assert words("مـَرحبا") == words("مرحبا") == ["مرحبا"]
    assert words("\ufcf2") == []
    for text in ("\ufcf2", "مـَرحبا", "a\u0640\u064e\u0651b"):
        once = " ".join(words(text))
        assert " ".join(words(once)) == once


_HOSTILE = st.sampled_from(
    [
        *"aZéßĳƀαΣςЖक编ئ1٣ ıøŒ机器学习タワーー가.:vV",
        *("\U0001f600", "\u05b8", "\u0640", "\ufcf2", "\u0301", "\u0308", "\u0363"),
        *("\u093f", "\u0670", "\u200b", "\u00ad", "\ufe0f"),
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(alphabet=_HOSTILE, max_size=15), st.text(max_size=15)))
def test_normalised_text_normalises_to_itself(text: str) -> None:
    # A query is normalised text as often as raw text (a client may normalise
    # first): both must make the same words. Characters Python's own tables do
    # not know yet (the regex module's are newer) are left out.
    if any(unicodedata.category(c) == "Cn" for c in text):
        return
    once = " ".join(words(text))
    assert " ".join(words(once)) == once
    assert words(_nfc(text)) == words(_nfd(text))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("서울", "ko-seoul"),
        ("서울은", "ko-seoul"),  # another particle: "서울에서" was no match for it
        ("서울에서 회의", "ko-seoul"),
        ("프로그래밍", "ko-code"),  # inside a sentence written without spaces
        ("프로그래밍을 좋아해", "ko-code"),
    ],
)
def test_a_korean_memory_is_found_whatever_particle_the_query_uses(
    query: str, expected: str
) -> None:
    store = Store()
    store.upsert(Item(id="ko-seoul", kind="note", title="", content="서울에서 회의가 있었습니다"))
    store.upsert(Item(id="ko-code", kind="note", title="", content="나는프로그래밍을좋아한다"))
    store.upsert(Item(id="ko-other", kind="note", title="", content="부산 날씨가 좋다"))
    assert [h[0] for h in _ranked(store, query)][:1] == [expected]


def test_a_flag_is_a_word_as_an_emoji_is() -> None:
    # A flag is two regional indicators, no pictograph: it was no word at all,
    # so "🇯🇵" was an empty query and the trip below could not be found by it.
    assert words("Trip to 🇯🇵🇰🇷 in May") == ["trip", "to", "🇯🇵", "🇰🇷", "in", "may"]
    store = Store()
    store.upsert(Item(id="k1", kind="note", title="", content="Trip to 🇯🇵 in May"))
    store.upsert(Item(id="k2", kind="note", title="", content="Trip to 🇫🇷 in June"))
    assert [h[0] for h in _ranked(store, "🇯🇵")] == ["k1"]


_WORD_RULE = regex.compile(
    r"\p{Extended_Pictographic}|\p{Regional_Indicator}{2}|\p{N}+(?:[.:]\p{N}+)+"
    r"|(?:[\p{L}\p{M}]|\p{N}++(?![.:]\p{N}))+"
)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ab01.: é٣\u0301😀🇯🇵", max_size=18))
def test_the_unrolled_word_pattern_is_the_word_rule(text: str) -> None:
    # words() uses an unrolled form of the rule (half the cost): same words.
    from memstore.text import _WORD

    assert _WORD.findall(text) == _WORD_RULE.findall(text)
