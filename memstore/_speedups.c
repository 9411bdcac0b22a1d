/* memstore._speedups: the lexicon's hottest write loop, and a lexical query's rank, compiled.
 *
 * Optional: memstore/_wordbatch.py runs the same loop in Python when this
 * module is not built (or MEMSTORE_PURE_PYTHON=1), and that Python loop is
 * the oracle a differential test holds this one to; memstore/_lexscore.py's
 * numpy rank is lex_rank's (at the end of this file).
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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static void
numbering_clear(Numbering *nb)
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
static PyObject *
word_number(Numbering *nb, PyObject *word, Py_ssize_t *out)
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
    PyObject *num = word_number(wid, word, &n);
    if (num == NULL) {
        return -1;
    }
    int rc = PyList_Append(ids, num);
    Py_DECREF(num);
    return rc;
}

/* df[word] += count (a new word is appended to fresh). 0 or -1. */
static int
count_word(PyObject *df, PyObject *word, Py_ssize_t count, PyObject *fresh)
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
static int
append_count(PyObject *counts, Py_ssize_t n)
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
        PyObject *num = word_number(cwid, w, &cid);
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

static PyObject *
count_docs(PyObject *self, PyObject *args)
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
            append_count(ccounts, ccount) < 0 || append_count(tcounts, tcount) < 0) {
            goto error;
        }
    }
    /* ...then each word's count added to df once (a batch repeats common words). */
    for (Py_ssize_t e = 0; e < batch.n; e++) {
        if (count_word(df, batch.entries[e].word, batch.entries[e].count, fresh) < 0) {
            goto error;
        }
    }
    batch_free(&batch);
    numbering_clear(&cnb);
    numbering_clear(&tnb);
    Py_DECREF(held);
    return fresh;
error:
    batch_free(&batch);
    numbering_clear(&cnb);
    numbering_clear(&tnb);
    Py_XDECREF(held);
    Py_DECREF(fresh);
    return NULL;
}

/* ------------------------------------------------------------------------
 * index_texts: a batch's ASCII texts split and counted in one pass.
 *
 * index_texts(docs, split, df, content_wid, content_ids, content_counts,
 *             title_wid, title_ids, title_counts)
 *     -> (fresh, texts, ntitles, words)
 *
 * Each document of ``docs`` is (id, title, content, extra): title and content
 * are a text (str) or its words (a list of str); extra is a list or tuple of
 * words appended to the content's. An ASCII text is split here by the rule of
 * memstore.text.words (split_ascii below); any other text by calling
 * ``split`` on it (memstore.text.words). The words are then counted and logged
 * as count_docs does, and each document's padded text (" w1 w2 ... ", title
 * first, "" with no words) and title word count are returned with the words
 * new to df and the batch's distinct words. A word is made a str once per
 * batch: the batch's table is keyed by the words' characters, so a word that
 * repeats across the batch's texts is looked up in the dictionaries once.
 *
 * The types are checked (and the non-ASCII texts split) before anything is
 * changed: bad input raises TypeError and changes nothing. Errors that can
 * only come midway (a numbering __missing__, MemoryError) leave part of the
 * batch logged, as count_docs.
 */

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define IS_UPPER(c) ((c) >= 'A' && (c) <= 'Z')
#define IS_JOIN(c) ((c) == '.' || (c) == ':')

/* The CamelCase class of an ASCII character: 'a' lower-case, 'd' digit, 'U' upper-case, 0. */
static int
char_class(unsigned char c)
{
    return IS_LOWER(c) ? 'a' : IS_DIGIT(c) ? 'd' : IS_UPPER(c) ? 'U' : 0;
}

static Py_ssize_t
digits_end(const char *b, Py_ssize_t i, Py_ssize_t m)
{
    while (i < m && IS_DIGIT(b[i])) {
        i++;
    }
    return i;
}

static Py_ssize_t
lowers_end(const char *b, Py_ssize_t i, Py_ssize_t m)
{
    while (i < m && IS_LOWER(b[i])) {
        i++;
    }
    return i;
}

/* Fold ASCII s (n characters) into buf (room 2n): a space at each CamelCase split point
 * (before an upper-case letter after a lower-case one or a digit, and between two
 * upper-case letters followed by a lower-case one: memstore.text._camel_cuts), letters
 * lowered, digits, "." and ":" kept, anything else a space. Returns the length. */
static Py_ssize_t
fold_ascii(const unsigned char *s, Py_ssize_t n, char *buf)
{
    Py_ssize_t m = 0;
    int prev = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        int cls = char_class(c);
        if (cls == 'U' && (prev == 'a' || prev == 'd' ||
                           (prev == 'U' && i + 1 < n && char_class(s[i + 1]) == 'a'))) {
            buf[m++] = ' ';
        }
        buf[m++] = cls == 'U' ? (char)(c + 32) : (cls || IS_JOIN(c)) ? (char)c : ' ';
        prev = cls;
    }
    return m;
}

/* The words of folded text b (m characters) as [start, end) pairs into spans (room m + 2
 * pairs); returns their number. The rule of memstore.text._ASCII_WORD, read left to right:
 * digits joined by "." or ":" to digits ("1.2.3", "9:30"); else digits then letters, then
 * runs of digits (not followed by a join and a digit) each with the letters after them
 * ("3am", "ab12cd"); else digits alone. */
static Py_ssize_t
ascii_words(const char *b, Py_ssize_t m, Py_ssize_t *spans)
{
    Py_ssize_t i = 0, nw = 0;
    while (i < m) {
        Py_ssize_t start = i;
        if (IS_DIGIT(b[i])) {
            Py_ssize_t j = digits_end(b, i, m);
            if (j + 1 < m && IS_JOIN(b[j]) && IS_DIGIT(b[j + 1])) {
                while (j + 1 < m && IS_JOIN(b[j]) && IS_DIGIT(b[j + 1])) {
                    j = digits_end(b, j + 1, m);
                }
                spans[2 * nw] = start;
                spans[2 * nw + 1] = j;
                nw++;
                i = j;
                continue;
            }
            if (j >= m || !IS_LOWER(b[j])) {
                spans[2 * nw] = start;
                spans[2 * nw + 1] = j;
                nw++;
                i = j;
                continue;
            }
            i = j;
        }
        else if (!IS_LOWER(b[i])) {
            i++;
            continue;
        }
        i = lowers_end(b, i, m);
        while (i < m && IS_DIGIT(b[i])) {
            Py_ssize_t j = digits_end(b, i, m);
            if (j + 1 < m && IS_JOIN(b[j]) && IS_DIGIT(b[j + 1])) {
                break;
            }
            i = lowers_end(b, j, m);
        }
        spans[2 * nw] = start;
        spans[2 * nw + 1] = i;
        nw++;
    }
    return nw;
}

/* A growable byte buffer. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t need)
{
    if (need <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* The batch's distinct words, keyed by their characters: a table of entry indexes
 * (open addressing, -1 empty), the entries in first-seen order. */
typedef struct {
    uint64_t hash;
    PyObject *word;  /* strong */
    PyObject *num;   /* strong: its number in the content postings */
    PyObject *tnum;  /* strong, or NULL until it is first in a title */
    Py_ssize_t count;    /* documents of the batch holding it */
    Py_ssize_t last_doc; /* the last of them (a repeat within a document counts once) */
} WEntry;

typedef struct {
    Py_ssize_t *table;
    Py_ssize_t mask;
    WEntry *entries;
    Py_ssize_t n, cap;
} Words;

static uint64_t
chars_hash(int kind, const unsigned char *p, Py_ssize_t nbytes)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)kind;
    for (Py_ssize_t i = 0; i < nbytes; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h ^ (h >> 29);
}

static int
words_grow(Words *w, Py_ssize_t cap)
{
    Py_ssize_t size = 16;
    while (size < 2 * cap) {
        if (size > PY_SSIZE_T_MAX / 4 / (Py_ssize_t)sizeof(WEntry)) {
            PyErr_NoMemory();
            return -1;
        }
        size *= 2;
    }
    WEntry *entries = PyMem_Realloc(w->entries, (size_t)cap * sizeof(WEntry));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->entries = entries;
    w->cap = cap;
    Py_ssize_t *table = PyMem_Realloc(w->table, (size_t)size * sizeof(Py_ssize_t));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(table, 0xff, (size_t)size * sizeof(Py_ssize_t));
    w->table = table;
    w->mask = size - 1;
    for (Py_ssize_t e = 0; e < w->n; e++) {
        Py_ssize_t i = (Py_ssize_t)(entries[e].hash & (uint64_t)w->mask);
        while (table[i] != -1) {
            i = (i + 1) & w->mask;
        }
        table[i] = e;
    }
    return 0;
}

static void
words_free(Words *w)
{
    for (Py_ssize_t e = 0; e < w->n; e++) {
        Py_DECREF(w->entries[e].word);
        Py_DECREF(w->entries[e].num);
        Py_XDECREF(w->entries[e].tnum);
    }
    PyMem_Free(w->entries);
    PyMem_Free(w->table);
}

/* What one call works with. */
typedef struct {
    Words words;
    Numbering cwid, twid;
    PyObject *cids, *tids;
    Py_ssize_t doc;          /* the document being counted */
    Py_ssize_t ccount, tcount; /* its distinct words, its distinct title words */
} Tally;

/* Count one word of document c->doc (its characters, and the str when there is one: else
 * it is made from the ASCII characters); its entry index, or -1 with an exception. */
static Py_ssize_t
count_word_chars(Tally *c, int is_title, int kind, const void *data, Py_ssize_t nbytes,
                 PyObject *str)
{
    Words *w = &c->words;
    uint64_t h = chars_hash(kind, data, nbytes);
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)w->mask), e;
    for (;;) {
        e = w->table[i];
        if (e == -1) {
            break;
        }
        WEntry *en = &w->entries[e];
        if (en->hash == h && PyUnicode_KIND(en->word) == kind &&
            PyUnicode_GET_LENGTH(en->word) * kind == nbytes &&
            memcmp(PyUnicode_DATA(en->word), data, (size_t)nbytes) == 0) {
            break;
        }
        i = (i + 1) & w->mask;
    }
    if (e == -1) { /* new to the batch: a str, numbered */
        if (w->n == w->cap) {
            if (words_grow(w, 2 * w->cap) < 0) {
                return -1;
            }
            i = (Py_ssize_t)(h & (uint64_t)w->mask);
            while (w->table[i] != -1) {
                i = (i + 1) & w->mask;
            }
        }
        if (str != NULL) {
            Py_INCREF(str);
        }
        else {
            str = PyUnicode_New(nbytes, 127);
            if (str == NULL) {
                return -1;
            }
            memcpy(PyUnicode_1BYTE_DATA(str), data, (size_t)nbytes);
        }
        Py_ssize_t n;
        PyObject *num = word_number(&c->cwid, str, &n);
        if (num == NULL) {
            Py_DECREF(str);
            return -1;
        }
        /* A __missing__ may have run Python code, but nothing of ours: i is still free. */
        e = w->n++;
        WEntry *en = &w->entries[e];
        en->hash = h;
        en->word = str;
        en->num = num;
        en->tnum = NULL;
        en->count = 0;
        en->last_doc = -1;
        w->table[i] = e;
    }
    WEntry *en = &w->entries[e];
    if (en->last_doc == c->doc) {
        return e;
    }
    en->last_doc = c->doc;
    en->count++;
    c->ccount++;
    if (PyList_Append(c->cids, en->num) < 0) {
        return -1;
    }
    if (is_title) {
        if (en->tnum == NULL) {
            Py_ssize_t n;
            PyObject *word = en->word;
            Py_INCREF(word);
            PyObject *tnum = word_number(&c->twid, word, &n);
            Py_DECREF(word);
            if (tnum == NULL) {
                return -1;
            }
            en = &c->words.entries[e];
            en->tnum = tnum;
        }
        c->tcount++;
        if (PyList_Append(c->tids, en->tnum) < 0) {
            return -1;
        }
    }
    return e;
}

/* A part is checked: an ASCII str, or a list or tuple of str (a list is copied to a tuple,
 * which no callback can change). Non-ASCII text is split by split. A new reference, or
 * NULL with TypeError. *ascii is cleared if a word may not be ASCII. */
static PyObject *
resolve_part(PyObject *part, int text_ok, PyObject *split, Py_ssize_t i, Py_ssize_t k,
             int *ascii)
{
    PyObject *ws;
    if (text_ok && PyUnicode_Check(part)) {
        if (PyUnicode_READY(part) < 0) {
            return NULL;
        }
        if (PyUnicode_IS_ASCII(part)) {
            Py_INCREF(part);
            return part;
        }
        ws = PyObject_CallOneArg(split, part);
        if (ws == NULL) {
            return NULL;
        }
        if (!PyList_Check(ws)) {
            PyErr_Format(PyExc_TypeError, "split must return a list of str, not %.100s",
                         Py_TYPE(ws)->tp_name);
            Py_DECREF(ws);
            return NULL;
        }
    }
    else if (PyList_Check(part) || PyTuple_Check(part)) {
        Py_INCREF(part);
        ws = part;
    }
    else {
        PyErr_Format(PyExc_TypeError, "docs[%zd][%zd] must be %s, not %.100s", i, k,
                     text_ok ? "a str or a list of words" : "a list or tuple of words",
                     Py_TYPE(part)->tp_name);
        return NULL;
    }
    PyObject *t = PySequence_Tuple(ws);
    Py_DECREF(ws);
    if (t == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        PyObject *w = PyTuple_GET_ITEM(t, j);
        if (!PyUnicode_Check(w)) {
            PyErr_Format(PyExc_TypeError, "docs[%zd][%zd][%zd] must be a str, not %.100s", i, k,
                         j, Py_TYPE(w)->tp_name);
            Py_DECREF(t);
            return NULL;
        }
        if (PyUnicode_READY(w) < 0) {
            Py_DECREF(t);
            return NULL;
        }
        if (!PyUnicode_IS_ASCII(w)) {
            *ascii = 0;
        }
    }
    return t;
}

/* Count one resolved part of document c->doc; its words' characters are appended to text
 * (each followed by a space) when text is not NULL, their str to list when list is not
 * NULL. Returns its number of words, or -1. */
static Py_ssize_t
count_part_texts(Tally *c, PyObject *part, int is_title, Buf *fold, Buf *spans, Buf *text,
                 PyObject *list)
{
    if (PyUnicode_Check(part)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(part);
        if (buf_reserve(fold, 2 * n + 1) < 0 ||
            buf_reserve(spans, (2 * n + 4) * (Py_ssize_t)sizeof(Py_ssize_t)) < 0) {
            return -1;
        }
        Py_ssize_t m = fold_ascii(PyUnicode_1BYTE_DATA(part), n, fold->p);
        Py_ssize_t *sp = (Py_ssize_t *)spans->p;
        Py_ssize_t nw = ascii_words(fold->p, m, sp);
        for (Py_ssize_t k = 0; k < nw; k++) {
            const char *at = fold->p + sp[2 * k];
            Py_ssize_t len = sp[2 * k + 1] - sp[2 * k];
            Py_ssize_t e = count_word_chars(c, is_title, 1, at, len, NULL);
            if (e < 0) {
                return -1;
            }
            if (text != NULL) {
                if (buf_reserve(text, text->len + len + 1) < 0) {
                    return -1;
                }
                memcpy(text->p + text->len, at, (size_t)len);
                text->len += len;
                text->p[text->len++] = ' ';
            }
            if (list != NULL && PyList_Append(list, c->words.entries[e].word) < 0) {
                return -1;
            }
        }
        return nw;
    }
    Py_ssize_t nw = PyTuple_GET_SIZE(part);
    for (Py_ssize_t k = 0; k < nw; k++) {
        PyObject *w = PyTuple_GET_ITEM(part, k);
        int kind = PyUnicode_KIND(w);
        Py_ssize_t len = PyUnicode_GET_LENGTH(w);
        if (count_word_chars(c, is_title, kind, PyUnicode_DATA(w), len * kind, w) < 0) {
            return -1;
        }
        if (text != NULL) {
            if (buf_reserve(text, text->len + len + 1) < 0) {
                return -1;
            }
            memcpy(text->p + text->len, PyUnicode_DATA(w), (size_t)len);
            text->len += len;
            text->p[text->len++] = ' ';
        }
        if (list != NULL && PyList_Append(list, w) < 0) {
            return -1;
        }
    }
    return nw;
}

/* The padded text of a document whose words are in list: " w1 w2 ... ", "" for none. */
static PyObject *
padded_join(PyObject *list)
{
    if (PyList_GET_SIZE(list) == 0) {
        return PyUnicode_New(0, 0);
    }
    PyObject *sep = PyUnicode_FromString(" ");
    if (sep == NULL) {
        return NULL;
    }
    PyObject *joined = PyUnicode_Join(sep, list);
    Py_DECREF(sep);
    if (joined == NULL) {
        return NULL;
    }
    PyObject *out = PyUnicode_FromFormat(" %U ", joined);
    Py_DECREF(joined);
    return out;
}

static PyObject *
index_texts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *docs, *split, *df, *cwid, *cids, *ccounts, *twid, *tids, *tcounts;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O!O!O!O!:index_texts", &PyList_Type, &docs, &split,
                          &PyDict_Type, &df, &PyDict_Type, &cwid, &PyList_Type, &cids,
                          &PyList_Type, &ccounts, &PyDict_Type, &twid, &PyList_Type, &tids,
                          &PyList_Type, &tcounts)) {
        return NULL;
    }
    if (!PyCallable_Check(split)) {
        PyErr_SetString(PyExc_TypeError, "split must be callable");
        return NULL;
    }
    Py_ssize_t ndocs = PyList_GET_SIZE(docs);
    PyObject *resolved = PyList_New(0); /* per document: (title, content, extra, ascii) */
    PyObject *fresh = NULL, *texts = NULL, *ntitles = NULL, *words = NULL, *result = NULL;
    Tally c = {{NULL, 0, NULL, 0, 0}, {cwid, NULL, NULL, NULL, 0}, {twid, NULL, NULL, NULL, 0},
               cids, tids, 0, 0, 0};
    Buf fold = {NULL, 0, 0}, spans = {NULL, 0, 0}, text = {NULL, 0, 0};
    if (resolved == NULL) {
        return NULL;
    }
    /* Every document checked (and its non-ASCII texts split) before anything changes. */
    for (Py_ssize_t i = 0; i < ndocs; i++) {
        PyObject *doc = PyList_GET_ITEM(docs, i);
        if (!PyTuple_Check(doc) || PyTuple_GET_SIZE(doc) != 4) {
            PyErr_Format(PyExc_TypeError,
                         "docs[%zd] must be an (id, title, content, extra) tuple", i);
            goto error;
        }
        int ascii = 1;
        PyObject *parts[3] = {NULL, NULL, NULL};
        for (Py_ssize_t k = 0; k < 3; k++) {
            parts[k] = resolve_part(PyTuple_GET_ITEM(doc, k + 1), k < 2, split, i, k + 1, &ascii);
            if (parts[k] == NULL) {
                Py_XDECREF(parts[0]);
                Py_XDECREF(parts[1]);
                goto error;
            }
        }
        PyObject *entry = Py_BuildValue("(NNNi)", parts[0], parts[1], parts[2], ascii);
        if (entry == NULL || PyList_Append(resolved, entry) < 0) {
            Py_XDECREF(entry);
            goto error;
        }
        Py_DECREF(entry);
    }
    fresh = PyList_New(0);
    texts = PyList_New(ndocs);
    ntitles = PyList_New(ndocs);
    if (fresh == NULL || texts == NULL || ntitles == NULL || words_grow(&c.words, ndocs < 16 ? 64 : ndocs < 1024 ? 4 * ndocs : 4096) < 0) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < ndocs; i++) {
        PyObject *entry = PyList_GET_ITEM(resolved, i);
        int ascii = PyLong_AsLong(PyTuple_GET_ITEM(entry, 3)) != 0;
        PyObject *list = ascii ? NULL : PyList_New(0);
        if (!ascii && list == NULL) {
            goto error;
        }
        c.doc = i;
        c.ccount = c.tcount = 0;
        text.len = 0;
        Py_ssize_t nt = -1, total = 0;
        if (buf_reserve(&text, 1) == 0) {
            text.p[text.len++] = ' ';
            nt = count_part_texts(&c, PyTuple_GET_ITEM(entry, 0), 1, &fold, &spans,
                                  ascii ? &text : NULL, list);
        }
        for (Py_ssize_t k = 1; k < 3 && nt >= 0 && total >= 0; k++) {
            Py_ssize_t got = count_part_texts(&c, PyTuple_GET_ITEM(entry, k), 0, &fold, &spans,
                                              ascii ? &text : NULL, list);
            total = got < 0 ? -1 : total + got;
        }
        PyObject *padded = NULL, *count = NULL;
        if (nt >= 0 && total >= 0 && append_count(ccounts, c.ccount) == 0 &&
            append_count(tcounts, c.tcount) == 0) {
            if (!ascii) {
                padded = padded_join(list);
            }
            else if (nt + total == 0) {
                padded = PyUnicode_New(0, 0);
            }
            else {
                padded = PyUnicode_New(text.len, 127);
                if (padded != NULL) {
                    memcpy(PyUnicode_1BYTE_DATA(padded), text.p, (size_t)text.len);
                }
            }
            count = PyLong_FromSsize_t(nt);
        }
        Py_XDECREF(list);
        if (padded == NULL || count == NULL) {
            Py_XDECREF(padded);
            Py_XDECREF(count);
            goto error;
        }
        PyList_SET_ITEM(texts, i, padded);
        PyList_SET_ITEM(ntitles, i, count);
    }
    words = PyList_New(c.words.n);
    if (words == NULL) {
        goto error;
    }
    for (Py_ssize_t e = 0; e < c.words.n; e++) {
        WEntry *en = &c.words.entries[e];
        Py_INCREF(en->word);
        PyList_SET_ITEM(words, e, en->word);
        if (count_word(df, en->word, en->count, fresh) < 0) {
            goto error;
        }
    }
    result = PyTuple_Pack(4, fresh, texts, ntitles, words);
error:
    words_free(&c.words);
    numbering_clear(&c.cwid);
    numbering_clear(&c.twid);
    PyMem_Free(fold.p);
    PyMem_Free(spans.p);
    PyMem_Free(text.p);
    Py_DECREF(resolved);
    Py_XDECREF(fresh);
    Py_XDECREF(texts);
    Py_XDECREF(ntitles);
    Py_XDECREF(words);
    return result;
}

/* split_ascii(text) -> list[str]: the words of ASCII text (memstore.text.words' rule), for
 * the tests that hold this splitter to it. */
static PyObject *
split_ascii(PyObject *self, PyObject *text)
{
    (void)self;
    if (!PyUnicode_Check(text) || PyUnicode_READY(text) < 0 || !PyUnicode_IS_ASCII(text)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "split_ascii takes an ASCII str");
        }
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    char *buf = PyMem_Malloc((size_t)(2 * n + 1));
    Py_ssize_t *spans = PyMem_Malloc((size_t)(2 * n + 4) * sizeof(Py_ssize_t));
    PyObject *out = NULL;
    if (buf == NULL || spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = fold_ascii(PyUnicode_1BYTE_DATA(text), n, buf);
    Py_ssize_t nw = ascii_words(buf, m, spans);
    out = PyList_New(nw);
    for (Py_ssize_t k = 0; out != NULL && k < nw; k++) {
        PyObject *w = PyUnicode_FromStringAndSize(buf + spans[2 * k], spans[2 * k + 1] - spans[2 * k]);
        if (w == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, w);
    }
done:
    PyMem_Free(buf);
    PyMem_Free(spans);
    return out;
}


/* ------------------------------------------------------------------ lexical rank
 *
 * lex_rank(tokens, denom, title_weight, exact_level, cols, kind, subject, partition, hidden,
 *          now_ts, limit, ids, hit_type[, how]) -> None | NotImplemented | (hits, ids, scores)
 *
 * hit_type None: the hits as columns instead (rank_columns, after this function).
 *
 * how (RANK_AUTO, RANK_MERGE, RANK_DENSE: 0, 1, 2) picks how the matches are summed: by a
 * k-way merge of the tokens' slots, or in one accumulator per slot (what the lexicon's
 * small dense slots make cheap); 0, the default, picks by the slots' span. Both give the
 * same answer (tests/test_lexrank_compiled.py runs each against numpy).
 *
 * memstore/_lexscore.py's rank_native documents it; the numpy path of
 * memstore._lexindex.LexicalIndex.rank is the oracle (tests/test_lexical_differential.py).
 * The sums, the filters, the scores, the cut and the order run without the GIL (when the
 * matches are many enough: NOGIL_MATCHES), on buffers held for the call.
 */

/* The scores must be numpy's bit for bit: w * level rounded, then added (numpy makes the
 * products an array first). A fused multiply-add (GCC fuses across statements by default
 * where the target has one, clang within an expression) would round once instead. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#define NO_FP_CONTRACT
#elif defined(__GNUC__)
#define NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define NO_FP_CONTRACT /* MSVC contracts only under /fp:fast or /fp:contract */
#endif

/* Below these sizes a call keeps the GIL: handing it to another thread and taking it back
 * (two thread switches when that thread wants it) would cost about what the work does. */
#define NOGIL_MATCHES 2048 /* lex_rank: matched entries over the query's tokens */
#define NOGIL_BYTES 32768  /* holding: characters of the texts tested */

typedef struct {
    const int64_t *slots;
    const double *levels;
    const int64_t *tslots;
    const double *tlevels;
    Py_ssize_t n, tn, at, tat;
    double w;
} RankToken;

typedef struct {
    int64_t slot;
    double score, upd;
    int32_t covered;
    uint8_t fuzzy;
} RankCand;

/* Whether candidate a comes before b: score descending, update time descending, slot
 * ascending (numpy's stable lexsort over candidates in slot order). The slots are
 * distinct, so this is a total order: every sort of the candidates gives the one order. */
static inline int
cand_before(const RankCand *a, const RankCand *b)
{
    if (a->score != b->score) {
        return a->score > b->score;
    }
    if (a->upd != b->upd) {
        return a->upd > b->upd;
    }
    return a->slot < b->slot;
}

#define SORT_RUN 16 /* cand_sort: runs this long are sorted by insertion, then merged */

/* Sort v[0..n) by cand_before, through tmp (n entries): runs of SORT_RUN by insertion,
 * then merged bottom up. qsort did it with a call through a pointer per comparison and a
 * memcpy per move: that was most of a query's rank on LoCoMo's questions. */
static void
cand_sort(RankCand *v, Py_ssize_t n, RankCand *tmp)
{
    for (Py_ssize_t lo = 0; lo < n; lo += SORT_RUN) {
        Py_ssize_t hi = n - lo > SORT_RUN ? lo + SORT_RUN : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            RankCand x = v[i];
            Py_ssize_t j = i;
            while (j > lo && cand_before(&x, &v[j - 1])) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    }
    RankCand *src = v, *dst = tmp;
    for (Py_ssize_t w = SORT_RUN; w < n; w *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * w) {
            Py_ssize_t mid = n - lo > w ? lo + w : n;
            Py_ssize_t hi = n - mid > w ? mid + w : n;
            Py_ssize_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                dst[o++] = cand_before(&src[j], &src[i]) ? src[j++] : src[i++];
            }
            while (i < mid) {
                dst[o++] = src[i++];
            }
            while (j < hi) {
                dst[o++] = src[j++];
            }
        }
        RankCand *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) {
        memcpy(v, src, (size_t)n * sizeof *v);
    }
}

/* The k-th largest (k >= 1) of v[0..n) (reordered), ties counted: np.partition's value. */
static double
kth_largest(double *v, Py_ssize_t n, Py_ssize_t k)
{
    Py_ssize_t want = n - k, lo = 0, hi = n - 1; /* the want-th smallest */
    while (hi > lo) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi], pivot;
        if (a < b) {
            pivot = b < c ? b : (a < c ? c : a);
        }
        else {
            pivot = a < c ? a : (b < c ? c : b);
        }
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) {
                i++;
            }
            while (v[j] > pivot) {
                j--;
            }
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) {
            hi = j;
        }
        else if (want >= i) {
            lo = i;
        }
        else {
            return v[want];
        }
    }
    return v[want];
}

typedef struct {
    /* columns, one entry per slot (at least cap) */
    const double *stale, *updated;
    const int32_t *kind, *subject, *service, *part;
    const uint8_t *shared;
    Py_ssize_t cap;
    /* filters: a code, or INT64_MIN for none */
    int64_t kind_code, subject_code, part_code;
    const int64_t *hidden;
    Py_ssize_t nhidden;
    double now_ts, denom, title_weight, exact_level;
    Py_ssize_t limit; /* -1: every candidate */
} RankArgs;

#define RANK_NONE INT64_MIN

/* How rank_run sums the tokens' matches (lex_rank's last argument; the tests run both). */
#define RANK_AUTO 0  /* RANK_DENSE when the slots are dense enough (DENSE_SPAN), else merge */
#define RANK_MERGE 1 /* a k-way merge of the tokens' sorted slots: O(slots x tokens) */
#define RANK_DENSE 2 /* an accumulator per slot up to the highest matched: O(matches) */
#define DENSE_SPAN 16       /* RANK_AUTO: dense when the slots span at most this many per match, */
#define DENSE_MIN_SPAN 4096 /* or at most this many (its byte per slot is cleared, not touched) */

/* Whether slot s passes the filters: deadline, kind (or the hidden kinds), subject, partition. */
static inline int
rank_keeps(const RankArgs *a, int64_t s)
{
    if (!(a->stale[s] > a->now_ts)) {
        return 0;
    }
    if (a->kind_code != RANK_NONE) {
        if (a->kind[s] != a->kind_code) {
            return 0;
        }
    }
    else {
        int hidden = 0;
        for (Py_ssize_t h = 0; h < a->nhidden; h++) {
            hidden |= a->kind[s] == a->hidden[h];
        }
        if (hidden) {
            return 0;
        }
    }
    if (a->subject_code != RANK_NONE && a->subject[s] != a->subject_code &&
        a->service[s] != a->subject_code) {
        return 0;
    }
    if (a->part_code != RANK_NONE && a->part[s] != a->part_code && a->part[s] != 0 &&
        !a->shared[s]) {
        return 0;
    }
    return 1;
}

/* Slot s's sums as cand[(*n)++], unless its sum is zero (a zero weight) or a filter drops it. */
NO_FP_CONTRACT
static inline void
rank_emit(const RankArgs *a, RankCand *cand, Py_ssize_t *n, int64_t s, double acc, double title,
          int32_t covered, uint8_t fuzzy)
{
    if (acc == 0.0 || !rank_keeps(a, s)) {
        return;
    }
    double tw = a->title_weight * title;
    RankCand *c = &cand[(*n)++];
    c->slot = s;
    c->score = (acc + tw) / a->denom;
    c->upd = a->updated[s];
    c->covered = covered;
    c->fuzzy = fuzzy;
}

/* RANK_MERGE: the candidates, in slot order, into cand; their number, or -2 (a token's
 * slots not increasing, or out of range). */
NO_FP_CONTRACT
static Py_ssize_t
rank_merge(RankToken *tok, Py_ssize_t k, const RankArgs *a, RankCand *cand)
{
    Py_ssize_t n = 0;
    int64_t last = -1;
    for (;;) {
        /* the smallest head slot over the tokens */
        int64_t s = INT64_MAX;
        for (Py_ssize_t t = 0; t < k; t++) {
            if (tok[t].at < tok[t].n && tok[t].slots[tok[t].at] < s) {
                s = tok[t].slots[tok[t].at];
            }
        }
        if (s == INT64_MAX) {
            break;
        }
        if (s <= last || s < 0 || s >= a->cap) {
            return -2;
        }
        last = s;
        double acc = 0.0, title = 0.0;
        int32_t covered = 0;
        uint8_t fuzzy = 0;
        for (Py_ssize_t t = 0; t < k; t++) { /* summed in token order, as np.bincount does */
            RankToken *r = &tok[t];
            if (r->at < r->n && r->slots[r->at] == s) {
                double lv = r->levels[r->at++];
                acc += r->w * lv;
                if (lv >= a->exact_level) {
                    covered++;
                }
                else {
                    fuzzy = 1;
                }
                while (r->tat < r->tn && r->tslots[r->tat] < s) {
                    r->tat++;
                }
                if (r->tat < r->tn && r->tslots[r->tat] == s) {
                    title += r->w * r->tlevels[r->tat++];
                }
            }
        }
        rank_emit(a, cand, &n, s, acc, title, covered, fuzzy);
    }
    return n;
}

typedef struct {
    double acc, title;
    int32_t covered;
    uint8_t fuzzy;
} RankSum;

/* RANK_DENSE: rank_merge's candidates (in the order first matched, not by slot: the order
 * the caller sorts them in is total), from one pass over each token's matches into a sum
 * per slot below hi. Each slot's sums take the tokens' terms in token order, as the merge
 * adds them, so they are the same bit for bit; a token's title matches count where the
 * token matches, found by the merge's own walk. The number of candidates, -1 (out of
 * memory) or -2 (a token's slots not increasing, or not below hi). */
NO_FP_CONTRACT
static Py_ssize_t
rank_dense(const RankToken *tok, Py_ssize_t k, const RankArgs *a, Py_ssize_t hi, RankCand *cand)
{
    RankSum *sum = malloc((size_t)hi * sizeof *sum); /* read only where seen */
    uint8_t *seen = calloc((size_t)hi, 1);
    if (sum == NULL || seen == NULL) {
        free(sum);
        free(seen);
        return -1;
    }
    Py_ssize_t found = 0; /* the slots first seen go to cand[..].slot, in order */
    for (Py_ssize_t t = 0; t < k; t++) {
        const RankToken *r = &tok[t];
        const double w = r->w;
        Py_ssize_t tat = 0;
        int64_t prev = -1;
        for (Py_ssize_t i = 0; i < r->n; i++) {
            int64_t s = r->slots[i];
            if (s <= prev || s >= hi) {
                free(sum);
                free(seen);
                return -2;
            }
            prev = s;
            RankSum *x = &sum[s];
            if (!seen[s]) {
                seen[s] = 1;
                x->acc = 0.0;
                x->title = 0.0;
                x->covered = 0;
                x->fuzzy = 0;
                cand[found++].slot = s;
            }
            double lv = r->levels[i];
            x->acc += w * lv;
            if (lv >= a->exact_level) {
                x->covered++;
            }
            else {
                x->fuzzy = 1;
            }
            while (tat < r->tn && r->tslots[tat] < s) {
                tat++;
            }
            if (tat < r->tn && r->tslots[tat] == s) {
                x->title += w * r->tlevels[tat++];
            }
        }
    }
    Py_ssize_t n = 0; /* n <= i: each candidate is written over a slot already read */
    for (Py_ssize_t i = 0; i < found; i++) {
        int64_t s = cand[i].slot;
        const RankSum *x = &sum[s];
        rank_emit(a, cand, &n, s, x->acc, x->title, x->covered, x->fuzzy);
    }
    free(sum);
    free(seen);
    return n;
}

/* The work without the GIL. Returns the number of ordered candidates in *out (malloc'd),
 * *need the cut, *tied whether a tie on (score, update) reaches into the cut;
 * -1: out of memory; -2: a token's slots are not increasing or out of range. */
static Py_ssize_t
rank_run(RankToken *tok, Py_ssize_t k, const RankArgs *a, int how, RankCand **out,
         Py_ssize_t *need, int *tied)
{
    Py_ssize_t total = 0, hi = 0;
    for (Py_ssize_t t = 0; t < k; t++) {
        total += tok[t].n;
        if (tok[t].n) { /* the last slot is the highest, if they increase (else -2 below) */
            int64_t last = tok[t].slots[tok[t].n - 1];
            Py_ssize_t end = last < 0 ? 0 : (last >= a->cap ? a->cap : (Py_ssize_t)last + 1);
            hi = end > hi ? end : hi;
        }
    }
    RankCand *cand = malloc((size_t)(total ? total : 1) * sizeof(RankCand));
    if (cand == NULL) {
        return -1;
    }
    if (how == RANK_AUTO) {
        how = k > 1 && (hi <= DENSE_MIN_SPAN || hi / DENSE_SPAN <= total) ? RANK_DENSE : RANK_MERGE;
    }
    Py_ssize_t n = how == RANK_DENSE ? rank_dense(tok, k, a, hi ? hi : 1, cand)
                                     : rank_merge(tok, k, a, cand);
    if (n < 0) {
        free(cand);
        return n;
    }
    Py_ssize_t m = n;
    if (a->limit >= 0 && n > a->limit && a->limit > 0) {
        double *v = malloc((size_t)n * sizeof(double));
        if (v == NULL) {
            free(cand);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            v[i] = cand[i].score;
        }
        double kth = kth_largest(v, n, a->limit);
        /* Every candidate scored above kth is in, and of those at kth, the ones updated
         * at least as recently as the one the cut falls on (the (limit - above)-th most
         * recent of them, ties counted): the others come after all of these in the order,
         * so they are no hit and break no tie the cut reaches. */
        Py_ssize_t above = 0, at = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (cand[i].score > kth) {
                above++;
            }
            else if (cand[i].score == kth) {
                v[at++] = cand[i].upd;
            }
        }
        int by_upd = above + at > a->limit;
        double upd_cut = by_upd ? kth_largest(v, at, a->limit - above) : 0.0;
        free(v);
        m = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            double sc = cand[i].score;
            if (sc > kth || (sc == kth && (!by_upd || cand[i].upd >= upd_cut))) {
                cand[m++] = cand[i];
            }
        }
    }
    RankCand *tmp = malloc((size_t)(m ? m : 1) * sizeof(RankCand));
    if (tmp == NULL) {
        free(cand);
        return -1;
    }
    cand_sort(cand, m, tmp);
    free(tmp);
    Py_ssize_t cut = a->limit < 0 || a->limit > m ? m : a->limit;
    *tied = 0;
    for (Py_ssize_t i = 0; i + 1 < m && i < cut; i++) {
        if (cand[i].score == cand[i + 1].score && cand[i].upd == cand[i + 1].upd) {
            *tied = 1;
            break;
        }
    }
    *need = cut;
    *out = cand;
    return m;
}

/* Hold obj's buffer (C-contiguous, items of itemsize bytes) in *view: 0, or -1 with TypeError. */
static int
hold(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    /* No PyBUF_FORMAT: only the item size is checked, and numpy builds the format string
     * anew for every buffer asked with it (27 of them a query of five tokens). */
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyErr_Format(PyExc_TypeError, "lex_rank: %s must be a 1-d array of %zd-byte items", what,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int
code_arg(PyObject *o, int64_t *out)
{
    if (o == Py_None) {
        *out = RANK_NONE;
        return 0;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *rank_columns(const RankCand *cand, const Py_ssize_t *perm, PyObject **names,
                              Py_ssize_t need);

static PyObject *
lex_rank(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tokens, *cols, *kind_o, *subject_o, *part_o, *hidden_o, *ids_o, *hit_o;
    PyTypeObject *hit_type = NULL; /* NULL: the hits as columns (rank_columns) */
    RankArgs a;
    int how = RANK_AUTO;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "O!dddO!OOOO!dnO!O|i:lex_rank", &PyTuple_Type, &tokens, &a.denom,
                          &a.title_weight, &a.exact_level, &PyTuple_Type, &cols, &kind_o,
                          &subject_o, &part_o, &PyTuple_Type, &hidden_o, &a.now_ts, &a.limit,
                          &PyList_Type, &ids_o, &hit_o, &how)) {
        return NULL;
    }
    if (how != RANK_AUTO && how != RANK_MERGE && how != RANK_DENSE) {
        PyErr_Format(PyExc_ValueError, "lex_rank: how must be 0 (either), 1 (merge) or 2 (dense), not %d", how);
        return NULL;
    }
    if (hit_o != Py_None) {
        if (!PyType_Check(hit_o) || !PyType_IsSubtype((PyTypeObject *)hit_o, &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "lex_rank: the hit type must be a tuple type or None");
            return NULL;
        }
        hit_type = (PyTypeObject *)hit_o;
    }
    if (PyTuple_GET_SIZE(cols) != 7) {
        PyErr_SetString(PyExc_TypeError, "lex_rank: cols must hold 7 columns");
        return NULL;
    }
    if (code_arg(kind_o, &a.kind_code) < 0 || code_arg(subject_o, &a.subject_code) < 0 ||
        code_arg(part_o, &a.part_code) < 0) {
        return NULL;
    }
    Py_ssize_t nhidden = PyTuple_GET_SIZE(hidden_o);
    Py_ssize_t k = PyTuple_GET_SIZE(tokens);
    int64_t *hidden = PyMem_Malloc((size_t)(nhidden + 1) * sizeof(int64_t));
    RankToken *tok = PyMem_Calloc((size_t)(k + 1), sizeof(RankToken));
    Py_buffer *views = PyMem_Calloc((size_t)(4 * k + 7), sizeof(Py_buffer));
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    RankCand *cand = NULL;
    if (hidden == NULL || tok == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t h = 0; h < nhidden; h++) {
        if (code_arg(PyTuple_GET_ITEM(hidden_o, h), &hidden[h]) < 0) {
            goto done;
        }
    }
    a.hidden = hidden;
    a.nhidden = nhidden;
    static const Py_ssize_t col_size[7] = {8, 8, 4, 4, 4, 4, 1};
    static const char *col_name[7] = {"stale", "updated", "kind", "subject", "service",
                                      "partition", "shared"};
    Py_ssize_t cap = PY_SSIZE_T_MAX;
    for (int c = 0; c < 7; c++) {
        if (hold(PyTuple_GET_ITEM(cols, c), &views[held], col_size[c], col_name[c]) < 0) {
            goto done;
        }
        Py_ssize_t len = views[held].len / col_size[c];
        cap = len < cap ? len : cap;
        held++;
    }
    a.stale = views[0].buf;
    a.updated = views[1].buf;
    a.kind = views[2].buf;
    a.subject = views[3].buf;
    a.service = views[4].buf;
    a.part = views[5].buf;
    a.shared = views[6].buf;
    a.cap = cap;
    for (Py_ssize_t t = 0; t < k; t++) {
        PyObject *row = PyTuple_GET_ITEM(tokens, t);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 5) {
            PyErr_SetString(PyExc_TypeError,
                            "lex_rank: a token is (slots, levels, title_slots, title_levels, weight)");
            goto done;
        }
        static const Py_ssize_t size[4] = {8, 8, 8, 8};
        static const char *name[4] = {"slots", "levels", "title_slots", "title_levels"};
        for (int c = 0; c < 4; c++) {
            if (hold(PyTuple_GET_ITEM(row, c), &views[held], size[c], name[c]) < 0) {
                goto done;
            }
            held++;
        }
        Py_buffer *v = &views[held - 4];
        tok[t].slots = v[0].buf;
        tok[t].levels = v[1].buf;
        tok[t].tslots = v[2].buf;
        tok[t].tlevels = v[3].buf;
        tok[t].n = v[0].len / 8;
        tok[t].tn = v[2].len / 8;
        if (v[1].len != v[0].len || v[3].len != v[2].len) {
            PyErr_SetString(PyExc_ValueError, "lex_rank: slots and levels differ in length");
            goto done;
        }
        tok[t].w = PyFloat_AsDouble(PyTuple_GET_ITEM(row, 4));
        if (tok[t].w == -1.0 && PyErr_Occurred()) {
            goto done;
        }
    }
    Py_ssize_t m, need = 0, total = 0;
    int tied = 0;
    for (Py_ssize_t t = 0; t < k; t++) {
        total += tok[t].n;
    }
    if (total >= NOGIL_MATCHES) {
        Py_BEGIN_ALLOW_THREADS
        m = rank_run(tok, k, &a, how, &cand, &need, &tied);
        Py_END_ALLOW_THREADS
    }
    else { /* too little work to hand the GIL over and take it back */
        m = rank_run(tok, k, &a, how, &cand, &need, &tied);
    }
    if (m == -1) {
        PyErr_NoMemory();
        goto done;
    }
    if (m == -2) { /* not sorted, or a slot past the columns: the numpy path */
        result = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    if (m == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* perm: the candidates' order once the runs tied on (score, update) that start within
     * the cut are sorted by id, as LexicalIndex._order sorts them. */
    Py_ssize_t *perm = PyMem_Malloc((size_t)m * sizeof(Py_ssize_t));
    PyObject **names = PyMem_Calloc((size_t)m, sizeof(PyObject *));
    PyObject *hits = NULL, *hit_ids = NULL, *scores = NULL;
    if (perm == NULL || names == NULL) {
        PyErr_NoMemory();
        goto built;
    }
    Py_ssize_t nids = PyList_GET_SIZE(ids_o);
    Py_ssize_t named = tied ? m : need; /* the ids read */
    for (Py_ssize_t i = 0; i < m; i++) {
        perm[i] = i;
    }
    for (Py_ssize_t i = 0; i < named; i++) {
        if (cand[i].slot >= nids) {
            PyErr_SetString(PyExc_IndexError, "lex_rank: a slot past the ids");
            goto built;
        }
        PyObject *id = PyList_GET_ITEM(ids_o, cand[i].slot);
        names[i] = id == Py_None ? PyUnicode_FromStringAndSize("", 0) : Py_NewRef(id);
        if (names[i] == NULL) {
            goto built;
        }
    }
    for (Py_ssize_t i = 0; tied && i < need;) {
        Py_ssize_t j = i + 1;
        while (j < m && cand[j].score == cand[i].score && cand[j].upd == cand[i].upd) {
            j++;
        }
        if (j - i > 1) {
            PyObject *run = PyList_New(j - i);
            if (run == NULL) {
                goto built;
            }
            for (Py_ssize_t r = i; r < j; r++) {
                PyObject *pair = Py_BuildValue("(On)", names[r], r);
                if (pair == NULL) {
                    Py_DECREF(run);
                    goto built;
                }
                PyList_SET_ITEM(run, r - i, pair);
            }
            if (PyList_Sort(run) < 0) { /* ids are distinct: the position never decides */
                Py_DECREF(run);
                goto built;
            }
            for (Py_ssize_t r = i; r < j; r++) {
                perm[r] = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(run, r - i), 1));
            }
            Py_DECREF(run);
        }
        i = j;
    }
    if (hit_type == NULL) {
        result = rank_columns(cand, perm, names, need);
        goto built;
    }
    hits = PyList_New(need);
    hit_ids = PyTuple_New(need);
    scores = PyBytes_FromStringAndSize(NULL, need * (Py_ssize_t)sizeof(double));
    if (hits == NULL || hit_ids == NULL || scores == NULL) {
        goto built;
    }
    double *sc = (double *)PyBytes_AS_STRING(scores);
    for (Py_ssize_t i = 0; i < need; i++) {
        RankCand *c = &cand[perm[i]];
        PyObject *id = names[perm[i]];
        PyObject *hit = hit_type->tp_alloc(hit_type, 4);
        PyObject *score = PyFloat_FromDouble(c->score);
        PyObject *covered = PyLong_FromLong(c->covered);
        if (hit == NULL || score == NULL || covered == NULL) {
            Py_XDECREF(hit);
            Py_XDECREF(score);
            Py_XDECREF(covered);
            goto built;
        }
        PyTuple_SET_ITEM(hit, 0, Py_NewRef(id));
        PyTuple_SET_ITEM(hit, 1, score);
        PyTuple_SET_ITEM(hit, 2, covered);
        PyTuple_SET_ITEM(hit, 3, Py_NewRef(c->fuzzy ? Py_True : Py_False));
        PyList_SET_ITEM(hits, i, hit);
        PyTuple_SET_ITEM(hit_ids, i, Py_NewRef(id));
        sc[i] = c->score;
    }
    result = PyTuple_Pack(3, hits, hit_ids, scores);
built:
    Py_XDECREF(hits);
    Py_XDECREF(hit_ids);
    Py_XDECREF(scores);
    if (names != NULL) {
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_XDECREF(names[i]);
        }
    }
    PyMem_Free(names);
    PyMem_Free(perm);
done:
    free(cand);
    for (Py_ssize_t i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    PyMem_Free(views);
    PyMem_Free(tok);
    PyMem_Free(hidden);
    return result;
}

/* lex_rank with hit_type None: the hits as columns, not tuples, for a caller that works on
 * arrays (memstore/search/_lean.py) and reads a hit's fields only for the few it returns:
 * (slots as int64 bytes, ids tuple, scores as float64 bytes, covered as int32 bytes, fuzzy as
 * uint8 bytes), each in the order of the hits lex_rank builds (memstore/_lexhits.py's
 * LexicalColumns holds them; tests/test_lexcols.py compares the two). No float, int or hit
 * tuple per candidate: the ids tuple holds the lexicon's own strings. */
static PyObject *
rank_columns(const RankCand *cand, const Py_ssize_t *perm, PyObject **names, Py_ssize_t need)
{
    PyObject *slots = PyBytes_FromStringAndSize(NULL, need * (Py_ssize_t)sizeof(int64_t));
    PyObject *hit_ids = PyTuple_New(need);
    PyObject *scores = PyBytes_FromStringAndSize(NULL, need * (Py_ssize_t)sizeof(double));
    PyObject *covered = PyBytes_FromStringAndSize(NULL, need * (Py_ssize_t)sizeof(int32_t));
    PyObject *fuzzy = PyBytes_FromStringAndSize(NULL, need);
    PyObject *result = NULL;
    if (slots != NULL && hit_ids != NULL && scores != NULL && covered != NULL && fuzzy != NULL) {
        int64_t *sl = (int64_t *)PyBytes_AS_STRING(slots);
        double *sc = (double *)PyBytes_AS_STRING(scores);
        int32_t *cv = (int32_t *)PyBytes_AS_STRING(covered);
        uint8_t *fz = (uint8_t *)PyBytes_AS_STRING(fuzzy);
        for (Py_ssize_t i = 0; i < need; i++) {
            const RankCand *c = &cand[perm[i]];
            PyTuple_SET_ITEM(hit_ids, i, Py_NewRef(names[perm[i]]));
            sl[i] = c->slot;
            sc[i] = c->score;
            cv[i] = c->covered;
            fz[i] = c->fuzzy ? 1 : 0;
        }
        result = PyTuple_Pack(5, slots, hit_ids, scores, covered, fuzzy);
    }
    Py_XDECREF(slots);
    Py_XDECREF(hit_ids);
    Py_XDECREF(scores);
    Py_XDECREF(covered);
    Py_XDECREF(fuzzy);
    return result;
}


/* ------------------------------------------------------------------ lexical slot map
 *
 * slot_map(known, lex_slots, ids, slot, size) -> (bytes, bool)
 *
 * The snapshot slot of each of a ranking's hits, handed over as columns (rank_columns):
 * known (a writable int64 array) holds, per lexicon slot, the snapshot dictionary's value of
 * its id (-1: not known yet); a hit it does not know is looked up in slot (a dict, ids[i] its
 * key) and, when found, remembered. Each value below size is written out, any other (or none)
 * as -1; the bool: whether none was. memstore/_lexhits.py's SlotMap._slots is the oracle
 * (tests/test_lexcols.py).
 */
static PyObject *
slot_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5 || !PyTuple_Check(args[2]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "slot_map(known, lex_slots, ids, slot, size): ids a tuple, slot a dict");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[4]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer kv, sv;
    if (PyObject_GetBuffer(args[0], &kv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &sv, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&kv);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t n = sv.len / 8, nknown = kv.len / 8;
    if (kv.itemsize != 8 || sv.itemsize != 8 || PyTuple_GET_SIZE(args[2]) != n) {
        PyErr_SetString(PyExc_TypeError, "slot_map: 8-byte slots, one id per slot");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        goto done;
    }
    int64_t *known = kv.buf, *o = (int64_t *)PyBytes_AS_STRING(out);
    const int64_t *lex = sv.buf;
    int every = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = lex[i];
        int64_t v = at >= 0 && at < nknown ? known[at] : -1;
        if (v < 0) {
            PyObject *got = PyDict_GetItemWithError(args[3], PyTuple_GET_ITEM(args[2], i));
            if (got == NULL && PyErr_Occurred()) {
                Py_CLEAR(out);
                goto done;
            }
            if (got != NULL) {
                Py_ssize_t s = PyLong_AsSsize_t(got);
                if (s == -1 && PyErr_Occurred()) {
                    Py_CLEAR(out);
                    goto done;
                }
                v = s < 0 ? -1 : s;
                if (v >= 0 && at >= 0 && at < nknown) {
                    known[at] = v;
                }
            }
        }
        if (v < 0 || v >= size) {
            o[i] = -1;
            every = 0;
        }
        else {
            o[i] = v;
        }
    }
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&kv);
    if (out == NULL) {
        return NULL;
    }
    return Py_BuildValue("(NO)", out, every ? Py_True : Py_False);
}

/* ------------------------------------------------------------------ joined words
 *
 * holding(texts, slots, pair) -> list[int] | NotImplemented
 *
 * Those of slots whose text (texts[slot], a str) holds pair: memstore/lexical.py's _holding,
 * the oracle. The substring tests run without the GIL over ASCII texts (each held by a
 * reference for the call; when they are long enough: NOGIL_BYTES); NotImplemented when pair or a text is not ASCII (the caller
 * tests those in Python).
 */

static int
holds(const char *text, Py_ssize_t n, const char *pat, Py_ssize_t m)
{
    if (m == 0) {
        return 1;
    }
    if (n < m) {
        return 0;
    }
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    return memmem(text, (size_t)n, pat, (size_t)m) != NULL;
#else
    /* Anchored on the pattern's second character: a joined pair starts with a space,
     * which every word boundary of a text holds. */
    Py_ssize_t at = m > 1 ? 1 : 0;
    const char *end = text + n - m + at; /* the last place the anchor can be */
    for (const char *p = text + at; p <= end;) {
        p = memchr(p, pat[at], (size_t)(end - p + 1));
        if (p == NULL) {
            return 0;
        }
        if (memcmp(p - at, pat, (size_t)m) == 0) {
            return 1;
        }
        p++;
    }
    return 0;
#endif
}

static PyObject *
holding(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *texts, *slots, *pair;
    if (!PyArg_ParseTuple(args, "O!O!U:holding", &PyList_Type, &texts, &PyList_Type, &slots,
                          &pair)) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(pair)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_ssize_t n = PyList_GET_SIZE(slots), ntexts = PyList_GET_SIZE(texts);
    PyObject **held = PyMem_Calloc((size_t)(n + 1), sizeof(PyObject *));
    char *found = PyMem_Calloc((size_t)(n + 1), 1);
    PyObject *out = NULL;
    Py_ssize_t got = 0;
    if (held == NULL || found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t s = PyLong_AsSsize_t(PyList_GET_ITEM(slots, i));
        if (s == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (s < 0 || s >= ntexts) {
            PyErr_SetString(PyExc_IndexError, "holding: a slot past the texts");
            goto done;
        }
        PyObject *t = PyList_GET_ITEM(texts, s);
        if (!PyUnicode_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "holding: texts must be str");
            goto done;
        }
        if (!PyUnicode_IS_ASCII(t)) {
            out = Py_NewRef(Py_NotImplemented);
            goto done;
        }
        held[i] = Py_NewRef(t);
    }
    const char *pat = (const char *)PyUnicode_1BYTE_DATA(pair);
    Py_ssize_t m = PyUnicode_GET_LENGTH(pair);
    Py_ssize_t bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        bytes += PyUnicode_GET_LENGTH(held[i]);
    }
    PyThreadState *released = bytes >= NOGIL_BYTES ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        found[i] = (char)holds((const char *)PyUnicode_1BYTE_DATA(held[i]),
                               PyUnicode_GET_LENGTH(held[i]), pat, m);
        got += found[i];
    }
    if (released != NULL) {
        PyEval_RestoreThread(released);
    }
    out = PyList_New(got);
    for (Py_ssize_t i = 0, k = 0; out != NULL && i < n; i++) {
        if (found[i]) {
            PyList_SET_ITEM(out, k++, Py_NewRef(PyList_GET_ITEM(slots, i)));
        }
    }
done:
    if (held != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(held[i]);
        }
    }
    PyMem_Free(held);
    PyMem_Free(found);
    return out;
}

/* A query token's one-edit vocabulary neighbours: memstore/_editnear.c. */
PyObject *memstore_neighbour_sets(PyObject *self, PyObject *args);
PyObject *memstore_edits(PyObject *self, PyObject *args);
PyObject *memstore_substring_words(PyObject *self, PyObject *args);
PyObject *memstore_key_words(PyObject *self, PyObject *args);
PyObject *memstore_fuzzy_words(PyObject *self, PyObject *args);
/* The documents holding a token's joined pairs: memstore/_joined.c. */
PyObject *memstore_joined_slots(PyObject *self, PyObject *args);
/* ------------------------------------------------------------------------
 * A durable write's per-item checks and journal row, compiled (branch am3).
 *
 * plain_item(rules, d) -> bool
 *
 * memstore/_plainitem.py's plain_item (the oracle; MEMSTORE_PURE_PYTHON=1
 * runs it): whether the item whose __dict__ is ``d`` is of the common shape
 * that every base rule passes. ``rules`` is _plainitem._RULES, the sets and
 * bounds that function reads, in one tuple (see there). The same answer for
 * every ``d``, by the same tests one by one (tests/test_write_compiled.py):
 * a str here is an exact str, ASCII, so its length is its byte count, and the
 * tags' joined-string tests become the per-tag tests they stand for. Raises
 * KeyError for a missing field, as the subscript does.
 *
 * row_json(fields, utcs, d) -> str | None
 *
 * The persisted fields of ``d`` (an item's __dict__) as the journal row's
 * JSON: byte for byte what memstore/journal/version.py's _FIELDS_TO_JSON
 * (pydantic-core's serializer of those fields) writes, or None where this
 * writer does not know the value's shape (the caller then asks pydantic).
 * ``fields`` is ((name, shape), ...) in the model's order; a shape is 0 (str),
 * 1 (list of str), 2 (a list that must be empty), 3 (a datetime or None),
 * 4 (dict of str to str). A datetime is written only when exactly a datetime
 * whose tzinfo is one of ``utcs`` (UTC, as "...Z"); anything else, a str
 * subclass, or a str with a lone surrogate answers None. A list or dict may be
 * a subclass (the store's shared containers): its storage is read, as
 * pydantic-core reads it. Strings escape as
 * serde_json does: \" \\ \b \f \n \r \t, other controls as \u00xx, the rest
 * (DEL and non-ASCII included) as UTF-8.
 * ------------------------------------------------------------------------ */
#include <datetime.h>

enum {
    PR_KINDS_WITH_RULES, PR_KINDS_SEEN, PR_STATUSES, PR_CONFIDENCES, PR_ORIGINS,
    PR_NO_PARTITION_TAGS, PR_PARTITION_PREFIX, PR_VALID_EVENT_DATE, PR_SCOPE_PUBLIC,
    PR_MAX_ID, PR_MAX_TITLE, PR_MAX_CONTENT, PR_MAX_SUBJECT, PR_MAX_EVENT_DATE,
    PR_MAX_TAGS, PR_MAX_TAG_CHARS, PR_MAX_NAME_CHARS, PR_COUNT
};

static const char *const plain_keys[] = {
    "id", "kind", "title", "content", "subject", "event_date", "tags", "scope", "status",
    "confidence", "origin", "links", "supersedes", "evidence_refs", "data", "no_embed",
    "links_set", "created_at", "updated_at", "stale_after",
};
enum {
    PK_ID, PK_KIND, PK_TITLE, PK_CONTENT, PK_SUBJECT, PK_EVENT_DATE, PK_TAGS, PK_SCOPE,
    PK_STATUS, PK_CONFIDENCE, PK_ORIGIN, PK_LINKS, PK_SUPERSEDES, PK_REFS, PK_DATA,
    PK_NO_EMBED, PK_LINKS_SET, PK_CREATED_AT, PK_UPDATED_AT, PK_STALE_AFTER, PK_COUNT
};
static PyObject *plain_key_objs[PK_COUNT];

/* The interned field names, made once. 0, or -1 with an exception. */
static int
plain_keys_ready(void)
{
    if (plain_key_objs[0] != NULL) {
        return 0;
    }
    for (int i = 0; i < PK_COUNT; i++) {
        PyObject *k = PyUnicode_InternFromString(plain_keys[i]);
        if (k == NULL) {
            return -1;
        }
        plain_key_objs[i] = k;
    }
    return 0;
}

/* An exact ASCII str (the only kind the fast shape takes). */
static int
ascii_str(PyObject *o)
{
    return PyUnicode_CheckExact(o) && PyUnicode_IS_ASCII(o);
}

/* str.isspace of a non-empty ASCII text: tab to CR, the four separators 0x1c-0x1f, space. */
static int
ascii_all_space(const unsigned char *s, Py_ssize_t n)
{
    if (n == 0) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (!((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20))) {
            return 0;
        }
    }
    return 1;
}

/* _plain_tags of a non-empty list. 1, 0, or -1 with an exception. */
static int
plain_tags(PyObject *tags, PyObject *const *rule, Py_ssize_t max_tags, Py_ssize_t max_tag_chars,
           Py_ssize_t max_name_chars)
{
    Py_ssize_t n = PyList_GET_SIZE(tags);
    if (n > max_tags) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(tags, i))) {
            return 0;
        }
    }
    PyObject *prefix = rule[PR_PARTITION_PREFIX];
    Py_ssize_t plen = PyUnicode_GET_LENGTH(prefix);
    const char *p = (const char *)PyUnicode_1BYTE_DATA(prefix);
    Py_ssize_t joined = n - 1, partitions = 0;
    PyObject *partition = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tag = PyList_GET_ITEM(tags, i);
        if (!PyUnicode_IS_ASCII(tag)) {
            return 0;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(tag);
        const unsigned char *s = PyUnicode_1BYTE_DATA(tag);
        /* empty, padded, a comma inside, or not printable: the joined tests fail */
        if (len == 0 || s[0] == ' ' || s[len - 1] == ' ') {
            return 0;
        }
        for (Py_ssize_t j = 0; j < len; j++) {
            if (s[j] < 0x20 || s[j] > 0x7e || s[j] == ',') {
                return 0;
            }
        }
        joined += len;
        if (len >= plen && memcmp(s, p, (size_t)plen) == 0) {
            if (partitions++ == 0) {
                partition = tag;
            }
        }
    }
    if (joined > max_tag_chars) {
        return 0;
    }
    if (partitions != 1) {
        return partitions == 0;
    }
    int listed = PySet_Contains(rule[PR_NO_PARTITION_TAGS], partition);
    if (listed != 0) {
        return listed < 0 ? -1 : 0;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(partition);
    return len - plen <= max_name_chars && PyUnicode_1BYTE_DATA(partition)[plen] != ' ';
}

static PyObject *
plain_item_c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[1]) || !PyTuple_CheckExact(args[0]) ||
        PyTuple_GET_SIZE(args[0]) != PR_COUNT) {
        PyErr_SetString(PyExc_TypeError, "plain_item(rules: tuple, d: dict)");
        return NULL;
    }
    if (plain_keys_ready() < 0) {
        return NULL;
    }
    PyObject *d = args[1];
    PyObject *const *rule = &PyTuple_GET_ITEM(args[0], 0);
    PyObject *f[PK_COUNT];
    for (int i = 0; i < PK_COUNT; i++) {
        f[i] = PyDict_GetItemWithError(d, plain_key_objs[i]); /* borrowed */
        if (f[i] == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetObject(PyExc_KeyError, plain_key_objs[i]);
            }
            return NULL;
        }
    }
    Py_ssize_t bound[PR_COUNT];
    for (int i = PR_MAX_ID; i < PR_COUNT; i++) {
        bound[i] = PyLong_AsSsize_t(rule[i]);
        if (bound[i] == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *kind = f[PK_KIND];
    int r;
    if (!PyUnicode_CheckExact(kind)) {
        Py_RETURN_FALSE;
    }
    r = PySet_Contains(rule[PR_KINDS_WITH_RULES], kind);
    if (r != 0) {
        return r < 0 ? NULL : Py_NewRef(Py_False);
    }
    if (f[PK_STALE_AFTER] != Py_None || f[PK_CREATED_AT] != Py_None ||
        f[PK_UPDATED_AT] != Py_None) {
        Py_RETURN_FALSE;
    }
    /* every text an exact ASCII str within its bound */
    static const int texts[] = {PK_ID, PK_TITLE, PK_CONTENT, PK_SUBJECT, PK_EVENT_DATE};
    static const int bounds[] = {PR_MAX_ID, PR_MAX_TITLE, PR_MAX_CONTENT, PR_MAX_SUBJECT,
                                 PR_MAX_EVENT_DATE};
    for (int i = 0; i < 5; i++) {
        PyObject *t = f[texts[i]];
        if (!ascii_str(t) || PyUnicode_GET_LENGTH(t) > bound[bounds[i]]) {
            Py_RETURN_FALSE;
        }
    }
    PyObject *scope = f[PK_SCOPE], *status = f[PK_STATUS], *confidence = f[PK_CONFIDENCE];
    PyObject *origin = f[PK_ORIGIN];
    if (!PyUnicode_CheckExact(scope) || !PyUnicode_CheckExact(status) ||
        !PyUnicode_CheckExact(confidence) || !PyUnicode_CheckExact(origin) ||
        !PyList_CheckExact(f[PK_TAGS]) || !PyList_CheckExact(f[PK_LINKS]) ||
        !PyList_CheckExact(f[PK_SUPERSEDES]) || !PyList_CheckExact(f[PK_REFS]) ||
        !PyDict_CheckExact(f[PK_DATA]) || !PyBool_Check(f[PK_NO_EMBED]) ||
        !PyBool_Check(f[PK_LINKS_SET]) || PyList_GET_SIZE(f[PK_LINKS]) ||
        PyList_GET_SIZE(f[PK_SUPERSEDES]) || PyList_GET_SIZE(f[PK_REFS]) ||
        PyDict_GET_SIZE(f[PK_DATA])) {
        Py_RETURN_FALSE;
    }
    r = PyUnicode_Compare(scope, rule[PR_SCOPE_PUBLIC]);
    if (r != 0) {
        return r == -1 && PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    PyObject *sets[] = {rule[PR_STATUSES], rule[PR_CONFIDENCES], rule[PR_ORIGINS]};
    PyObject *vals[] = {status, confidence, origin};
    for (int i = 0; i < 3; i++) {
        r = PySet_Contains(sets[i], vals[i]);
        if (r != 1) {
            return r < 0 ? NULL : Py_NewRef(Py_False);
        }
    }
    PyObject *seen = PyDict_GetItemWithError(rule[PR_KINDS_SEEN], kind);
    if (seen != Py_True) {
        return seen == NULL && PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    PyObject *id = f[PK_ID];
    const unsigned char *s = PyUnicode_1BYTE_DATA(id);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(id); i < n; i++) {
        if (s[i] <= 0x20 || s[i] > 0x7e) { /* not printable, or the space */
            Py_RETURN_FALSE;
        }
    }
    PyObject *title = f[PK_TITLE], *content = f[PK_CONTENT];
    Py_ssize_t tn = PyUnicode_GET_LENGTH(title), cn = PyUnicode_GET_LENGTH(content);
    if (ascii_all_space(PyUnicode_1BYTE_DATA(title), tn) || tn == 0) {
        if (cn == 0 || ascii_all_space(PyUnicode_1BYTE_DATA(content), cn)) {
            Py_RETURN_FALSE;
        }
    }
    PyObject *event_date = f[PK_EVENT_DATE];
    if (PyUnicode_GET_LENGTH(event_date)) {
        PyObject *ok = PyObject_CallOneArg(rule[PR_VALID_EVENT_DATE], event_date);
        if (ok == NULL) {
            return NULL;
        }
        r = PyObject_IsTrue(ok);
        Py_DECREF(ok);
        if (r != 1) {
            return r < 0 ? NULL : Py_NewRef(Py_False);
        }
    }
    PyObject *tags = f[PK_TAGS];
    if (PyList_GET_SIZE(tags) == 0) {
        Py_RETURN_TRUE;
    }
    r = plain_tags(tags, rule, bound[PR_MAX_TAGS], bound[PR_MAX_TAG_CHARS],
                   bound[PR_MAX_NAME_CHARS]);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* A byte buffer for row_json: on the stack until a row outgrows it. */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    int heap;     /* buf was allocated here (else it is the caller's stack) */
    int nonascii; /* a byte >= 0x80 was written */
} Out;

static int
out_room(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap) {
        return 0;
    }
    Py_ssize_t cap = o->cap * 2;
    while (cap < o->len + more) {
        cap *= 2;
    }
    char *grown = o->heap ? PyMem_Realloc(o->buf, (size_t)cap) : PyMem_Malloc((size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (!o->heap) {
        memcpy(grown, o->buf, (size_t)o->len);
    }
    o->buf = grown;
    o->cap = cap;
    o->heap = 1;
    return 0;
}

static int
out_raw(Out *o, const char *s, Py_ssize_t n)
{
    if (out_room(o, n) < 0) {
        return -1;
    }
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

/* Which bytes a JSON string escapes (serde_json's table): 'u' as \u00xx, else the letter. */
static const char json_escape[256] = {
    ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
    [0x00] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u',
    [0x06] = 'u', [0x07] = 'u', [0x0b] = 'u', [0x0e] = 'u', [0x0f] = 'u', [0x10] = 'u',
    [0x11] = 'u', [0x12] = 'u', [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u',
    [0x17] = 'u', [0x18] = 'u', [0x19] = 'u', [0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u',
    [0x1d] = 'u', [0x1e] = 'u', [0x1f] = 'u', ['"'] = '"', ['\\'] = '\\',
};

/* A str as a JSON string, as serde_json escapes it. 1 written, 0 not a shape
 * written here (a subclass, a lone surrogate), -1 with an exception. */
static int
out_str(Out *o, PyObject *s)
{
    if (!PyUnicode_CheckExact(s)) {
        return 0;
    }
    Py_ssize_t n;
    const unsigned char *u;
    if (PyUnicode_IS_ASCII(s)) {
        u = PyUnicode_1BYTE_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    } else {
        u = (const unsigned char *)PyUnicode_AsUTF8AndSize(s, &n);
        if (u == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                return -1;
            }
            PyErr_Clear();
            return 0;
        }
        o->nonascii = 1;
    }
    if (out_room(o, 2 + 6 * n) < 0) {
        return -1;
    }
    char *w = o->buf + o->len;
    *w++ = '"';
    Py_ssize_t run = 0; /* the start of the bytes not yet copied */
    for (Py_ssize_t i = 0; i < n; i++) {
        char e = json_escape[u[i]];
        if (!e) {
            continue;
        }
        memcpy(w, u + run, (size_t)(i - run));
        w += i - run;
        run = i + 1;
        *w++ = '\\';
        *w++ = e;
        if (e == 'u') {
            *w++ = '0';
            *w++ = '0';
            *w++ = "0123456789abcdef"[u[i] >> 4];
            *w++ = "0123456789abcdef"[u[i] & 15];
        }
    }
    memcpy(w, u + run, (size_t)(n - run));
    w += n - run;
    *w++ = '"';
    o->len = w - o->buf;
    return 1;
}

/* A list of str as a JSON array; 1, 0 or -1 as out_str. */
static int
out_str_list(Out *o, PyObject *list)
{
    if (!PyList_Check(list)) {
        return 0;
    }
    if (out_raw(o, "[", 1) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        if (i && out_raw(o, ",", 1) < 0) {
            return -1;
        }
        int r = out_str(o, PyList_GET_ITEM(list, i));
        if (r <= 0) {
            return r;
        }
    }
    return out_raw(o, "]", 1) < 0 ? -1 : 1;
}

/* A dict of str to str as a JSON object; 1, 0 or -1 as out_str. */
static int
out_str_dict(Out *o, PyObject *dict)
{
    if (!PyDict_Check(dict)) {
        return 0;
    }
    if (out_raw(o, "{", 1) < 0) {
        return -1;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        if (i++ && out_raw(o, ",", 1) < 0) {
            return -1;
        }
        int r = out_str(o, k);
        if (r <= 0) {
            return r;
        }
        if (out_raw(o, ":", 1) < 0) {
            return -1;
        }
        r = out_str(o, v);
        if (r <= 0) {
            return r;
        }
    }
    return out_raw(o, "}", 1) < 0 ? -1 : 1;
}

/* Write ``v`` as ``digits`` decimal digits (zero-padded) at ``w``. */
static void
put_digits(char *w, int v, int digits)
{
    for (int i = digits - 1; i >= 0; i--) {
        w[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* None, or a datetime in UTC as pydantic writes it; 1, 0 or -1 as out_str. */
static int
out_stamp(Out *o, PyObject *t, PyObject *utcs)
{
    if (t == Py_None) {
        return out_raw(o, "null", 4) < 0 ? -1 : 1;
    }
    if (!PyDateTime_CheckExact(t)) {
        return 0;
    }
    PyObject *tz = PyDateTime_DATE_GET_TZINFO(t);
    int utc = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(utcs); i++) {
        utc |= tz == PyTuple_GET_ITEM(utcs, i);
    }
    if (!utc) {
        return 0;
    }
    /* "YYYY-MM-DDTHH:MM:SS[.ffffff]Z", quoted; the fraction only when not zero */
    char text[32] = "\"0000-00-00T00:00:00";
    put_digits(text + 1, PyDateTime_GET_YEAR(t), 4);
    put_digits(text + 6, PyDateTime_GET_MONTH(t), 2);
    put_digits(text + 9, PyDateTime_GET_DAY(t), 2);
    put_digits(text + 12, PyDateTime_DATE_GET_HOUR(t), 2);
    put_digits(text + 15, PyDateTime_DATE_GET_MINUTE(t), 2);
    put_digits(text + 18, PyDateTime_DATE_GET_SECOND(t), 2);
    int n = 20, us = PyDateTime_DATE_GET_MICROSECOND(t);
    if (us) {
        text[n++] = '.';
        put_digits(text + n, us, 6);
        n += 6;
    }
    text[n++] = 'Z';
    text[n++] = '"';
    return out_raw(o, text, n) < 0 ? -1 : 1;
}

static PyObject *
row_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_CheckExact(args[0]) || !PyTuple_CheckExact(args[1]) ||
        !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "row_json(fields: tuple, utcs: tuple, d: dict)");
        return NULL;
    }
    if (PyDateTimeAPI == NULL) {
        PyDateTime_IMPORT;
        if (PyDateTimeAPI == NULL) {
            return NULL;
        }
    }
    PyObject *fields = args[0], *utcs = args[1], *d = args[2];
    char stack[2048];
    Out o = {stack, 0, sizeof stack, 0, 0};
    int r = out_raw(&o, "{", 1);
    for (Py_ssize_t i = 0; r >= 0 && i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *pair = PyTuple_GET_ITEM(fields, i), *name, *value;
        long shape;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !ascii_str(name = PyTuple_GET_ITEM(pair, 0)) ||
            ((shape = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1))) == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "row_json: fields are (name, shape) pairs");
            }
            r = -1;
            break;
        }
        value = PyDict_GetItemWithError(d, name);
        if (value == NULL) {
            r = PyErr_Occurred() ? -1 : 0;
            break;
        }
        if ((i && out_raw(&o, ",", 1) < 0) || out_str(&o, name) < 0 || out_raw(&o, ":", 1) < 0) {
            r = -1;
            break;
        }
        switch (shape) {
        case 0: r = out_str(&o, value); break;
        case 1: r = out_str_list(&o, value); break;
        case 2:
            r = PyList_Check(value) && PyList_GET_SIZE(value) == 0
                    ? (out_raw(&o, "[]", 2) < 0 ? -1 : 1)
                    : 0;
            break;
        case 3: r = out_stamp(&o, value, utcs); break;
        case 4: r = out_str_dict(&o, value); break;
        default: r = 0;
        }
        if (r == 0) {
            break;
        }
    }
    PyObject *text = NULL;
    if (r > 0 && out_raw(&o, "}", 1) == 0) {
        if (o.nonascii) {
            text = PyUnicode_DecodeUTF8(o.buf, o.len, NULL);
        } else if ((text = PyUnicode_New(o.len, 127)) != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(text), o.buf, (size_t)o.len);
        }
    } else if (r == 0) {
        text = Py_NewRef(Py_None);
    }
    if (o.heap) {
        PyMem_Free(o.buf);
    }
    return text;
}


/* ------------------------------------------------------------------ slots of ids
 *
 * slots_of(ids, slot, size) -> (bytes, bool)
 *
 * Each of ids' value in slot (a dict, id -> int) as a native 8-byte integer, -1 where slot
 * does not hold the id or holds it at size or past (a later snapshot's slot); and whether
 * none is -1. memstore/search/_lean.py's _slots_of is the oracle: the same numbers as its
 * itemgetter over the dict and its conversion to an array, without the tuple and the
 * Python ints in between (the lean fusion turns a channel's couple of hundred hit ids into
 * its snapshot's slots so; a hit's id is the store's own string, found by identity).
 */

static PyObject *
slots_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "slots_of(ids, slot, size): slot must be a dict");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[2]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "slots_of: ids must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out);
    int every = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyDict_GetItemWithError(args[1], items[i]); /* borrowed */
        if (v == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            o[i] = -1;
            every = 0;
            continue;
        }
        Py_ssize_t s = PyLong_AsSsize_t(v);
        if (s == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (s < 0 || s >= size) {
            o[i] = -1;
            every = 0;
        }
        else {
            o[i] = s;
        }
    }
    Py_DECREF(seq);
    return Py_BuildValue("(NO)", out, every ? Py_True : Py_False);
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}



/* ------------------------------------------------------------------ lean top
 *
 * lean_top(base, scored, readable, loan_to, loan_add, id_rank, need) -> (list, list) | None
 *
 * The lean fusion's best `need` readable candidates (memstore/search/_lean.py's
 * LeanFusion.ordered without query signals or priors): a slot is a candidate when scored
 * or lent to (loan_to) and readable; its score is base[s], plus loan_add[j] when lent to
 * (base[s] + the last loan to s, as numpy's final[loan_to] += loan_add gives); the best
 * `need` by score descending, then id_rank ascending (then slot: a stable sort's order).
 * Returns their slots and scores as lists, or None when a score is NaN (the numpy path
 * decides then). _lean.py's _top_slots is the oracle, which a hypothesis test holds this
 * to. The numpy path costs a dozen array calls over the whole snapshot (a copy of its
 * scores, masks, a nonzero, a partition, a lexsort: ~55 us a search over 20,000 slots,
 * all of it holding the GIL); here it is one scan of the masks eight bytes at a time, each
 * candidate offered to a heap of the best `need`, and a sort of those.
 *
 * base, loan_add: float64; scored, readable: bool (1 byte); loan_to, id_rank: intp (8
 * bytes); base, scored, readable and id_rank of one length.
 */

typedef struct {
    double score;
    int64_t rank;
    Py_ssize_t slot;
} TopCand;

/* Whether a goes before b: a higher score, then a lower id rank, then a lower slot. */
static inline int
top_before(const TopCand *a, const TopCand *b)
{
    if (a->score != b->score) {
        return a->score > b->score;
    }
    if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->slot < b->slot;
}

/* heap[0:k] keeps the k best met so far, the last of them (the one every other goes
 * before) at its root; x is pushed (k < cap) or replaces the root when it goes before it. */
static void
top_offer(TopCand *heap, Py_ssize_t *k, Py_ssize_t cap, const TopCand *x)
{
    Py_ssize_t i;
    if (cap == 0) {
        return;
    }
    if (*k < cap) { /* sift up */
        i = (*k)++;
        while (i > 0) {
            Py_ssize_t up = (i - 1) / 2;
            if (!top_before(&heap[up], x)) {
                break;
            }
            heap[i] = heap[up];
            i = up;
        }
        heap[i] = *x;
        return;
    }
    if (!top_before(x, &heap[0])) {
        return;
    }
    i = 0; /* sift down from the root */
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= *k) {
            break;
        }
        if (c + 1 < *k && top_before(&heap[c], &heap[c + 1])) {
            c++; /* the later child */
        }
        if (!top_before(x, &heap[c])) {
            break;
        }
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = *x;
}

static int
top_cmp(const void *pa, const void *pb)
{
    return top_before(pa, pb) ? -1 : (top_before(pb, pa) ? 1 : 0);
}

static int
top_hold(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyErr_Format(PyExc_TypeError, "lean_top: %s must be a 1-d array of %zd-byte items", what,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
lean_top(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const Py_ssize_t size[6] = {8, 1, 1, 8, 8, 8};
    static const char *name[6] = {"base", "scored", "readable", "loan_to", "loan_add", "id_rank"};
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "lean_top(base, scored, readable, loan_to, loan_add, id_rank, need)");
        return NULL;
    }
    Py_ssize_t need = PyLong_AsSsize_t(args[6]);
    if (need == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer v[6];
    int held = 0;
    PyObject *result = NULL;
    uint8_t *lent = NULL;
    double *loan = NULL;
    TopCand *cand = NULL;
    for (; held < 6; held++) {
        if (top_hold(args[held], &v[held], size[held], name[held]) < 0) {
            goto done;
        }
    }
    Py_ssize_t n = v[0].shape[0], nl = v[3].shape[0];
    if (v[1].shape[0] != n || v[2].shape[0] != n || v[5].shape[0] != n || v[4].shape[0] != nl) {
        PyErr_SetString(PyExc_ValueError, "lean_top: the columns differ in length");
        goto done;
    }
    if (need < 0) {
        PyErr_SetString(PyExc_ValueError, "lean_top: need must be >= 0");
        goto done;
    }
    const double *base = v[0].buf, *loan_add = v[4].buf;
    const uint8_t *scored = v[1].buf, *readable = v[2].buf;
    const int64_t *loan_to = v[3].buf, *id_rank = v[5].buf;
    /* The loans by slot (the last one to a slot wins, as numpy's fancy += assigns). */
    if (nl) {
        lent = PyMem_Calloc((size_t)n + 8, 1);
        loan = PyMem_Malloc((size_t)n * sizeof(double));
        if (lent == NULL || loan == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < nl; j++) {
        int64_t t = loan_to[j];
        if (t < 0) {
            t += n; /* numpy's negative index */
        }
        if (t < 0 || t >= n) {
            PyErr_SetString(PyExc_IndexError, "lean_top: a loan past the slots");
            goto done;
        }
        lent[t] = 1;
        loan[t] = loan_add[j];
    }
    /* The best need candidates met, as a heap (a sort of them all cost more than the scan). */
    cand = PyMem_Malloc((size_t)(need ? need : 1) * sizeof(TopCand));
    if (cand == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = 0;
    /* Eight mask bytes at a time (a fixed-size memcpy: one load): a search scores a few
     * hundred slots of tens of thousands. The last few slots one by one. */
    Py_ssize_t full = n - n % 8;
    for (Py_ssize_t s0 = 0; s0 < n; s0 += 8) {
        Py_ssize_t end = s0 + 8;
        if (s0 < full) {
            uint64_t a, b = 0;
            memcpy(&a, scored + s0, 8);
            if (lent != NULL) {
                memcpy(&b, lent + s0, 8);
            }
            if ((a | b) == 0) {
                continue;
            }
        }
        else {
            end = n;
        }
        for (Py_ssize_t s = s0; s < end; s++) {
            int is_lent = lent != NULL && lent[s];
            if (!(scored[s] || is_lent) || !readable[s]) {
                continue;
            }
            double x_score = is_lent ? base[s] + loan[s] : base[s];
            if (x_score != x_score) { /* NaN: the numpy path orders it */
                result = Py_NewRef(Py_None);
                goto done;
            }
            TopCand x = {x_score, id_rank[s], s};
            top_offer(cand, &m, need, &x);
        }
    }
    if (m > 1) { /* the heap's best, in order */
        qsort(cand, (size_t)m, sizeof(TopCand), top_cmp);
    }
    Py_ssize_t k = m;
    PyObject *slots = PyList_New(k), *scores = PyList_New(k);
    if (slots == NULL || scores == NULL) {
        Py_XDECREF(slots);
        Py_XDECREF(scores);
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *s = PyLong_FromSsize_t(cand[i].slot), *x = PyFloat_FromDouble(cand[i].score);
        if (s == NULL || x == NULL) {
            Py_XDECREF(s);
            Py_XDECREF(x);
            Py_DECREF(slots);
            Py_DECREF(scores);
            goto done;
        }
        PyList_SET_ITEM(slots, i, s);
        PyList_SET_ITEM(scores, i, x);
    }
    result = Py_BuildValue("(NN)", slots, scores);
done:
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&v[i]);
    }
    PyMem_Free(lent);
    PyMem_Free(loan);
    PyMem_Free(cand);
    return result;
}


/* ------------------------------------------------------------------ best levels
 *
 * best_levels(parts, capacity, alive) -> (bytes, bytes) | NotImplemented
 *
 * memstore/_tokenmatch.py's best_levels, the merge of a cold query token's matches: parts
 * is a list of (level, slots) pairs (slots: a non-empty 1-d int32 array), alive a bool
 * array or None. Returns each slot met (below capacity, alive), ascending, once, as native
 * 8-byte integers, and the best (largest) level it reaches as float64s. NotImplemented
 * (the numpy path decides, and raises what it raises) for a slot outside [0, capacity) or
 * past alive, slots that are not 1-d int32, or more than 255 distinct levels. The numpy path picks one of four merges
 * by size (a dictionary, a sort, a dense array), each several array calls holding the
 * GIL (~70 us for a token's 500 entries); here the levels become ranks, a byte per slot
 * of the range the slots span keeps the best rank (one pass), and a scan of those bytes
 * eight at a time writes the answer. A range much wider than the entries is sorted
 * instead ((slot, rank) keys: the last of each slot's run is its best).
 */

static int
bl_key_cmp(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : (a > b);
}

static int
bl_double_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : (a > b);
}

static PyObject *
best_levels_c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "best_levels(parts, capacity, alive): parts is a list");
        return NULL;
    }
    PyObject *parts = args[0];
    Py_ssize_t capacity = PyLong_AsSsize_t(args[1]);
    if (capacity == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t np_ = PyList_GET_SIZE(parts);
    Py_buffer *views = PyMem_Calloc((size_t)np_ + 1, sizeof(Py_buffer));
    double *lv = PyMem_Malloc(((size_t)np_ + 1) * sizeof(double));
    double *table = PyMem_Malloc(((size_t)np_ + 2) * sizeof(double));
    uint8_t *rank = PyMem_Malloc((size_t)np_ + 1);
    Py_buffer alive_view;
    int have_alive = 0;
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    uint8_t *best = NULL;
    uint64_t *keys = NULL;
    int64_t *out_slots = NULL;
    double *out_levels = NULL;
    if (views == NULL || lv == NULL || table == NULL || rank == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (args[2] != Py_None) {
        if (PyObject_GetBuffer(args[2], &alive_view, PyBUF_C_CONTIGUOUS) < 0) {
            goto done;
        }
        have_alive = 1;
        if (alive_view.itemsize != 1 || alive_view.ndim != 1) {
            PyErr_SetString(PyExc_TypeError, "best_levels: alive must be a 1-d bool array");
            goto done;
        }
    }
    Py_ssize_t total = 0;
    int64_t lo = INT64_MAX, hi = -1;
    for (; held < np_; held++) {
        PyObject *part = PyList_GET_ITEM(parts, held);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 2) {
            PyErr_SetString(PyExc_TypeError, "best_levels: a part is (level, slots)");
            goto done;
        }
        lv[held] = PyFloat_AsDouble(PyTuple_GET_ITEM(part, 0));
        if (lv[held] == -1.0 && PyErr_Occurred()) {
            goto done;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(part, 1), &views[held],
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            goto done;
        }
        const char *fmt = views[held].format;
        if (views[held].itemsize != 4 || views[held].ndim != 1 || fmt == NULL ||
            (strcmp(fmt, "i") != 0 && strcmp(fmt, "=i") != 0)) {
            held++; /* not 1-d int32 (a caller's own array): the numpy path's */
            result = Py_NewRef(Py_NotImplemented);
            goto done;
        }
        const int32_t *a = views[held].buf;
        Py_ssize_t n = views[held].shape[0];
        total += n;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (a[i] < lo) {
                lo = a[i];
            }
            if (a[i] > hi) {
                hi = a[i];
            }
        }
    }
    if (total == 0 || lv[0] != lv[0]) {
        result = Py_NewRef(Py_NotImplemented); /* nothing to merge, or a NaN level: Python's */
        goto done;
    }
    if (lo < 0 || hi >= capacity ||
        (have_alive && hi >= alive_view.shape[0])) {
        result = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    /* The distinct levels, increasing: table[1..nl] (rank 0: no match). */
    memcpy(table + 1, lv, (size_t)np_ * sizeof(double));
    for (Py_ssize_t i = 0; i < np_; i++) {
        if (lv[i] != lv[i]) {
            result = Py_NewRef(Py_NotImplemented);
            goto done;
        }
    }
    qsort(table + 1, (size_t)np_, sizeof(double), bl_double_cmp);
    Py_ssize_t nl = 0;
    for (Py_ssize_t i = 1; i <= np_; i++) {
        if (nl == 0 || table[i] != table[nl]) {
            table[++nl] = table[i];
        }
    }
    if (nl > 255) {
        result = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    for (Py_ssize_t i = 0; i < np_; i++) {
        Py_ssize_t a = 1, b = nl; /* the rank of lv[i]: binary search */
        while (a < b) {
            Py_ssize_t mid = (a + b) / 2;
            if (table[mid] < lv[i]) {
                a = mid + 1;
            }
            else {
                b = mid;
            }
        }
        rank[i] = (uint8_t)a;
    }
    const uint8_t *alive = have_alive ? alive_view.buf : NULL;
    Py_ssize_t room = total, m = 0;
    out_slots = PyMem_Malloc((size_t)room * sizeof(int64_t));
    out_levels = PyMem_Malloc((size_t)room * sizeof(double));
    if (out_slots == NULL || out_levels == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t span = (Py_ssize_t)(hi - lo + 1);
    if (span <= 64 * total + 65536) { /* a byte per slot of the range */
        best = PyMem_Calloc((size_t)span + 8, 1);
        if (best == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t p = 0; p < np_; p++) {
            const int32_t *a = views[p].buf;
            uint8_t r = rank[p];
            for (Py_ssize_t i = 0; i < views[p].shape[0]; i++) {
                uint8_t *b = &best[a[i] - lo];
                if (*b < r) {
                    *b = r;
                }
            }
        }
        for (Py_ssize_t o = 0; o < span; o += 8) {
            uint64_t w;
            memcpy(&w, best + o, 8); /* best has 8 spare zero bytes */
            if (w == 0) {
                continue;
            }
            Py_ssize_t end = o + 8 < span ? o + 8 : span;
            for (Py_ssize_t i = o; i < end; i++) {
                int64_t slot = lo + i;
                if (best[i] && (alive == NULL || alive[slot])) {
                    out_slots[m] = slot;
                    out_levels[m++] = table[best[i]];
                }
            }
        }
    }
    else { /* sparse over a wide range: sort (slot, rank) keys */
        keys = PyMem_Malloc((size_t)total * sizeof(uint64_t));
        if (keys == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t k = 0;
        for (Py_ssize_t p = 0; p < np_; p++) {
            const int32_t *a = views[p].buf;
            for (Py_ssize_t i = 0; i < views[p].shape[0]; i++) {
                keys[k++] = ((uint64_t)a[i] << 8) | rank[p];
            }
        }
        qsort(keys, (size_t)total, sizeof(uint64_t), bl_key_cmp);
        for (Py_ssize_t i = 0; i < total; i++) {
            if (i + 1 < total && (keys[i + 1] >> 8) == (keys[i] >> 8)) {
                continue; /* not the last (best) of its slot's run */
            }
            int64_t slot = (int64_t)(keys[i] >> 8);
            if (alive == NULL || alive[slot]) {
                out_slots[m] = slot;
                out_levels[m++] = table[keys[i] & 0xFF];
            }
        }
    }
    {
        PyObject *a = PyBytes_FromStringAndSize((const char *)out_slots, m * 8);
        PyObject *b = a == NULL ? NULL : PyBytes_FromStringAndSize((const char *)out_levels, m * 8);
        if (b == NULL) {
            Py_XDECREF(a);
            goto done;
        }
        result = Py_BuildValue("(NN)", a, b);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    if (have_alive) {
        PyBuffer_Release(&alive_view);
    }
    PyMem_Free(views);
    PyMem_Free(lv);
    PyMem_Free(table);
    PyMem_Free(rank);
    PyMem_Free(best);
    PyMem_Free(keys);
    PyMem_Free(out_slots);
    PyMem_Free(out_levels);
    return result;
}


static PyMethodDef methods[] = {
    {"count_docs", count_docs, METH_VARARGS,
     "count_docs(docs, df, content_wid, content_ids, content_counts, title_wid, title_ids, "
     "title_counts) -> list[str]\n\n"
     "Count and number each document's distinct words (see memstore/_wordbatch.py)."},
    {"index_texts", index_texts, METH_VARARGS,
     "index_texts(docs, split, df, content_wid, content_ids, content_counts, title_wid, "
     "title_ids, title_counts) -> (fresh, texts, ntitles, words)\n\n"
     "Split each document's texts and count their words in one pass (see memstore/_wordbatch.py)."},
    {"lex_rank", lex_rank, METH_VARARGS,
     "lex_rank(tokens, denom, title_weight, exact_level, cols, kind, subject, partition, hidden, "
     "now_ts, limit, ids, hit_type) -> None | NotImplemented | (hits, ids, scores) | columns\n\n"
     "A lexical query's sums, filters, scores, cut and order (see memstore/_lexscore.py)."},
    {"holding", holding, METH_VARARGS,
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
    {"split_ascii", split_ascii, METH_O,
     "split_ascii(text) -> list[str]\n\nThe words of an ASCII text, as memstore.text.words splits it."},
    {"plain_item", (PyCFunction)(void (*)(void))plain_item_c, METH_FASTCALL,
     "plain_item(rules, d) -> bool\n\n"
     "Whether an item's __dict__ is of the common valid shape (see memstore/_plainitem.py)."},
    {"row_json", (PyCFunction)(void (*)(void))row_json, METH_FASTCALL,
     "row_json(fields, utcs, d) -> str | None\n\n"
     "An item's persisted fields as the journal row's JSON (see memstore/journal/version.py)."},
    {"slot_map", (PyCFunction)(void (*)(void))slot_map, METH_FASTCALL,
     "slot_map(known, lex_slots, ids, slot, size) -> (bytes, bool)\n\n"
     "Ranked hits' snapshot slots by their lexicon slots (see memstore/_lexhits.py's SlotMap)."},
    {"lean_top", (PyCFunction)(void (*)(void))lean_top, METH_FASTCALL,
     "lean_top(base, scored, readable, loan_to, loan_add, id_rank, need) -> (slots, scores) | None\n\n"
     "The lean fusion's best need readable candidates (see memstore/search/_lean.py)."},
    {"best_levels", (PyCFunction)(void (*)(void))best_levels_c, METH_FASTCALL,
     "best_levels(parts, capacity, alive) -> (bytes, bytes) | NotImplemented\n\n"
     "A token's matched slots and their best levels (see memstore/_tokenmatch.py)."},
    {"slots_of", (PyCFunction)(void (*)(void))slots_of, METH_FASTCALL,
     "slots_of(ids, slot, size) -> (bytes, bool)\n\n"
     "Each id's slot below size as int64 (-1: not held), and whether all are held (see "
     "memstore/search/_lean.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memstore._speedups",
    "The lexicon's hottest write loop and the lexical rank, compiled (optional; see "
    "memstore/_wordbatch.py and memstore/_lexscore.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
