// Building DOM nodes. Memory text is only ever set as textContent, never as HTML:
// an item containing "<script>" shows those characters, it never runs.

/** An element: h("li", {class: "hit", onclick: fn}, "text", child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** Replace the children of el. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Invisible format characters: the bidi controls that reorder text around them (ALM,
// LRM, RLM, embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069) and those
// that show nothing at all (soft hyphen, zero-width space and joiners, word joiner,
// BOM). An id may hold them (the engine refuses only whitespace).
const INVISIBLE = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/** Each invisible format character of text written as its escape (\u202e). */
function escapeInvisible(text) {
  return text.replace(INVISIBLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * An id for display: its invisible characters escaped. An id names what a dialog is
 * about to forget: "notes\u202etxt.exe" must not read "notesexe.txt", nor "report\u200b"
 * pass for "report". Requests still carry the id as it is.
 */
export function showId(id) {
  return escapeInvisible(String(id));
}

/**
 * A value for display: JSON for structures, text for the rest. A structure is one
 * line of JSON holding many memory strings: a bidi control left open in one of them
 * (a source ending in U+202E) would reverse every key and value after it, so in JSON
 * the invisible characters are written as their escapes (\u202e), which read as the
 * same JSON.
 */
export function show(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "object") return escapeInvisible(JSON.stringify(value));
  return String(value);
}

/** A number with at most 4 decimals. */
export function num(value) {
  if (value === null || value === undefined) return "—";
  return Number.isInteger(value) ? String(value) : value.toFixed(4);
}
