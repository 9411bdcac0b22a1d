"""Text normalisation and tokens: Unicode-aware, punctuation-proof, stable."""

from __future__ import annotations

import unicodedata

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import memstore.text
from memstore import Item, Store, dedup_tokens, kw_tokens, normalize_query, token_grams
from memstore.text import STOP_WORDS, text_dedup_tokens, word_dedup_tokens, words


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("what is payment-api?", "what is payment api"),
        ("FooBAR", "foo bar"),
        ("HTTPServer", "http server"),
        ("getUserID", "get user id"),
        ("Q3Plan", "q3 plan"),
        ("Café crème brûlée", "cafe creme brulee"),
        ("Ärger über Öl", "arger uber ol"),
        ("Привет, МИР!", "привет мир"),
        ("東京の天気は晴れ", "東京 京の の天 天気 気は は晴 晴れ"),  # CJK: overlapping pairs
        ("Python编程", "python 编程"),
        ("ship it 🚀🚀", "ship it 🚀 🚀"),
        ("नमस्ते दुनिया", "नमस्ते दुनिया"),  # Devanagari marks are letters' parts, kept
        ("  tabs\tand\nnewlines  ", "tabs and newlines"),
        ("timeout=0.3s; retry@9:30", "timeout 0.3 s retry 9:30"),
        ("", ""),
    ],
)
def test_normalize_query(raw: str, normalized: str) -> None:
    assert normalize_query(raw) == normalized


@given(st.text())
def test_normalize_is_idempotent_and_clean(s: str) -> None:
    once = normalize_query(s)
    assert normalize_query(once) == once
    assert once == once.strip()
    assert "  " not in once
    assert once == once.lower() or not once.isascii()


def test_kw_tokens_drop_filler_but_keep_digits_and_ideographs() -> None:
    assert kw_tokens("what is the q3 plan") == ["q3", "plan"]
    assert kw_tokens("a b 3 x") == ["3"]
    assert kw_tokens("天 気") == ["天", "気"]
    assert kw_tokens("deploy deploy again") == ["deploy"]
    # Only filler: everything is kept rather than nothing.
    assert kw_tokens("what is it") == ["what", "is", "it"]
    assert kw_tokens("") == []


def test_dedup_tokens_keep_digit_tokens_and_fold_plurals() -> None:
    item = Item(kind="note", title="Q3 plans", content="the retries and taxes of the UK team")
    assert dedup_tokens(item) == frozenset({"q3", "plan", "retry", "tax", "team"})
    assert "status" in dedup_tokens(Item(kind="note", title="status of analysis"))
    assert {"analysis", "news"} <= dedup_tokens(Item(kind="note", title="analysis news"))


def test_token_grams_are_per_token_trigrams() -> None:
    assert token_grams(["abcd", "ab"]) == [frozenset({"abc", "bcd"}), frozenset({"ab"})]


def test_stop_words_are_normalized_words() -> None:
    assert all(words(w) == [w] for w in STOP_WORDS)


@pytest.mark.parametrize(
    ("title", "query"),
    [
        ("Payment API latency", "what is payment-api?"),
        ("Café opening hours", "cafe hours"),
        ("Встреча с командой", "встреча"),
        ("東京の天気", "天気"),
        ("Release 🚀 checklist", "🚀"),
        ("AuthService token refresh", "auth service"),
        ("timeout is 0.3 seconds", "0.3"),
    ],
)
def test_store_finds_across_scripts_and_punctuation(title: str, query: str) -> None:
    store = Store()
    store.upsert(Item(kind="note", title=title))
    store.upsert(Item(kind="note", title="unrelated filler note"))
    assert [it.title for it in store.keyword_search(query)] == [title]


@settings(max_examples=400, deadline=None)
@given(st.text(), st.text())
def test_words_of_joined_fields_are_the_words_of_each(title: str, content: str) -> None:
    # The write gate takes an item's dedup tokens from the index's per-field split
    # (word_dedup_tokens) instead of splitting "title content" again: that is only
    # sound if a space ends every word and starts none, whatever the text holds.
    joined = words(f"{title} {content}")
    assert joined == words(title) + words(content)
    assert text_dedup_tokens(title, content) == word_dedup_tokens(joined)


# The accent rule as it was written first: a variable-length lookbehind that rescans
# the run of marks at each mark (quadratic). words() must fold exactly as it did.
_LOOKBEHIND_LATIN_MARKS = regex.compile(
    r"(?<=[\p{Latin}\p{Greek}\p{Arabic}\p{Hebrew}\u0640]\p{M}*)\p{M}+|\u0640+"
)
_MARKED_TEXT = st.text(
    alphabet=st.sampled_from(
        [
            *"aZéßĳƀ",  # Latin letters, precomposed or not
            *"αЖक编ئ1٣ ",  # other scripts, digits, a space
            "\u0301",  # combining acute (Mn)
            "\u0308",  # combining diaeresis (Mn)
            "\u0363",  # combining Latin small letter a (Mn, script Inherited)
            "\u093f",  # Devanagari vowel sign i (Mc)
            "\u0903",  # Devanagari sign visarga (Mc)
            "\u20dd",  # combining enclosing circle (Me)
            "\u0670",  # Arabic superscript alef (Mn)
        ]
    ),
    max_size=12,
)


def _words_by_lookbehind(text: str) -> list[str]:
    """words() for non-ASCII text with the lookbehind accent rule (a reference)."""
    text = unicodedata.normalize("NFC", memstore.text._IGNORABLE.sub("", text))
    text = unicodedata.normalize("NFKD", memstore.text._CAMEL.sub(" ", text))
    text = _LOOKBEHIND_LATIN_MARKS.sub("", text)
    text = unicodedata.normalize("NFC", text).casefold()
    text = memstore.text._FOLD_CHARS.sub(memstore.text._fold_char, text)
    text = memstore.text._CJK_EDGE.sub(" ", text)
    text = memstore.text._CJK_RUN.sub(memstore.text._cjk_bigrams, text)
    return memstore.text._WORD.findall(text)


@settings(max_examples=1000, deadline=None)
@given(_MARKED_TEXT)
def test_latin_marks_fold_as_the_lookbehind_rule(text: str) -> None:
    assert memstore.text._LATIN_MARKS.sub("", text) == _LOOKBEHIND_LATIN_MARKS.sub("", text)
    nfkd = unicodedata.normalize("NFKD", text)
    assert memstore.text._LATIN_MARKS.sub("", nfkd) == _LOOKBEHIND_LATIN_MARKS.sub("", nfkd)
    if not text.isascii():
        assert words(text) == _words_by_lookbehind(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x " + "\u0301" * 50_000, ["x", "\u0301" * 50_000]),  # marks after a space stay
        ("e" + "\u0301" * 50_000 + " ok", ["e", "ok"]),  # accents on a Latin letter fold
        ("क" + "\u093f" * 50_000, ["क" + "\u093f" * 50_000]),  # vowel signs stay
    ],
)
def test_long_runs_of_marks_fold_as_the_rule_says(text: str, expected: list[str]) -> None:
    # The lookbehind rule took minutes on runs this long; the answer is plain.
    assert words(text) == expected


_BATCH_TEXT = st.text(alphabet="aAbZz09.:- _xY\0é", max_size=16)
"""Texts dense in what the batch split treats specially: CamelCase, decimals, NUL."""


@given(st.lists(_BATCH_TEXT | st.text(max_size=8), max_size=8))
@settings(max_examples=500)
def test_words_many_is_words_of_each_text(texts: list[str]) -> None:
    # The batch split (one pass over the joined texts, its CamelCase cuts and
    # decimals found across the batch) gives each text the words it has alone.
    assert memstore.text.words_many(texts) == [words(t) for t in texts]
