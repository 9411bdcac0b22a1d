/* memstore._speedups.count_docs: the lexicon's hottest write loop, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c). Without it (or with
 * MEMSTORE_PURE_PYTHON=1) memstore/_wordbatch.py runs the same loop in Python, and that
 * Python loop is the oracle a differential test holds this one to.
 *
 * count_docs(docs, df, content_wid, content_ids, content_counts,
 *            title_wid, title_ids, title_counts) -> list[str]
 *
 * For each document (id, title_words, content_words) of ``docs``, in order:
 * its distinct words (title first) are counted into ``df`` (word -> documents),
 * numbered through ``content_wid`` (a dict whose missing keys a subscript
 * numbers: memstore._postings._WordNumbers, whose numbering this loop does
 * itself, without the __missing__ frame: see Numbering), their numbers appended to
 * ``content_ids`` and their count to ``content_counts``; the distinct title
 * words go the same way through ``title_wid`` into ``title_ids`` and
 * ``title_counts``. Returns the words new to ``df``, in the order they were
 * added to it. The Python loop builds a set per document and counts every
 * document's words into df; here the batch's words are told apart by their
 * numbers, in one open-addressing table of integers that also counts the
 * documents holding each, so no set is made and df is written once per
 * distinct word of the batch, not once per document holding it.
 *
 * Every argument's type is checked, and every word is checked to be a str,
 * before anything is changed: bad input raises TypeError and changes nothing.
 * What can only fail midway (a word number that is no int >= 0, an error
 * raised by a numbering __missing__, MemoryError) raises with part of the
 * batch logged and df not yet written: such errors leave the Python loop
 * half done too.
 */
#include "_speedups.h"

/* The batch's distinct words: a table of entries keyed by word number (open
 * addressing over entry indexes, -1 empty), the entries in first-seen order. */
typedef struct {
    Py_ssize_t id;       /* the word's number in the content postings */
    Py_ssize_t count;    /* documents of the batch holding it */
    Py_ssize_t last_doc; /* the last of them (a repeat within a document counts once) */
    PyObject *word;      /* a strong reference */
} Entry;

typedef struct {
    Py_ssize_t *table;
    Py_ssize_t mask; /* table capacity - 1; the capacity is a power of two */
    Entry *entries;
    Py_ssize_t n, cap;
} Batch;

static Py_ssize_t
id_hash(Py_ssize_t id, Py_ssize_t mask)
{
    return (Py_ssize_t)(((uint64_t)id * 0x9E3779B97F4A7C15ULL) >> 17) & mask;
}

/* (Re)build the table for room for cap entries (at most half full). 0, or -1 with MemoryError. */
static int
batch_grow(Batch *b, Py_ssize_t cap)
{
    Py_ssize_t size = 16;
    while (size < 2 * cap) {
        if (size > PY_SSIZE_T_MAX / 4 / (Py_ssize_t)sizeof(Entry)) {
            PyErr_NoMemory();
            return -1;
        }
        size *= 2;
    }
    Entry *entries = PyMem_Realloc(b->entries, (size_t)cap * sizeof(Entry));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->entries = entries;
    b->cap = cap;
    Py_ssize_t *table = PyMem_Realloc(b->table, (size_t)size * sizeof(Py_ssize_t));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(table, 0xff, (size_t)size * sizeof(Py_ssize_t)); /* every slot -1 */
    b->table = table;
    b->mask = size - 1;
    for (Py_ssize_t e = 0; e < b->n; e++) {
        Py_ssize_t i = id_hash(entries[e].id, b->mask);
        while (table[i] != -1) {
            i = (i + 1) & b->mask;
        }
        table[i] = e;
    }
    return 0;
}

static void
batch_free(Batch *b)
{
    for (Py_ssize_t e = 0; e < b->n; e++) {
        Py_DECREF(b->entries[e].word);
    }
    PyMem_Free(b->entries);
    PyMem_Free(b->table);
}

/* The entry of word number id, made (for word) if new; NULL with MemoryError. */
static Entry *
batch_entry(Batch *b, Py_ssize_t id, PyObject *word)
{
    Py_ssize_t i = id_hash(id, b->mask);
    while (b->table[i] != -1) {
        Entry *e = &b->entries[b->table[i]];
        if (e->id == id) {
            return e;
        }
        i = (i + 1) & b->mask;
    }
    if (b->n == b->cap) { /* full: twice the room */
        if (batch_grow(b, 2 * b->cap) < 0) {
            return NULL;
        }
        return batch_entry(b, id, word);
    }
    Entry *e = &b->entries[b->n];
    e->id = id;
    e->count = 0;
    e->last_doc = -1;
    e->word = word;
    Py_INCREF(word);
    b->table[i] = b->n++;
    return e;
}

/* The word numbering (Numbering, in _speedups.h) that index_texts (_wordsplit.c) shares. */

void
ms_numbering_clear(Numbering *nb)
{
    Py_CLEAR(nb->words);
    Py_CLEAR(nb->arrays);
    Py_CLEAR(nb->fill);
}

/* Read nb->wid's _numbering once. 0, or -1 with an exception. */
static int
numbering_read(Numbering *nb)
{
    nb->state = -1;
    if (PyDict_CheckExact(nb->wid)) {
        return 0;
    }
    PyObject *how = PyObject_GetAttrString(nb->wid, "_numbering");
    if (how == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    if (PyTuple_Check(how) && PyTuple_GET_SIZE(how) == 3 &&
        PyList_CheckExact(PyTuple_GET_ITEM(how, 0)) &&
        PyList_CheckExact(PyTuple_GET_ITEM(how, 1))) {
        nb->words = Py_NewRef(PyTuple_GET_ITEM(how, 0));
        nb->arrays = Py_NewRef(PyTuple_GET_ITEM(how, 1));
        nb->fill = Py_NewRef(PyTuple_GET_ITEM(how, 2));
        nb->state = 1;
    }
    Py_DECREF(how);
    return 0;
}

/* The number nb gives word (numbering it if new): a new reference, *out its value; NULL on error. */
PyObject *
ms_word_number(Numbering *nb, PyObject *word, Py_ssize_t *out)
{
    PyObject *wid = nb->wid;
    PyObject *num = PyDict_GetItemWithError(wid, word); /* borrowed */
    if (num != NULL) {
        Py_INCREF(num);
    }
    else if (PyErr_Occurred()) {
        return NULL;
    }
    else {
        if (nb->state == 0 && numbering_read(nb) < 0) {
            return NULL;
        }
        if (nb->state == 1) { /* _WordNumbers.__missing__, without its frame */
            num = PyLong_FromSsize_t(PyList_GET_SIZE(nb->words));
            if (num == NULL || PyDict_SetItem(wid, word, num) < 0 ||
                PyList_Append(nb->words, word) < 0 || PyList_Append(nb->arrays, nb->fill) < 0) {
                Py_XDECREF(num);
                return NULL;
            }
        }
        else {
            num = PyObject_GetItem(wid, word); /* the dict's __missing__ numbers it */
            if (num == NULL) {
                return NULL;
            }
        }
    }
    Py_ssize_t n = PyLong_Check(num) ? PyLong_AsSsize_t(num) : -1;
    if (n < 0) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "a word number must be an int >= 0, got %R", num);
        }
        Py_DECREF(num);
        return NULL;
    }
    *out = n;
    return num;
}

/* word's number appended to ids. 0 or -1. */
static int
log_word(Numbering *wid, PyObject *word, PyObject *ids)
{
    Py_ssize_t n;
    PyObject *num = ms_word_number(wid, word, &n);
    if (num == NULL) {
        return -1;
    }
    int rc = PyList_Append(ids, num);
    Py_DECREF(num);
    return rc;
}

/* df[word] += count (a new word is appended to fresh). 0 or -1. */
int
ms_count_word(PyObject *df, PyObject *word, Py_ssize_t count, PyObject *fresh)
{
    PyObject *old = PyDict_GetItemWithError(df, word); /* borrowed */
    Py_ssize_t n = 0;
    if (old != NULL) {
        n = PyLong_AsSsize_t(old);
        if (n == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    else if (PyErr_Occurred()) {
        return -1;
    }
    else if (PyList_Append(fresh, word) < 0) {
        return -1;
    }
    PyObject *v = PyLong_FromSsize_t(n + count);
    if (v == NULL) {
        return -1;
    }
    int rc = PyDict_SetItem(df, word, v);
    Py_DECREF(v);
    return rc;
}

/* Append n to counts. 0 or -1. */
int
ms_append_count(PyObject *counts, Py_ssize_t n)
{
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL) {
        return -1;
    }
    int rc = PyList_Append(counts, v);
    Py_DECREF(v);
    return rc;
}

/* docs[i] checked: a 3-tuple whose last two items are lists of str. */
static int
check_doc(PyObject *doc, Py_ssize_t i)
{
    if (!PyTuple_Check(doc) || PyTuple_GET_SIZE(doc) != 3) {
        PyErr_Format(PyExc_TypeError,
                     "docs[%zd] must be an (id, title_words, content_words) tuple", i);
        return -1;
    }
    for (Py_ssize_t part = 1; part < 3; part++) {
        PyObject *ws = PyTuple_GET_ITEM(doc, part);
        if (!PyList_Check(ws)) {
            PyErr_Format(PyExc_TypeError, "docs[%zd][%zd] must be a list of words, not %.100s",
                         i, part, Py_TYPE(ws)->tp_name);
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ws); k++) {
            PyObject *w = PyList_GET_ITEM(ws, k);
            if (!PyUnicode_Check(w)) {
                PyErr_Format(PyExc_TypeError, "docs[%zd][%zd][%zd] must be a str, not %.100s",
                             i, part, k, Py_TYPE(w)->tp_name);
                return -1;
            }
        }
    }
    return 0;
}

/* One part (title or content words) of document doc; see count_docs. 0 or -1. */
static int
count_part(PyObject *ws, int is_title, Py_ssize_t doc, Batch *batch, Numbering *cwid,
           PyObject *cids, Numbering *twid, PyObject *tids, Py_ssize_t *ccount,
           Py_ssize_t *tcount)
{
    /* The size is read again each turn: a __missing__ may (perversely) change the list. */
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ws); k++) {
        PyObject *w = PyList_GET_ITEM(ws, k);
        if (!PyUnicode_Check(w)) { /* put there by such a __missing__ */
            PyErr_SetString(PyExc_TypeError, "a word list changed while it was counted");
            return -1;
        }
        Py_INCREF(w);
        Py_ssize_t cid;
        int rc = -1;
        PyObject *num = ms_word_number(cwid, w, &cid);
        if (num != NULL) {
            Entry *e = batch_entry(batch, cid, w);
            rc = e == NULL ? -1 : 0;
            if (e != NULL && e->last_doc != doc) { /* first in this document */
                e->last_doc = doc;
                e->count++;
                (*ccount)++;
                rc = PyList_Append(cids, num);
                if (rc == 0 && is_title) {
                    (*tcount)++;
                    rc = log_word(twid, w, tids);
                }
            }
            Py_DECREF(num);
        }
        Py_DECREF(w);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

PyObject *
memstore_count_docs(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *docs, *df, *cwid, *cids, *ccounts, *twid, *tids, *tcounts;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!:count_docs", &PyList_Type, &docs,
                          &PyDict_Type, &df, &PyDict_Type, &cwid, &PyList_Type, &cids,
                          &PyList_Type, &ccounts, &PyDict_Type, &twid, &PyList_Type, &tids,
                          &PyList_Type, &tcounts)) {
        return NULL;
    }
    Py_ssize_t ndocs = PyList_GET_SIZE(docs), total = 0;
    for (Py_ssize_t i = 0; i < ndocs; i++) {
        PyObject *doc = PyList_GET_ITEM(docs, i);
        if (check_doc(doc, i) < 0) {
            return NULL;
        }
        total += PyList_GET_SIZE(PyTuple_GET_ITEM(doc, 1)) +
                 PyList_GET_SIZE(PyTuple_GET_ITEM(doc, 2));
    }
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL) {
        return NULL;
    }
    /* The docs list is held as a snapshot: a __missing__ cannot pull a document away. */
    PyObject *held = PyList_GetSlice(docs, 0, ndocs);
    Batch batch = {NULL, 0, NULL, 0, 0};
    Numbering cnb = {cwid, NULL, NULL, NULL, 0}, tnb = {twid, NULL, NULL, NULL, 0};
    /* Sized for a few hundred distinct words and doubled as needed: a batch
     * repeats its words, and a small table stays in the cache. */
    if (held == NULL || batch_grow(&batch, total < 512 ? total + 1 : 512) < 0) {
        goto error;
    }
    /* Each document's words numbered and logged, the batch's counted per word... */
    for (Py_ssize_t i = 0; i < ndocs; i++) {
        PyObject *doc = PyList_GET_ITEM(held, i);
        Py_ssize_t ccount = 0, tcount = 0;
        if (count_part(PyTuple_GET_ITEM(doc, 1), 1, i, &batch, &cnb, cids, &tnb, tids, &ccount,
                       &tcount) < 0 ||
            count_part(PyTuple_GET_ITEM(doc, 2), 0, i, &batch, &cnb, cids, &tnb, tids, &ccount,
                       &tcount) < 0 ||
            ms_append_count(ccounts, ccount) < 0 || ms_append_count(tcounts, tcount) < 0) {
            goto error;
        }
    }
    /* ...then each word's count added to df once (a batch repeats common words). */
    for (Py_ssize_t e = 0; e < batch.n; e++) {
        if (ms_count_word(df, batch.entries[e].word, batch.entries[e].count, fresh) < 0) {
            goto error;
        }
    }
    batch_free(&batch);
    ms_numbering_clear(&cnb);
    ms_numbering_clear(&tnb);
    Py_DECREF(held);
    return fresh;
error:
    batch_free(&batch);
    ms_numbering_clear(&cnb);
    ms_numbering_clear(&tnb);
    Py_XDECREF(held);
    Py_DECREF(fresh);
    return NULL;
}
