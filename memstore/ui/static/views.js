// Rendering the API's answers. Every piece of memory text goes through h()/textContent.
// Memory text inside a line of the page's own text is bidi-isolated (<bdi>, or CSS
// unicode-bidi: isolate on del/ins/.kind): a right-to-left override (U+202E) left
// open in a stored text must not reverse the words after it.

import { fill, h, num, show, showId } from "./dom.js";

function label(item) {
  return item.title || item.content.slice(0, 120) || showId(item.id);
}

/** The explanation of one hit: channels, ranks, fused score, each rerank multiplier. */
function explanation(ex, score) {
  if (!ex) return null;
  const rows = [
    ["channels", ex.channels.join(", ") || "—"],
    ["lexical rank", show(ex.lexical_rank)],
    ["lexical score", num(ex.lexical_score)],
    ["semantic rank", show(ex.semantic_rank)],
    ["similarity", num(ex.similarity)],
    ["fused score", num(ex.fused_score)],
    ["base score", num(ex.base_score)],
  ];
  if (ex.spread_from) rows.push(["spread from", [h("bdi", {}, showId(ex.spread_from)), ` (+${num(ex.spread_score)})`]]);
  const multipliers = Object.entries(ex.multipliers || {});
  return h(
    "details",
    { class: "why" },
    h("summary", {}, "Why this rank"),
    h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("p", { class: "sub" }, "Rerank multipliers"),
    multipliers.length
      ? h(
          "ul",
          { class: "multipliers", "aria-label": "Rerank multipliers" },
          multipliers.map(([k, v]) => h("li", {}, `${k} × ${num(v)}`)),
        )
      : h("p", { class: "note" }, "none"),
    h("p", { class: "sub" }, `final score ${num(score)}`),
  );
}

/** One entry of the Results list. */
export function hit(result, open) {
  const item = result.item;
  return h(
    "li",
    { class: "hit", "data-id": item.id },
    h("button", { type: "button", class: "link", onclick: () => open(item.id) }, label(item)),
    item.title ? h("p", { class: "snippet" }, item.content.slice(0, 240)) : null,
    h(
      "div",
      { class: "meta" },
      h("span", { class: "kind" }, item.kind),
      item.status !== "active" ? h("span", { class: "status" }, item.status) : null,
      item.subject ? h("span", {}, "subject ", h("bdi", {}, item.subject)) : null,
      result.score !== null ? h("span", { class: "score" }, `score ${num(result.score)}`) : null,
    ),
    explanation(result.explanation, result.score),
  );
}

function fields(item) {
  const keys = Object.keys(item).sort();
  return h(
    "dl",
    { class: "facts fields", "aria-label": "Fields" },
    keys.map((k) => [h("dt", {}, k), h("dd", { "data-field": k }, k === "id" ? showId(item.id) : show(item[k]))]),
  );
}

function moment(m) {
  return m ? `${m.time} (${m.lsn})` : "now";
}

function version(v, travel) {
  const changes = v.changes.length
    ? h(
        "ul",
        { class: "changes", "aria-label": "Changes" },
        v.changes.map((c) =>
          h(
            "li",
            {},
            h("code", {}, c.field),
            ": ",
            h("del", {}, show(c.before)),
            " → ",
            h("ins", {}, show(c.after)),
          ),
        ),
      )
    : null;
  return h(
    "li",
    { class: `version${v.current ? " current" : ""}${v.after_moment ? " later" : ""}` },
    h(
      "div",
      { class: "meta" },
      h("strong", {}, v.op),
      ` at ${moment(v.valid_from)}`,
      v.valid_to ? ` until ${moment(v.valid_to)}` : " (current)",
      v.current ? h("span", { class: "tag" }, "shown") : null,
      v.after_moment ? h("span", { class: "tag" }, "after the chosen moment") : null,
    ),
    v.item ? h("p", { class: "content" }, v.item.content) : null,
    changes,
    h(
      "button",
      { type: "button", class: "small", onclick: () => travel(v.valid_from.lsn) },
      "As of this version",
    ),
  );
}

function linkList(name, links, open) {
  return [
    h("h3", {}, name),
    links.length
      ? h(
          "ul",
          { "aria-label": name, class: "links" },
          links.map((l) =>
            h(
              "li",
              {},
              h("button", { type: "button", class: "link", onclick: () => open(l.id) }, l.title ?? showId(l.id)),
              " ",
              h("bdi", {}, l.relation ?? l.kind ?? ""),
              ` ${num(l.weight ?? l.score)}`,
            ),
          ),
        )
      : h("p", { class: "note" }, "none"),
  ];
}

/** The item panel. actions: {open, travel, forget, erase}. */
export function itemPanel(el, view, actions, canForget) {
  const item = view.item;
  const title = item ? label(item) : [h("bdi", {}, showId(view.id)), " (deleted)"];
  fill(
    el,
    h("h2", { id: "item-title" }, title),
    view.as_of ? h("p", { class: "banner" }, `As it was at ${moment(view.as_of)}`) : null,
    item
      ? fields(item)
      : h("p", { class: "note" }, "This item is deleted now; its history remains."),
    item && canForget && !view.as_of
      ? h(
          "div",
          { class: "row" },
          h("button", { type: "button", class: "danger", onclick: () => actions.forget(view.id) }, "Forget"),
          h("button", { type: "button", class: "danger", onclick: () => actions.erase(view.id) }, "Hard delete"),
        )
      : null,
    h("h3", {}, "History"),
    view.history_older ? h("p", { class: "note" }, `${view.history_older} older version(s) not shown`) : null,
    h("ol", { class: "history", "aria-label": "Versions" }, view.history.map((v) => version(v, actions.travel))),
    view.history_newer ? h("p", { class: "note" }, `${view.history_newer} newer version(s) not shown`) : null,
    linkList("Links out", view.links_out, actions.open),
    linkList("Links in", view.links_in, actions.open),
    view.links_in_more ? h("p", { class: "note" }, `${view.links_in_more} more link(s) in not shown`) : null,
    linkList("Related", view.related, actions.open),
    view.related_more ? h("p", { class: "note" }, `${view.related_more} more related item(s) not shown`) : null,
    view.related_complete === false
      ? h("p", { class: "note" }, "Only the nearest linked items were read: Related may leave out some that score higher.")
      : null,
  );
  el.hidden = false;
}

/** The item panel once the open item was withdrawn: it left this view, it was not deleted. */
export function withdrawnPanel(el, id) {
  fill(
    el,
    h("h2", { id: "item-title" }, [h("bdi", {}, showId(id)), " (no longer in this view)"]),
    h(
      "p",
      { class: "note" },
      "This item left this view: it was moved to another partition or tenant, or made " +
        "private, elsewhere. It was not deleted, but this token can no longer see it.",
    ),
  );
  el.hidden = false;
}

/**
 * The statistics panel: the tenant's item counts and the journal's head; the server's
 * own figures (every tenant's searches, the journal's size, the vectors) only when the
 * answer carries them (a token with the admin scope), else a line saying so.
 */
export function statsPanel(el, s) {
  const table = (caption, rows) =>
    h(
      "table",
      {},
      h("caption", {}, caption),
      h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, show(v))))),
    );
  const tables = [
    table("Items by partition", Object.entries(s.partitions)),
    table("Items by kind", Object.entries(s.kinds)),
    table("Journal", [["head", s.journal.head ? `${s.journal.head.lsn} (${s.journal.head.time})` : "—"]]),
  ];
  const server = s.server;
  if (server) {
    const phases = Object.entries(server.search.phases).map(([k, p]) => [k, `${p.count} calls, ${num(p.avg_ms)} ms`]);
    tables.push(
      table("Searches (all tenants)", [
        ["total", server.search.total],
        ["lexical fast path", server.search.lexical_fast_path],
        ["fused", server.search.fused],
        ["semantic calls", server.search.semantic_calls],
        ["avg lexical ms", num(server.search.avg_lexical_ms)],
        ["avg fused ms", num(server.search.avg_fused_ms)],
      ]),
      table("Search phases (all tenants)", phases),
      table("Storage (all tenants)", [
        ["journal size (bytes)", server.journal_bytes],
        ["vectors", server.vectors],
      ]),
    );
  } else {
    tables.push(
      h(
        "p",
        { class: "note" },
        "The server's own figures (every tenant's searches, the journal's size, the vectors) " +
          "are shown to a token with the admin scope.",
      ),
    );
  }
  fill(el, ...tables);
}

/** One line of the Live changes panel (a withdrawn item's delete says "withdrawn"). */
export function change(data, open) {
  const item = data.item;
  const text = item ? label(item) : showId(data.id);
  const op = data.op === "delete" && data.withdrawn === true ? "withdrawn" : data.op;
  return h(
    "li",
    { class: `change ${op}` },
    h("span", { class: "op" }, op),
    " ",
    h("span", { class: "kind" }, data.kind),
    " ",
    data.op === "upsert"
      ? h("button", { type: "button", class: "link", onclick: () => open(data.id) }, text)
      : h("bdi", {}, text),
  );
}
