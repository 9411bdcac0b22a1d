/* memstore._speedups: compiled twins of memstore's hottest Python loops.
 *
 * Optional: where the module is not built (no C compiler, no Python headers) or
 * MEMSTORE_PURE_PYTHON=1 is set, memstore runs the Python (or numpy) code each function
 * here stands in for, and that code is the oracle a differential test holds the function
 * to: the same answers, the same errors. This file is the module: its table of functions
 * and the one helper they all use. Each function is compiled in a file of its own
 * (declared in _speedups.h, listed in setup.py), whose opening comment documents it and
 * names its oracle:
 *
 *   _wordcount.c   count_docs            the lexicon's write loop over words
 *   _wordsplit.c   index_texts,          the same loop over texts, split here
 *                  split_ascii
 *   _lexrank.c     lex_rank              a lexical query's sums, filters, cut and order
 *   _editnear.c    neighbour_sets,       a cold query token's vocabulary search
 *                  edits, substring_words, key_words, fuzzy_words
 *   _joined.c      holding,              the documents holding a pair of words
 *                  joined_slots
 *   _bestlevels.c  best_levels           a cold token's matches merged
 *   _slots.c       slot_map, slots_of    hits' and ids' snapshot slots
 *   _leantop.c     lean_top              the lean fusion's best candidates
 *   _itemwrite.c   plain_item, row_json  a durable write's item check and journal row
 */
#include "_speedups.h"

int
ms_hold_1d(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *who, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a 1-d array of %zd-byte items", who, what,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyMethodDef methods[] = {
    {"count_docs", memstore_count_docs, METH_VARARGS,
     "count_docs(docs, df, content_wid, content_ids, content_counts, title_wid, title_ids, "
     "title_counts) -> list[str]\n\n"
     "Count and number each document's distinct words (see memstore/_wordbatch.py)."},
    {"index_texts", memstore_index_texts, METH_VARARGS,
     "index_texts(docs, split, df, content_wid, content_ids, content_counts, title_wid, "
     "title_ids, title_counts) -> (fresh, texts, ntitles, words)\n\n"
     "Split each document's texts and count their words in one pass (see memstore/_wordbatch.py)."},
    {"lex_rank", memstore_lex_rank, METH_VARARGS,
     "lex_rank(tokens, denom, title_weight, exact_level, cols, kind, subject, partition, hidden, "
     "now_ts, limit, ids, hit_type) -> None | NotImplemented | (hits, ids, scores) | columns\n\n"
     "A lexical query's sums, filters, scores, cut and order (see memstore/_lexscore.py)."},
    {"holding", memstore_holding, METH_VARARGS,
     "holding(texts, slots, pair) -> list[int] | NotImplemented\n\n"
     "Those of slots whose text holds pair (see memstore/lexical.py's _holding)."},
    {"neighbour_sets", memstore_neighbour_sets, METH_VARARGS,
     "neighbour_sets(tok, spans, vocab, words, live, tables, overlay) -> list[set[str]]\n\n"
     "The vocabulary words within one edit of each span of tok (see memstore/_editnear.py)."},
    {"edits", memstore_edits, METH_VARARGS,
     "edits(tok, levels, level_edit, vocab, words, live, tables, overlay) -> (near, pairs)\n\n"
     "A token's one-edit neighbours and joined pairs (see memstore/_editnear.py)."},
    {"substring_words", memstore_substring_words, METH_VARARGS,
     "substring_words(tok, words, live, tables, overlay) -> list[str]\n\n"
     "The live vocabulary words holding tok (see memstore/lexical.py's _substring_words)."},
    {"key_words", memstore_key_words, METH_VARARGS,
     "key_words(key, words, live, tables, overlay) -> list[str]\n\n"
     "The live words under one key of a vocabulary table (see memstore/_vocabindex.py)."},
    {"fuzzy_words", memstore_fuzzy_words, METH_VARARGS,
     "fuzzy_words(tok, words, live, tables, overlay, min_dice, fuzzy_max) -> dict[str, float]\n\n"
     "A token's fuzzy words and levels (see memstore/lexical.py's _fuzzy_words)."},
    {"joined_slots", memstore_joined_slots, METH_VARARGS,
     "joined_slots(pairs, texts, strong, capacity) -> list[int]\n\n"
     "The slots holding a joined pair, none strong (see memstore/lexical.py's _joined_slots)."},
    {"split_ascii", memstore_split_ascii, METH_O,
     "split_ascii(text) -> list[str]\n\nThe words of an ASCII text, as memstore.text.words splits it."},
    {"plain_item", (PyCFunction)(void (*)(void))memstore_plain_item, METH_FASTCALL,
     "plain_item(rules, d) -> bool\n\n"
     "Whether an item's __dict__ is of the common valid shape (see memstore/_plainitem.py)."},
    {"row_json", (PyCFunction)(void (*)(void))memstore_row_json, METH_FASTCALL,
     "row_json(fields, utcs, d) -> str | None\n\n"
     "An item's persisted fields as the journal row's JSON (see memstore/journal/version.py)."},
    {"slot_map", (PyCFunction)(void (*)(void))memstore_slot_map, METH_FASTCALL,
     "slot_map(known, lex_slots, ids, slot, size) -> (bytes, bool)\n\n"
     "Ranked hits' snapshot slots by their lexicon slots (see memstore/_lexhits.py's SlotMap)."},
    {"lean_top", (PyCFunction)(void (*)(void))memstore_lean_top, METH_FASTCALL,
     "lean_top(base, scored, readable, loan_to, loan_add, id_rank, need) -> (slots, scores) | None\n\n"
     "The lean fusion's best need readable candidates (see memstore/search/_lean.py)."},
    {"best_levels", (PyCFunction)(void (*)(void))memstore_best_levels, METH_FASTCALL,
     "best_levels(parts, capacity, alive) -> (bytes, bytes) | NotImplemented\n\n"
     "A token's matched slots and their best levels (see memstore/_tokenmatch.py)."},
    {"slots_of", (PyCFunction)(void (*)(void))memstore_slots_of, METH_FASTCALL,
     "slots_of(ids, slot, size) -> (bytes, bool)\n\n"
     "Each id's slot below size as int64 (-1: not held), and whether all are held (see "
     "memstore/search/_lean.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memstore._speedups",
    "Compiled twins of memstore's hottest Python loops (optional: each has a pure-Python "
    "oracle that runs without it; see setup.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}

