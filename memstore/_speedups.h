/* memstore._speedups: what the module's C files share.
 *
 * The module (_speedups.c) is one table of functions, each compiled in a file of its
 * own beside its Python oracle's concept; setup.py lists the files. This header
 * declares those functions for the table, the buffer check they all make, and the word
 * numbering the two write loops (_wordcount.c, _wordsplit.c) share.
 */
#ifndef MEMSTORE_SPEEDUPS_H
#define MEMSTORE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Shared between the module's files, and seen by no other library: an extension's
 * non-static names could otherwise be bound to a like-named symbol of a library loaded
 * before it. Only PyInit__speedups is exported. */
#if defined(__GNUC__) && !defined(_WIN32)
#define MS_INTERNAL __attribute__((visibility("hidden")))
#else
#define MS_INTERNAL
#endif

/* Hold obj's buffer in *view: C-contiguous, one-dimensional, items of itemsize bytes.
 * 0, or -1 with an exception (TypeError "<who>: <what> must be a 1-d array of N-byte
 * items" when the shape or the item size is wrong). Only the item size is checked, not
 * the format: numpy builds the format string anew for every buffer asked with it. */
MS_INTERNAL int ms_hold_1d(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *who,
                           const char *what);

/* A word-number dictionary, and how a word missing from it is numbered. The dict may
 * number a missing word itself (a subscript runs its __missing__); one whose
 * ``_numbering`` attribute is a (words, arrays, fill) tuple of two lists and an object
 * (memstore._postings._WordNumbers) is numbered here as its __missing__ would: the
 * next number is len(words), the word is appended to words and fill to arrays. The
 * attribute is read at the first missing word of a call (state 0: not read yet). */
typedef struct {
    PyObject *wid;    /* borrowed: the caller's argument */
    PyObject *words;  /* strong, with state 1 */
    PyObject *arrays; /* strong, with state 1 */
    PyObject *fill;   /* strong, with state 1 */
    int state;        /* 0 unknown, 1 numbered here, -1 by subscript */
} Numbering;

/* Drop the references nb took. */
MS_INTERNAL void ms_numbering_clear(Numbering *nb);
/* The number nb gives word (numbering it if new): a new reference, *out its value; NULL on
 * error. */
MS_INTERNAL PyObject *ms_word_number(Numbering *nb, PyObject *word, Py_ssize_t *out);
/* df[word] += count (a new word is appended to fresh). 0 or -1. */
MS_INTERNAL int ms_count_word(PyObject *df, PyObject *word, Py_ssize_t count, PyObject *fresh);
/* Append n to counts. 0 or -1. */
MS_INTERNAL int ms_append_count(PyObject *counts, Py_ssize_t n);

/* The module's functions, by file; each file's opening comment documents its own. */
/* _wordcount.c, _wordsplit.c: the lexicon's write loop (oracle: memstore/_wordbatch.py). */
MS_INTERNAL PyObject *memstore_count_docs(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_index_texts(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_split_ascii(PyObject *self, PyObject *text);
/* _lexrank.c: a lexical query's rank (oracle: memstore/_lexscore.py). */
MS_INTERNAL PyObject *memstore_lex_rank(PyObject *self, PyObject *args);
/* _editnear.c: a cold token's vocabulary search (oracle: memstore/_editnear.py). */
MS_INTERNAL PyObject *memstore_neighbour_sets(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_edits(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_substring_words(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_key_words(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_fuzzy_words(PyObject *self, PyObject *args);
/* _joined.c: the documents holding a pair of words (oracle: memstore/lexical.py). */
MS_INTERNAL PyObject *memstore_holding(PyObject *self, PyObject *args);
MS_INTERNAL PyObject *memstore_joined_slots(PyObject *self, PyObject *args);
/* _itemwrite.c: a durable write's per-item check and journal row (oracles:
 * memstore/_plainitem.py, memstore/journal/version.py). */
MS_INTERNAL PyObject *memstore_plain_item(PyObject *self, PyObject *const *args,
                                          Py_ssize_t nargs);
MS_INTERNAL PyObject *memstore_row_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* _slots.c: ids and lexicon slots to snapshot slots (oracles: memstore/_lexhits.py,
 * memstore/search/_lean.py). */
MS_INTERNAL PyObject *memstore_slot_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
MS_INTERNAL PyObject *memstore_slots_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* _leantop.c: the lean fusion's best candidates (oracle: memstore/search/_lean.py). */
MS_INTERNAL PyObject *memstore_lean_top(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* _bestlevels.c: a cold query token's matches merged (oracle: memstore/_tokenmatch.py). */
MS_INTERNAL PyObject *memstore_best_levels(PyObject *self, PyObject *const *args,
                                           Py_ssize_t nargs);

#endif /* MEMSTORE_SPEEDUPS_H */
