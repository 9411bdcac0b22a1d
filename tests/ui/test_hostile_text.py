"""Hostile text in memory, in a real browser: it stays text and names what it is.

Markup in any field never runs nor makes an element (and Trusted Types make HTML
built from a string an error); invisible characters in an id or in a structure's
JSON are shown as their escapes; a long id fits the dialog that names it. The
servers and the browser are those of ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from memstore import Item, Memory
from memstore.item import ThoughtLink
from tests.ui.conftest import Page, Server
from tests.ui.test_browser import results, signed_in


def test_a_bidi_control_in_one_value_cannot_reorder_the_rest_of_a_structure(
    page: Page,
) -> None:
    # A field holding a structure (data, tags, links) is shown as one line of JSON: a
    # U+202E left open in one value (here the source) would reverse every key and value
    # after it, so "t_ref" read before "metadata". The page shows such a control escaped.
    _, token = page.server.tenant()
    page.server.ingest(token, "Lee signed the lease.", source="lease\u202e.md")
    page.sign_in(token)
    page.search("lease")
    results(page).filter(has=page.page.locator(".kind", has_text="episode")).locator(
        "button.link"
    ).click()
    data = page.page.get_by_role("region", name="Item").locator('[data-field="data"]')
    expect(data).to_contain_text('"t_ref"')
    assert "\u202e" not in (data.text_content() or "")
    xs = data.evaluate(
        """(dd) => {
            const text = dd.firstChild;
            const x = (word) => {
                const at = text.data.indexOf(word);
                const range = document.createRange();
                range.setStart(text, at);
                range.setEnd(text, at + word.length);
                return [at, range.getBoundingClientRect().x];
            };
            return [x('"metadata"'), x('"t_ref"')].sort((a, b) => a[0] - b[0]);
        }"""
    )
    (first, first_x), (second, second_x) = xs
    assert first >= 0 and second > first, xs
    assert first_x < second_x, xs  # read in the order written


def _hostile(n: int, spaces: bool = True) -> str:
    """Markup that sets ``window.__pwned = n`` if any of it is ever parsed as HTML."""
    if not spaces:  # an id or a link target: no whitespace
        return f"<img/src=x/onerror=window.__pwned={n}></script><svg/onload=window.__pwned={n}>"
    return (
        f'<img src=x onerror="window.__pwned={n}"><svg onload="window.__pwned={n}"></svg>'
        f"</script><script>window.__pwned={n}</script><style>*{{display:none}}</style>"
        f"javascript:window.__pwned={n}//"
    )


def test_markup_in_every_field_stays_text_in_every_panel(browser: Any, tmp_path: Path) -> None:
    # Hostile markup in an id, title, content, subject, tags, data, a link target, a live
    # change and an error message: wherever the page shows it (results, the explanation,
    # the item, its history diff, links in, the live panel, the error banner, statistics),
    # it is text. Nothing runs (window.__pwned stays unset, no dialog), no element is made.
    data = tmp_path / "data"
    target = "t" + _hostile(1, spaces=False)
    linker = "l" + _hostile(2, spaces=False)
    with Memory(data, embedder="hash") as mem:
        mem.add(
            Item(
                id=target,
                kind="note",
                title="Target " + _hostile(3),
                content="zebra " + _hostile(4),
                subject="s" + _hostile(5),
                tags=["tag" + _hostile(6)],
                data={"k" + _hostile(7): "v" + _hostile(8)},
            ),
            partition="t",
        )
        for n in (9, 10):  # two versions: the history shows a diff of markup
            link = ThoughtLink(to_id=target, relation="explains")
            text = f"zebra linker {_hostile(n)}"
            mem.add(Item(id=linker, kind="note", content=text, links=[link]), partition="t")
    with signed_in(browser, tmp_path, data, ("ingest", "recall")) as tab:
        dialogs: list[str] = []
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        url = tab.url.removesuffix("/ui")
        expect(tab.get_by_text("live", exact=True)).to_be_visible()
        body = {"source": "live" + _hostile(11) + ".md", "content": "zebra " + _hostile(12)}
        got = httpx.post(
            f"{url}/v1/ingest", json=body, headers={"Authorization": "Bearer tok-t"}, timeout=30
        )
        assert got.status_code == 200, got.text
        changes = tab.get_by_role("list", name="Changes").first
        expect(changes).to_contain_text("window.__pwned=12")
        Page(tab, Server(url, {}), []).search("zebra")
        listed = tab.get_by_role("list", name="Results")
        expect(listed.get_by_role("listitem")).to_have_count(4)
        for why in listed.locator("details.why summary").all():
            why.click()
        listed.get_by_role("button", name="Target <img", exact=False).click()
        item = tab.get_by_role("region", name="Item")
        expect(item.locator('[data-field="subject"]')).to_contain_text("<svg onload=")
        expect(item.locator('[data-field="data"]')).to_contain_text("<style>")
        item.get_by_role("list", name="Links in").get_by_role("button").click()
        expect(item.locator('[data-field="id"]')).to_have_text(linker)
        expect(item.get_by_role("list", name="Changes")).to_contain_text("window.__pwned=10")
        tab.get_by_role("textbox", name="As of").fill(_hostile(13))
        tab.get_by_role("textbox", name="As of").press("Enter")
        expect(tab.get_by_role("alert")).to_contain_text("window.__pwned=13")
        tab.get_by_role("button", name="Refresh statistics").click()
        expect(tab.locator("#stats-body")).to_contain_text("note")
        assert tab.evaluate("window.__pwned") is None
        assert dialogs == []
        made = "img, svg, script:not([src]), style, iframe, a, object, embed"
        assert tab.locator(f"main :is({made}), #error :is({made})").count() == 0


def test_the_forget_dialog_shows_the_whole_of_a_long_id(browser: Any, tmp_path: Path) -> None:
    # An id may be 256 characters with no space (a path-like key): the dialog that asks
    # before forgetting names it, and must show all of it, its end included (what tells
    # "...-v1" from "...-v2"), not let it run out of the dialog's box.
    data = tmp_path / "data"
    long_id = "runbooks/" + "x" * 240 + "-v2"
    with Memory(data, embedder="hash") as mem:
        mem.add(Item(id=long_id, kind="note", content="A runbook kept for long."), partition="t")
    with signed_in(browser, tmp_path, data, ("recall", "forget")) as tab:
        tab.get_by_role("list", name="Results").get_by_role("button").click()
        tab.get_by_role("region", name="Item").get_by_role("button", name="Forget").click()
        dialog = tab.get_by_role("dialog")
        expect(dialog).to_contain_text("-v2")
        inside = dialog.evaluate(
            """(d) => {
                const box = d.getBoundingClientRect();
                const id = d.querySelector("bdi").getBoundingClientRect();
                return [id.left >= box.left, id.right <= box.right, d.scrollWidth <= d.clientWidth];
            }"""
        )
        assert inside == [True, True, True]
        tab.keyboard.press("Escape")
        expect(dialog).to_be_hidden()


def test_an_id_with_invisible_characters_is_named_with_them_shown(
    browser: Any, tmp_path: Path
) -> None:
    # The engine took any id without whitespace: "notes\u202etxt.exe" read "notesexe.txt"
    # in the dialog asking before a hard delete, and "report\u200b" passed for "report".
    # A write now refuses such an id, but a journal written before holds them (put here
    # with Store.put, which takes a record as it is). The page writes such characters of
    # an id as their escapes (the request keeps the id).
    data = tmp_path / "data"
    spoof, twin = "notes\u202etxt.exe", "report\u200b"
    with Memory(data, embedder="hash") as mem:
        mem.store.put(Item(id=spoof, kind="note", content="Spoofing note.", tags=["tenant/t"]))
        mem.store.put(Item(id=twin, kind="note", content="Twin note.", tags=["tenant/t"]))
    with signed_in(browser, tmp_path, data, ("recall", "forget")) as tab:
        listed = tab.get_by_role("list", name="Results")
        item = tab.get_by_role("region", name="Item")
        listed.get_by_role("button", name="Twin note.").click()
        expect(item.locator('[data-field="id"]')).to_have_text("report\\u200b")
        listed.get_by_role("button", name="Spoofing note.").click()
        expect(item.locator('[data-field="id"]')).to_have_text("notes\\u202etxt.exe")
        item.get_by_role("button", name="Hard delete").click()
        dialog = tab.get_by_role("dialog")
        expect(dialog.locator("bdi")).to_have_text("notes\\u202etxt.exe")
        dialog.get_by_role("button", name="Erase permanently").click()
        expect(item).to_be_hidden()
        expect(listed.get_by_role("listitem")).to_have_count(1)  # the id as it is was erased


def test_the_page_refuses_html_built_from_a_string(browser: Any, server: Server) -> None:
    # The page builds its DOM with textContent alone; Trusted Types make that a rule the
    # browser keeps: a later change writing memory through innerHTML (or
    # insertAdjacentHTML, outerHTML, document.write) throws instead of making elements,
    # so not even markup the CSP lets through (a <meta http-equiv=refresh>) can appear.
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(f"{server.url}/ui")
        sinks = tab.evaluate(
            """() => ['innerHTML', 'outerHTML', 'insertAdjacentHTML'].map((sink) => {
                const el = document.createElement('div');
                document.body.append(el);
                try {
                    const html = '<b>x</b>';
                    if (sink === 'insertAdjacentHTML') el.insertAdjacentHTML('beforeend', html);
                    else el[sink] = html;
                    return 'assigned';
                } catch (error) {
                    return error.name;
                }
            })"""
        )
        assert sinks == ["TypeError", "TypeError", "TypeError"]
        assert tab.locator("b").count() == 0
    finally:
        context.close()
