/* memstore._speedups.index_texts and split_ascii: a batch's ASCII texts split and counted
 * in one pass, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c); the oracle is the same
 * loop in memstore/_wordbatch.py over memstore.text.words.
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
#include "_speedups.h"

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
        PyObject *num = ms_word_number(&c->cwid, str, &n);
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
            PyObject *tnum = ms_word_number(&c->twid, word, &n);
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

PyObject *
memstore_index_texts(PyObject *self, PyObject *args)
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
    /* A snapshot of docs: split (Python code) cannot pull a document away. */
    docs = PyList_GetSlice(docs, 0, PyList_GET_SIZE(docs));
    if (docs == NULL) {
        return NULL;
    }
    Py_ssize_t ndocs = PyList_GET_SIZE(docs);
    PyObject *resolved = PyList_New(0); /* per document: (title, content, extra, ascii) */
    PyObject *fresh = NULL, *texts = NULL, *ntitles = NULL, *words = NULL, *result = NULL;
    Tally c = {{NULL, 0, NULL, 0, 0}, {cwid, NULL, NULL, NULL, 0}, {twid, NULL, NULL, NULL, 0},
               cids, tids, 0, 0, 0};
    Buf fold = {NULL, 0, 0}, spans = {NULL, 0, 0}, text = {NULL, 0, 0};
    if (resolved == NULL) {
        Py_DECREF(docs);
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
        if (nt >= 0 && total >= 0 && ms_append_count(ccounts, c.ccount) == 0 &&
            ms_append_count(tcounts, c.tcount) == 0) {
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
        if (ms_count_word(df, en->word, en->count, fresh) < 0) {
            goto error;
        }
    }
    result = PyTuple_Pack(4, fresh, texts, ntitles, words);
error:
    words_free(&c.words);
    ms_numbering_clear(&c.cwid);
    ms_numbering_clear(&c.twid);
    PyMem_Free(fold.p);
    PyMem_Free(spans.p);
    PyMem_Free(text.p);
    Py_DECREF(resolved);
    Py_DECREF(docs);
    Py_XDECREF(fresh);
    Py_XDECREF(texts);
    Py_XDECREF(ntitles);
    Py_XDECREF(words);
    return result;
}

/* split_ascii(text) -> list[str]: the words of ASCII text (memstore.text.words' rule), for
 * the tests that hold this splitter to it. */
PyObject *
memstore_split_ascii(PyObject *self, PyObject *text)
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
