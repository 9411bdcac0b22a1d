// The inspector page: sign in, search, item, time travel, live changes, forget, stats.

import { ApiError, call, token } from "./api.js";
import { fill, h, showId } from "./dom.js";
import { follow } from "./events.js";
import { change, hit, itemPanel, statsPanel, withdrawnPanel } from "./views.js";

const $ = (id) => document.getElementById(id);
// query, kind, subject: those of the listing shown (not what is typed in the boxes since);
// offset: how many of its hits the server has answered so far (its next page starts there);
// at: the journal position the last page of it was read at (its read_at: the server's order
// the offset counts in), and page: where that page started; changed: how many live changes
// were applied to what is shown, changes: the last of them, each with its number n, its
// position and how far it moved the offset (see asked()).
const state = { me: null, asOf: null, item: null, query: "", kind: "", subject: "", offset: 0, at: null, page: 0, live: null, searches: 0, opens: 0, session: 0, changed: 0, changes: [] };

function showError(error) {
  const box = $("error");
  box.textContent = error instanceof Error ? error.message : String(error);
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

async function guarded(fn) {
  clearError();
  try {
    await fn();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) signOut(false);
    showError(error);
  }
}

function partition() {
  return state.me && state.me.partitions.length > 1 ? $("partition").value : undefined;
}

// ------------------------------------------------------------ sign in

/** Why value cannot be a token (a character an HTTP header cannot carry), or null. */
function notAToken(value) {
  const odd = [...value].find((c) => c < "!" || c > "~"); // tokens are printable ASCII
  if (odd === undefined) return null;
  const code = `U+${odd.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
  return `this token holds ${code}, which no token can: check what was pasted`;
}

async function signIn(value) {
  const problem = notAToken(value);
  if (problem) throw new Error(problem);
  token.set(value);
  let me;
  try {
    me = await call("whoami");
  } catch (error) {
    token.clear();
    throw error;
  }
  state.me = me;
  $("token").value = ""; // kept in sessionStorage alone, not in the (hidden) box too
  $("signin").hidden = true;
  $("who").hidden = false;
  $("who-text").textContent = `tenant ${me.tenant} · scopes ${me.scopes.join(", ")}`;
  fill($("partition"), me.partitions.map((p) => h("option", { value: p }, p)));
  $("partition-box").hidden = me.partitions.length < 2;
  $("app").hidden = false;
  $("welcome").hidden = true;
  $("q").focus();
  startLive();
  await Promise.all([runSearch(), refreshStats()]);
}

function signOut(clearBox = true) {
  token.clear();
  state.me = null;
  state.live?.stop();
  state.live = null;
  forgetShown();
  $("app").hidden = true;
  $("welcome").hidden = false;
  $("who").hidden = true;
  $("signin").hidden = false;
  $("token").value = "";
  if (clearBox) clearError();
  $("token").focus();
}

// Everything the last token was shown goes with it: the next person to sign in on
// this tab (another tenant, perhaps) must not find it, on screen or hidden in the DOM.
function forgetShown() {
  state.session++; // answers still on their way for the old token are dropped
  state.searches++;
  state.opens++;
  state.asOf = null;
  state.item = null;
  state.query = state.kind = state.subject = "";
  state.offset = 0;
  state.at = null;
  $("more").hidden = true;
  for (const id of ["results", "item", "live-list", "stats-body"]) fill($(id));
  for (const id of ["results-note", "who-text"]) $(id).textContent = "";
  for (const id of ["q", "kind", "subject", "asof"]) $(id).value = "";
  fill($("partition"));
  $("item").hidden = true;
  $("live-state").textContent = "off";
  banner(null);
}

// ------------------------------------------------------------ search and item

async function runSearch() {
  await list($("q").value, $("kind").value.trim(), $("subject").value.trim());
}

// How many times a page of a listing is asked again when live changes came while it was
// on its way (a memory that never stops changing gets the last answer shown).
const ASK_AGAIN = 3;
// How many of the last live changes are remembered for a page on its way (asked()).
const REMEMBERED = 200;

/**
 * A journal position as [wall_ms, counter], or null: a live change's `lsn` is one already;
 * an answer's `read_at.lsn` (and an entry's `data-at`) is its text "wall_ms.counter".
 */
function position(value) {
  if (Array.isArray(value) && value.length === 2) return value.map(Number);
  if (typeof value !== "string" || !/^\d+\.\d+$/.test(value)) return null;
  return value.split(".").map(Number);
}

/** Whether position a is at or before position b (both known). */
function atOrBefore(a, b) {
  return a[0] < b[0] || (a[0] === b[0] && a[1] <= b[1]);
}

/** Whether a change at `lsn` is in what was read at `read` (null when either is unknown). */
function holds(read, lsn) {
  const r = position(read);
  const l = position(lsn);
  return r && l ? atOrBefore(l, r) : null;
}

/**
 * A page of a listing, asked again while a live change that came on its way makes the
 * answer wrong. The answer says the journal position it was read at (`read_at`), and each
 * change its own: a change after it (or of unknown position) is not in the answer, which
 * replaces or extends what it was applied to; a change at or before it is in the answer,
 * and harms only a next page (`paged`) whose start it moved (the page was asked from the
 * start before it: it skipped a hit). `params()` is read at each asking (the start,
 * `state.offset`, moves). A change that comes after the answer is placed by applyChange.
 */
async function asked(params, paged) {
  for (let n = 0; ; n++) {
    const seen = state.changed;
    const answer = await call("search", params());
    const read = answer.read_at?.lsn;
    const came = state.changes.filter((c) => c.n > seen);
    const harms = (c) => holds(read, c.lsn) !== true || (paged && c.moved !== 0);
    const forgotten = came.length < state.changed - seen; // more came than are remembered
    if (!(forgotten || came.some(harms)) || n >= ASK_AGAIN) return answer;
  }
}

/** Show the first page of a listing (a search, or the newest items when query is blank). */
async function list(query, kind, subject) {
  const mine = ++state.searches; // only the newest search's answer is shown
  const answer = await asked(() => ({ q: query, kind, subject, partition: partition(), as_of: state.asOf }), false);
  if (mine !== state.searches) return;
  Object.assign(state, { query, kind, subject, offset: 0 });
  banner(answer.as_of);
  fill($("results"));
  showPage(answer);
}

/** The next page of the listing shown, below it (Show more). */
async function moreResults() {
  const mine = state.searches; // a new search meanwhile makes this page moot
  const { query, kind, subject } = state;
  const answer = await asked(() => ({ q: query, kind, subject, partition: partition(), as_of: state.asOf, offset: state.offset }), true);
  if (mine === state.searches) showPage(answer);
}

/**
 * The last page shown was asked from a start that a change it holds (one read before the
 * page, whose live change came after it) moved back by `moved`: it skipped as many hits.
 * Ask for it again from the start as it is in the order the page was read in.
 */
async function repage(moved) {
  const start = state.page;
  for (const li of [...$("results").children]) if (li.dataset.page === String(start)) li.remove();
  state.offset = Math.max(0, start + moved);
  await moreResults();
}

function showPage(answer) {
  const listed = new Set([...$("results").children].map((li) => li.dataset.id));
  const fresh = answer.hits.filter((r) => !listed.has(r.item.id)); // live changes may have listed one
  const at = answer.read_at?.lsn ?? "";
  $("results").append(...fresh.map((r) => entry(r, at, answer.offset)));
  state.at = at || null;
  state.page = answer.offset;
  state.offset = answer.offset + answer.hits.length;
  $("more").hidden = !answer.more;
  const n = $("results").children.length;
  const what = state.query.trim() ? `${n} hit(s) for “${state.query}”` : `${n} newest item(s)`;
  const shown = answer.as_of ? `${what}, as of ${answer.as_of.time}` : what;
  $("results-note").textContent = answer.more ? `${shown}; more below` : shown;
}

// What each entry of Results was made from (its search's score and explanation).
const shownHits = new WeakMap();

/**
 * An entry of Results for one hit (or one listed item: no score), as of journal position
 * `at` (`data-at`: a live change at or before it is already in it), on the page that
 * started at `page` (none for an item a live change listed).
 */
function entry(result, at, page) {
  const li = hit(result, actions.open);
  shownHits.set(li, result);
  if (at) li.dataset.at = at;
  if (page !== undefined && page !== "") li.dataset.page = String(page);
  return li;
}

const actions = {
  open: (id) => guarded(() => openItem(id)),
  travel: (lsn) => guarded(() => travel(lsn)),
  forget: (id) => guarded(() => forget(id)),
  erase: (id) => guarded(() => erase(id)),
};

async function openItem(id, focus = true) {
  const mine = ++state.opens;
  // The id goes in the query: a browser would resolve an id "." or ".." away in a path.
  let view;
  try {
    view = await call("item", { id, partition: partition(), as_of: state.asOf });
  } catch (error) {
    // Not there (erased, or never this tenant's; or not yet at the moment travelled to,
    // and Back to now opens it again): the panel must not go on showing an item, this
    // one's erased text or another one's as if it were this one.
    if (mine === state.opens && error instanceof ApiError && error.status === 404) closeItem(!state.asOf);
    throw error;
  }
  if (mine !== state.opens) return;
  state.item = id;
  itemPanel($("item"), view, actions, state.me.scopes.includes("forget"));
  $("item-title").setAttribute("tabindex", "-1");
  if (focus) $("item-title").focus();
}

function closeItem(forget = true) {
  if (forget) state.item = null;
  fill($("item"));
  $("item").hidden = true;
}

// ------------------------------------------------------------ time travel

function banner(moment) {
  const el = $("asof-banner");
  if (moment) {
    el.textContent = `Time travel: showing memory as it was at ${moment.time} (log position ${moment.lsn}). Live changes are not applied.`;
    el.hidden = false;
    document.body.classList.add("past");
  } else {
    el.textContent = "";
    el.hidden = true;
    document.body.classList.remove("past");
  }
}

async function travel(value) {
  const previous = state.asOf;
  state.asOf = value.trim() || null;
  $("asof").value = state.asOf ?? "";
  try {
    await runSearch();
  } catch (error) {
    state.asOf = previous;
    $("asof").value = previous ?? "";
    throw error;
  }
  if (state.item) {
    try {
      await openItem(state.item, false);
    } catch (error) {
      $("item").hidden = true;
      throw error;
    }
  }
}

// ------------------------------------------------------------ forget

/** Ask first; text is the dialog's sentence, as strings and nodes (an id goes in a <bdi>). */
function confirmDialog(title, text, ok) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  fill($("confirm-text"), text);
  $("confirm-ok").textContent = ok;
  dialog.returnValue = "";
  dialog.showModal();
  $("confirm-cancel").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

async function forget(id) {
  const text = ["Soft forget ", h("bdi", {}, showId(id)), ": it leaves search and listings; its history stays in the journal."];
  if (!(await confirmDialog("Forget this item?", text, "Confirm forget"))) return;
  await call("forget", { id, partition: partition() }, "POST");
  await Promise.all([runSearch(), openItem(id)]);
}

async function erase(id) {
  const preview = await call("forget", { id, hard: true, partition: partition() }, "POST");
  const text = [
    "Hard delete ",
    h("bdi", {}, showId(id)),
    `: ${preview.versions} version(s) will be erased from the journal, history included. This cannot be undone.`,
  ];
  if (!(await confirmDialog("Erase permanently?", text, "Erase permanently"))) return;
  await call("forget", { id, hard: true, confirmation: preview.confirmation, partition: partition() }, "POST");
  $("item").hidden = true;
  state.item = null;
  await runSearch();
}

// ------------------------------------------------------------ live changes and stats

function startLive() {
  state.live?.stop();
  if (!state.me.live) {
    $("live-state").textContent = "no change hub";
    return;
  }
  state.live = follow(
    () => token.get(),
    ({ event, data }) => {
      if (event === "reset") reloadShown();
      if (event !== "change") return;
      const list = $("live-list");
      list.prepend(change(data, actions.open));
      while (list.children.length > 50) list.lastElementChild.remove();
      applyChange(data);
    },
    (s, detail, status) => {
      if (status === 401) {
        // The token was revoked while the page was open: sign out, as any refused request does.
        signOut(false);
        showError(new ApiError(401, "unauthorized", `401 unauthorized: ${detail}`));
        return;
      }
      $("live-state").textContent = detail ? `${s}: ${detail}` : s;
      $("live").dataset.state = s;
    },
  );
}

/** A live change's position as an entry's `data-at` ("wall_ms.counter"), or "". */
function atText(lsn) {
  const p = position(lsn);
  return p ? `${p[0]}.${p[1]}` : "";
}

function applyChange(data) {
  if (state.asOf) return; // the past does not change
  // How far the change moves the next page's start (state.offset) in the server's order.
  let moved = 0;
  const newest = !state.query.trim(); // a listing of the newest items, not a search
  // A delete marked withdrawn: the item lives on, out of this tenant's sight (moved to
  // another partition or tenant, unshared, made private). Not deleted: say so.
  const withdrawn = data.op === "delete" && data.withdrawn === true;
  // The listing's Kind and Subject, as last searched (not as typed in the boxes since).
  const admitted = (item) => (!state.kind || item.kind === state.kind) && (!state.subject || item.subject === state.subject);
  for (const li of $("results").querySelectorAll("li.hit")) {
    if (li.dataset.id !== data.id) continue;
    if (holds(li.dataset.at, data.lsn)) continue; // read after the change: already shows it
    const left = li.classList.contains("deleted") || li.classList.contains("withdrawn");
    if (data.op === "upsert" && data.item && !admitted(data.item)) {
      // Changed out of the listing's filters: it left the server's order too.
      if (!left) moved--;
      li.remove();
      continue;
    }
    const gone = data.op === "delete";
    // Keep the next page's start (state.offset) at the same place in the server's order:
    // a listed item deleted (or withdrawn) leaves it, one place before that start (were
    // the start left alone, the item moving up into it would never be listed); one
    // undeleted rejoins a listing of the newest at its top. A search may rank it anywhere:
    // left alone, the next page can at worst repeat a hit, which showPage drops.
    if (gone && !left) moved--;
    if (!gone && left && newest) moved++;
    li.classList.toggle("deleted", gone && !withdrawn);
    li.classList.toggle("withdrawn", withdrawn);
    li.querySelector(".gone")?.remove();
    if (withdrawn) {
      // Nothing here can act on it any more: its title is no longer a button to open it.
      const title = li.querySelector("button.link");
      title?.replaceWith(h("span", { class: "title" }, title.textContent));
      li.querySelector(".meta").append(h("span", { class: "gone" }, "no longer in this view"));
    } else if (gone) {
      li.querySelector(".meta").append(h("span", { class: "gone" }, "deleted"));
    }
    if (data.op === "upsert" && data.item) {
      // Changed elsewhere: show it as it is now. A search's score and explanation are
      // those of the text it had (and say so); the newest listing puts it at its top.
      const old = shownHits.get(li);
      // At the top of the newest, it is no longer on the page it was listed on.
      const fresh = entry({ ...old, item: data.item }, atText(data.lsn), newest ? undefined : li.dataset.page);
      if (!newest && old?.score !== null) {
        fresh.querySelector(".meta").append(h("span", { class: "gone" }, "changed since this search"));
      }
      li.replaceWith(fresh);
      if (newest) $("results").prepend(fresh);
    }
  }
  const listed = [...$("results").children].some((li) => li.dataset.id === data.id);
  // A new item joins a listing of the newest items if the listing's filters admit it.
  if (data.op === "upsert" && newest && !listed && data.item && admitted(data.item)) {
    $("results").prepend(entry({ item: data.item, score: null, explanation: null }, atText(data.lsn)));
    moved++; // it came first in the server's order, before the next page's start
  }
  state.changes.push({ n: ++state.changed, lsn: data.lsn, moved }); // for a page on its way
  if (state.changes.length > REMEMBERED) state.changes.shift();
  if (holds(state.at, data.lsn)) {
    // Already in the order the last page was read in, which the offset counts in: the
    // change moved the start that page was asked from (its live change came after the
    // page). Moved forward, the page's first hits were ones shown (showPage dropped
    // them); moved back, the page skipped hits: ask for it again.
    if (moved < 0) guarded(() => repage(moved));
  } else {
    state.offset = Math.max(0, state.offset + moved);
  }
  if (state.item !== data.id) return;
  if (withdrawn) {
    // Reloading it would only be refused (404): close it, saying why.
    state.opens++; // an answer still on its way for it is dropped
    state.item = null;
    withdrawnPanel($("item"), data.id);
    return;
  }
  guarded(() => openItem(data.id, false));
}

/**
 * The stream said `reset`: changes were lost (the page read too slowly, or the server
 * restarted and cannot replay them). What the page shows may be stale, and no change
 * will come to correct it: reload the listing shown, the open item and the statistics.
 */
function reloadShown() {
  const changes = $("live-list");
  changes.prepend(h("li", { class: "change reset" }, "some changes were missed: reloaded"));
  while (changes.children.length > 50) changes.lastElementChild.remove();
  guarded(() => list(state.query, state.kind, state.subject));
  if (state.item) guarded(() => openItem(state.item, false));
  guarded(refreshStats);
}

async function refreshStats() {
  const mine = state.session;
  const answer = await call("stats");
  if (mine === state.session) statsPanel($("stats-body"), answer);
}

// ------------------------------------------------------------ wiring

$("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = $("token").value.trim();
  guarded(() => signIn(value));
});
$("signout").addEventListener("click", () => signOut());
$("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  guarded(runSearch);
});
$("asof-form").addEventListener("submit", (e) => {
  e.preventDefault();
  guarded(() => travel($("asof").value));
});
$("asof-now").addEventListener("click", () => guarded(() => travel("")));
$("stats-refresh").addEventListener("click", () => guarded(refreshStats));
$("more").addEventListener("click", () => guarded(moreResults));

if (token.get()) {
  guarded(() => signIn(token.get()));
}
// For tests and debugging: drop the live connection as a network failure would.
window.memstoreInspector = { dropLive: () => state.live?.drop() };
