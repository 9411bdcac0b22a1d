/* A cold query token's vocabulary search, compiled: memstore._speedups.neighbour_sets,
 * edits, substring_words, key_words and fuzzy_words.
 *
 * Part of the optional memstore._speedups module (_speedups.c). Each function's oracle is
 * named above it (memstore/_editnear.py, memstore/lexical.py, memstore/_vocabindex.py):
 * tests/test_editnear.py holds the two to the same answers. Here: neighbour_sets, a
 * token's one-edit neighbours; below, edits (the splits of a token into joined words),
 * substring_words (its substring matches), key_words (the words under one key: a stem's)
 * and fuzzy_words (the trigram Dice channel).
 *
 * neighbour_sets(tok, spans, vocab, words, live, tables, overlay) -> list[set[str]]
 *
 * For each span (a, b) of tok, the vocabulary words within one edit (insertion,
 * deletion, substitution, adjacent transposition) of s = tok[a:b], s included when it
 * is a word:
 *
 *   - words one of whose one-character deletions is s or a deletion of s: the
 *     deletion index (memstore/_vocabindex.py) keyed by a 64-bit polynomial hash,
 *     probed with the hash of s and of each of its deletions, every candidate then
 *     verified by the OSA test of memstore/_matchrule.py's within_one_edit (two
 *     strings may share a hash: a collision costs a test, never a wrong word);
 *   - s, and each deletion of s, looked up in vocab (a word one character short);
 *   - words of ASCII digits alone (they have no deletion keys): the edits of s over
 *     the ten digits, generated and looked up in vocab, when s holds at most one
 *     character that is no ASCII digit.
 *
 * tables is a tuple of (keys, offsets, vals) arrays (uint64, int64, int32), one per
 * segment of the deletion table: key keys[k] holds words vals[offsets[k]:offsets[k+1]].
 * overlay maps more keys (int) to lists of word numbers. words[i] is word number i;
 * live, a bool array over the word numbers, or None when every word is live.
 *
 * Python's version builds every probe in a generator and a set per span; here the
 * hashes come from two prefix sums in arrays of uint64 (arithmetic modulo 2**64 is
 * the machine's), each probe is a binary search, and only the strings looked up in
 * vocab are made.
 */
#include "_speedups.h"
#include <stdlib.h>

#define EDIT_B 0x100000001B3ULL   /* memstore/_vocabindex.py's _B */
#define EDIT_LEN 0x9E3779B97F4A7C15ULL /* and _LEN */

/* A run of a str's code points: data[off:off + len] of the given kind. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t off, len;
} Run;

static inline Py_UCS4
run_at(const Run *r, Py_ssize_t i)
{
    return PyUnicode_READ(r->kind, r->data, r->off + i);
}

/* a[ia:] == b[ib:] */
static int
run_tail_eq(const Run *a, Py_ssize_t ia, const Run *b, Py_ssize_t ib)
{
    if (a->len - ia != b->len - ib) {
        return 0;
    }
    for (; ia < a->len; ia++, ib++) {
        if (run_at(a, ia) != run_at(b, ib)) {
            return 0;
        }
    }
    return 1;
}

/* memstore/_matchrule.py's within_one_edit: OSA distance at most one. */
static int
one_edit(const Run *a, const Run *b)
{
    if (a->len > b->len) {
        const Run *t = a;
        a = b;
        b = t;
    }
    Py_ssize_t la = a->len, lb = b->len;
    if (lb - la > 1) {
        return 0;
    }
    Py_ssize_t i = 0;
    while (i < la && run_at(a, i) == run_at(b, i)) {
        i++;
    }
    if (la == lb) {
        if (i >= la || run_tail_eq(a, i + 1, b, i + 1)) {
            return 1;
        }
        return i + 1 < la && run_at(a, i) == run_at(b, i + 1) && run_at(a, i + 1) == run_at(b, i)
               && run_tail_eq(a, i + 2, b, i + 2);
    }
    return run_tail_eq(a, i, b, i + 1);
}

typedef struct {
    const uint64_t *keys;
    const int64_t *offsets;
    const int32_t *vals;
    Py_ssize_t nkeys, nvals;
} Tab;

/* A growable list of word numbers. */
typedef struct {
    int32_t *v;
    Py_ssize_t n, cap;
} Ids;

static int
ids_push(Ids *ids, int32_t x)
{
    if (ids->n == ids->cap) {
        Py_ssize_t cap = ids->cap ? 2 * ids->cap : 64;
        int32_t *v = PyMem_Realloc(ids->v, (size_t)cap * sizeof(int32_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = x;
    return 0;
}

static int
cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* The probing state of one call. */
typedef struct {
    Tab *tabs;
    Py_ssize_t ntabs;
    PyObject *overlay; /* a dict, or NULL when empty */
    const uint8_t *live; /* NULL: every word live */
    Py_ssize_t nlive;
    PyObject *words; /* a list */
    PyObject *vocab; /* a dict (NULL for substring_words, which looks nothing up) */
} Probe;

/* Append the word numbers under key (every segment, then the overlay) to ids. */
static int
probe_key(const Probe *p, uint64_t key, Ids *ids)
{
    for (Py_ssize_t t = 0; t < p->ntabs; t++) {
        const Tab *tab = &p->tabs[t];
        Py_ssize_t lo = 0, hi = tab->nkeys;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (tab->keys[mid] < key) {
                lo = mid + 1;
            }
            else {
                hi = mid;
            }
        }
        if (lo == tab->nkeys || tab->keys[lo] != key) {
            continue;
        }
        int64_t a = tab->offsets[lo], b = tab->offsets[lo + 1];
        if (a < 0 || b < a || b > tab->nvals) {
            PyErr_SetString(PyExc_ValueError, "neighbour_sets: offsets past the values");
            return -1;
        }
        for (int64_t j = a; j < b; j++) {
            if (ids_push(ids, tab->vals[j]) < 0) {
                return -1;
            }
        }
    }
    if (p->overlay != NULL) {
        PyObject *k = PyLong_FromUnsignedLongLong((unsigned long long)key);
        if (k == NULL) {
            return -1;
        }
        PyObject *bucket = PyDict_GetItemWithError(p->overlay, k); /* borrowed */
        Py_DECREF(k);
        if (bucket == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        if (!PyList_Check(bucket)) {
            PyErr_SetString(PyExc_TypeError, "neighbour_sets: overlay values must be lists");
            return -1;
        }
        Py_INCREF(bucket); /* held: an item's __index__ (Python code) may change overlay */
        int rc = 0;
        for (Py_ssize_t j = 0; rc == 0 && j < PyList_GET_SIZE(bucket); j++) {
            long v = PyLong_AsLong(PyList_GET_ITEM(bucket, j));
            if (v == -1 && PyErr_Occurred()) {
                rc = -1;
            }
            else { /* a number past int32 is no word's (-1: an IndexError where it is read) */
                rc = ids_push(ids, v < 0 || v > INT32_MAX ? -1 : (int32_t)v);
            }
        }
        Py_DECREF(bucket);
        return rc;
    }
    return 0;
}

/* Add the str of cps[0:n] to out when it is a key of vocab: 0, or -1 with an error. */
static int
add_if_word(const Probe *p, const Py_UCS4 *cps, Py_ssize_t n, PyObject *out)
{
    PyObject *s = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, cps, n);
    if (s == NULL) {
        return -1;
    }
    int has = PyDict_Contains(p->vocab, s);
    int rc = has < 0 ? -1 : has ? PySet_Add(out, s) : 0;
    Py_DECREF(s);
    return rc;
}

/* The words of ASCII digits alone one insertion, substitution or transposition from
 * s = cps[0:m] (memstore/_editnear.py's digit_words_near), added to out. tmp holds m + 1. */
static int
add_digit_words(const Probe *p, const Py_UCS4 *cps, Py_ssize_t m, Py_UCS4 *tmp, PyObject *out)
{
    Py_ssize_t odd = -1, nodd = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (cps[i] < '0' || cps[i] > '9') {
            odd = i;
            if (++nodd > 1) {
                return 0;
            }
        }
    }
    if (m) {
        memcpy(tmp, cps, (size_t)m * sizeof(Py_UCS4));
    }
    if (nodd == 1) { /* only substituting the one other character can reach such a word */
        for (Py_UCS4 d = '0'; d <= '9'; d++) {
            tmp[odd] = d;
            if (add_if_word(p, tmp, m, out) < 0) {
                return -1;
            }
        }
        return 0;
    }
    for (Py_ssize_t i = 0; i <= m; i++) { /* insertions */
        memcpy(tmp, cps, (size_t)i * sizeof(Py_UCS4));
        memcpy(tmp + i + 1, cps + i, (size_t)(m - i) * sizeof(Py_UCS4));
        for (Py_UCS4 d = '0'; d <= '9'; d++) {
            tmp[i] = d;
            if (add_if_word(p, tmp, m + 1, out) < 0) {
                return -1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) { /* substitutions */
        memcpy(tmp, cps, (size_t)m * sizeof(Py_UCS4));
        for (Py_UCS4 d = '0'; d <= '9'; d++) {
            tmp[i] = d;
            if (add_if_word(p, tmp, m, out) < 0) {
                return -1;
            }
        }
    }
    for (Py_ssize_t i = 1; i < m; i++) { /* transpositions */
        memcpy(tmp, cps, (size_t)m * sizeof(Py_UCS4));
        tmp[i - 1] = cps[i];
        tmp[i] = cps[i - 1];
        if (add_if_word(p, tmp, m, out) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The neighbours of tok[a:b] into out. all: tok's code points; pre and suf: scratch of
 * len(tok) + 2 uint64 each; tmp: of len(tok) + 2 code points; ids: the candidates' list. */
static int
span_near(const Probe *p, PyObject *tok, const Py_UCS4 *all, Py_ssize_t a, Py_ssize_t b,
          uint64_t *pre, uint64_t *suf, Py_UCS4 *tmp, Ids *ids, PyObject *out)
{
    const Py_UCS4 *cps = all + a;
    Py_ssize_t m = b - a;
    /* pre[i]: sum of cps[j] * B**j over j < i; suf[i]: of cps[j] * B**(j-1) over j >= i >= 1. */
    uint64_t pw = 1;
    pre[0] = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        pre[j + 1] = pre[j] + (uint64_t)cps[j] * pw;
        pw *= EDIT_B;
    }
    /* suf[i] = s1[m] - s1[i], s1[i]: the sum of cps[j] * B**(j-1) over 1 <= j < i. */
    uint64_t acc = 0, q = 1;
    suf[1] = 0;
    for (Py_ssize_t j = 1; j < m; j++) {
        acc += (uint64_t)cps[j] * q;
        q *= EDIT_B;
        suf[j + 1] = acc;
    }
    for (Py_ssize_t i = 1; i <= m; i++) {
        suf[i] = acc - suf[i];
    }
    ids->n = 0;
    if (probe_key(p, pre[m] + (uint64_t)m * EDIT_LEN, ids) < 0) {
        return -1;
    }
    uint64_t tail = (uint64_t)(m - 1) * EDIT_LEN;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (probe_key(p, pre[i] + suf[i + 1] + tail, ids) < 0) {
            return -1;
        }
    }
    if (ids->n > 1) {
        qsort(ids->v, (size_t)ids->n, sizeof(int32_t), cmp_i32);
    }
    Run s = {PyUnicode_KIND(tok), PyUnicode_DATA(tok), a, m};
    for (Py_ssize_t k = 0; k < ids->n; k++) {
        int32_t id = ids->v[k];
        if (k && id == ids->v[k - 1]) {
            continue;
        }
        /* words read anew: a word's __hash__ (Python code, in PySet_Add) may change it */
        if (id < 0 || id >= PyList_GET_SIZE(p->words) || (p->live != NULL && id >= p->nlive)) {
            PyErr_SetString(PyExc_IndexError, "neighbour_sets: a word number past the words");
            return -1;
        }
        if (p->live != NULL && !p->live[id]) {
            continue;
        }
        PyObject *w = PyList_GET_ITEM(p->words, id);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "neighbour_sets: words must be str");
            return -1;
        }
        Run r = {PyUnicode_KIND(w), PyUnicode_DATA(w), 0, PyUnicode_GET_LENGTH(w)};
        if (one_edit(&s, &r)) {
            Py_INCREF(w); /* held: its __hash__ (Python code) may drop the list's reference */
            int rc = PySet_Add(out, w);
            Py_DECREF(w);
            if (rc < 0) {
                return -1;
            }
        }
    }
    if (add_if_word(p, cps, m, out) < 0) { /* s itself */
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) { /* a word missing one character */
        memcpy(tmp, cps, (size_t)i * sizeof(Py_UCS4));
        memcpy(tmp + i, cps + i + 1, (size_t)(m - i - 1) * sizeof(Py_UCS4));
        if (add_if_word(p, tmp, m - 1, out) < 0) {
            return -1;
        }
    }
    return add_digit_words(p, cps, m, tmp, out);
}

/* The probe's state for one call: the tables' buffers held, the token's code points and
 * scratch. */
typedef struct {
    Probe p;
    Py_buffer *views;
    Py_ssize_t held;
    Py_buffer live_view;
    int live_held;
    Py_UCS4 *cps; /* the token's code points */
    Py_ssize_t n;
    uint64_t *sums; /* 2 * (n + 2) */
    Py_UCS4 *tmp;   /* n + 2 */
    Ids ids;
} Call;

static void
call_close(Call *c)
{
    for (Py_ssize_t i = 0; i < c->held; i++) {
        PyBuffer_Release(&c->views[i]);
    }
    if (c->live_held) {
        PyBuffer_Release(&c->live_view);
    }
    PyMem_Free(c->views);
    PyMem_Free(c->p.tabs);
    PyMem_Free(c->sums);
    PyMem_Free(c->tmp);
    PyMem_Free(c->cps);
    PyMem_Free(c->ids.v);
}

/* Hold the tables and set up the scratch for token tok: 0, or -1 with an error (call
 * call_close either way). */
static int
call_open(Call *c, PyObject *tok, PyObject *vocab, PyObject *words, PyObject *live,
          PyObject *tables, PyObject *overlay)
{
    memset(c, 0, sizeof(*c));
    Py_ssize_t n = PyUnicode_GET_LENGTH(tok), ntabs = PyTuple_GET_SIZE(tables);
    c->n = n;
    c->views = PyMem_Calloc((size_t)(3 * ntabs + 1), sizeof(Py_buffer));
    Tab *tabs = c->p.tabs = PyMem_Calloc((size_t)(ntabs + 1), sizeof(Tab));
    c->sums = PyMem_Malloc((size_t)(2 * (n + 2)) * sizeof(uint64_t));
    c->tmp = PyMem_Malloc((size_t)(n + 2) * sizeof(Py_UCS4));
    c->cps = PyUnicode_AsUCS4Copy(tok);
    if (c->cps == NULL) {
        return -1;
    }
    if (c->views == NULL || tabs == NULL || c->sums == NULL || c->tmp == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->p.ntabs = ntabs;
    c->p.overlay = PyDict_GET_SIZE(overlay) ? overlay : NULL;
    c->p.words = words;
    c->p.vocab = vocab;
    static const char *what[3] = {"keys", "offsets", "vals"};
    static const Py_ssize_t size[3] = {8, 8, 4};
    for (Py_ssize_t t = 0; t < ntabs; t++) {
        PyObject *row = PyTuple_GET_ITEM(tables, t);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 3) {
            PyErr_SetString(PyExc_TypeError, "neighbour_sets: tables hold (keys, offsets, vals)");
            return -1;
        }
        for (int k = 0; k < 3; k++) {
            if (ms_hold_1d(PyTuple_GET_ITEM(row, k), &c->views[c->held], size[k], "neighbour_sets",
                           what[k]) < 0) {
                return -1;
            }
            c->held++;
        }
        Py_buffer *v = &c->views[c->held - 3];
        tabs[t].keys = v[0].buf;
        tabs[t].nkeys = v[0].shape[0];
        tabs[t].offsets = v[1].buf;
        tabs[t].vals = v[2].buf;
        tabs[t].nvals = v[2].shape[0];
        if (v[1].shape[0] != tabs[t].nkeys + 1) {
            PyErr_SetString(PyExc_ValueError, "neighbour_sets: offsets must be one longer than keys");
            return -1;
        }
    }
    if (live != Py_None) {
        if (ms_hold_1d(live, &c->live_view, 1, "neighbour_sets", "live") < 0) {
            return -1;
        }
        c->live_held = 1;
        c->p.live = c->live_view.buf;
        c->p.nlive = c->live_view.shape[0];
    }
    return 0;
}

/* A new set of the neighbours of tok[a:b], or NULL with an error. */
static PyObject *
call_near(Call *c, PyObject *tok, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *near = PySet_New(NULL);
    if (near != NULL && span_near(&c->p, tok, c->cps, a, b, c->sums, c->sums + c->n + 2, c->tmp,
                                  &c->ids, near) < 0) {
        Py_CLEAR(near);
    }
    return near;
}

PyObject *
memstore_neighbour_sets(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tok, *spans, *vocab, *words, *live, *tables, *overlay;
    if (!PyArg_ParseTuple(args, "UO!O!O!OO!O!:neighbour_sets", &tok, &PyList_Type, &spans,
                          &PyDict_Type, &vocab, &PyList_Type, &words, &live, &PyTuple_Type,
                          &tables, &PyDict_Type, &overlay)) {
        return NULL;
    }
    Call c;
    PyObject *out = NULL;
    /* A snapshot of spans: a bound's __index__ (Python code) cannot pull a span away. */
    spans = PyList_AsTuple(spans);
    if (spans == NULL) {
        return NULL;
    }
    if (call_open(&c, tok, vocab, words, live, tables, overlay) < 0) {
        goto done;
    }
    Py_ssize_t nspans = PyTuple_GET_SIZE(spans);
    out = PyList_New(nspans);
    for (Py_ssize_t k = 0; out != NULL && k < nspans; k++) {
        Py_ssize_t a, b;
        PyObject *span = PyTuple_GET_ITEM(spans, k);
        if (!PyTuple_Check(span) || !PyArg_ParseTuple(span, "nn", &a, &b)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "neighbour_sets: spans must be (a, b) tuples");
            }
            Py_CLEAR(out);
            break;
        }
        if (a < 0 || b < a || b > c.n) {
            PyErr_Format(PyExc_ValueError, "neighbour_sets: span (%zd, %zd) outside the token",
                         a, b);
            Py_CLEAR(out);
            break;
        }
        PyObject *near = call_near(&c, tok, a, b);
        if (near == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, near);
    }
done:
    call_close(&c);
    Py_DECREF(spans);
    return out;
}

/* ----------------------------------------------------------------------- edits
 *
 * edits(tok, levels, level_edit, vocab, words, live, tables, overlay) -> (near, pairs)
 *
 * memstore/_editnear.py's pure_edits (the oracle): tok's one-edit neighbours, and the
 * joined pairs (w1, w2) of vocabulary words tok is one edit from, neither word strong
 * (at level_edit or better in levels, or one edit from tok). A split of tok whose
 * vocabulary half is weak is probed for the other half's neighbours; a transposition
 * straddling a split is looked up as it is.
 */

/* A split: the vocabulary half, the other half's span (its set in near_of), which side. */
typedef struct {
    PyObject *word; /* a strong reference */
    Py_ssize_t set; /* index of the other half's neighbours */
    int is_left;
} Split;

/* Whether w (a vocabulary word) is weak: below level_edit in levels, and more than one
 * edit from tok. 1, 0, or -1 with an error. */
static int
weak(PyObject *levels, double level_edit, const Run *tokrun, PyObject *w)
{
    PyObject *lv = PyDict_GetItemWithError(levels, w);
    if (lv == NULL && PyErr_Occurred()) {
        return -1;
    }
    double x = lv == NULL ? 0.0 : PyFloat_AsDouble(lv); /* levels.get(w, 0.0) */
    if (x == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (!(x < level_edit)) {
        return 0;
    }
    Run r = {PyUnicode_KIND(w), PyUnicode_DATA(w), 0, PyUnicode_GET_LENGTH(w)};
    return !one_edit(tokrun, &r);
}

/* Add (a, b) to the set pairs: 0, or -1 with an error. */
static int
add_pair(PyObject *pairs, PyObject *a, PyObject *b)
{
    PyObject *t = PyTuple_Pack(2, a, b);
    if (t == NULL) {
        return -1;
    }
    int rc = PySet_Add(pairs, t);
    Py_DECREF(t);
    return rc;
}

/* The string tok[a:b] when it is a vocabulary word (a new reference), NULL otherwise
 * (an error set or not). */
static PyObject *
word_at(PyObject *vocab, PyObject *tok, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *s = PyUnicode_Substring(tok, a, b);
    if (s == NULL) {
        return NULL;
    }
    int has = PyDict_Contains(vocab, s);
    if (has <= 0) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

PyObject *
memstore_edits(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tok, *levels, *vocab, *words, *live, *tables, *overlay;
    double level_edit;
    if (!PyArg_ParseTuple(args, "UO!dO!O!OO!O!:edits", &tok, &PyDict_Type, &levels,
                          &level_edit, &PyDict_Type, &vocab, &PyList_Type, &words, &live,
                          &PyTuple_Type, &tables, &PyDict_Type, &overlay)) {
        return NULL;
    }
    Call c;
    Py_ssize_t n = PyUnicode_GET_LENGTH(tok), nsplits = 0, nsets = 0;
    Split *splits = PyMem_Calloc((size_t)(2 * n + 2), sizeof(Split));
    /* The spans probed, (0, n) first: (k, n) is set span_kn[k], (0, k) is span_0k[k]; -1 unset. */
    Py_ssize_t *span_kn = PyMem_Malloc((size_t)(2 * (n + 1)) * sizeof(Py_ssize_t));
    Py_ssize_t *span_0k = span_kn == NULL ? NULL : span_kn + n + 1;
    PyObject **sets = PyMem_Calloc((size_t)(2 * n + 3), sizeof(PyObject *));
    PyObject *strong = NULL, *pairs = NULL, *out = NULL;
    Run tokrun = {PyUnicode_KIND(tok), PyUnicode_DATA(tok), 0, n};
    if (call_open(&c, tok, vocab, words, live, tables, overlay) < 0) {
        goto done;
    }
    if (splits == NULL || span_kn == NULL || sets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k <= n; k++) {
        span_kn[k] = span_0k[k] = -1;
    }
    span_kn[0] = span_0k[n] = nsets++; /* (0, n) */
    for (Py_ssize_t k = 0; k <= n; k++) {
        for (int is_left = 1; is_left >= 0; is_left--) {
            PyObject *w = is_left ? word_at(vocab, tok, 0, k) : word_at(vocab, tok, k, n);
            if (w == NULL) {
                if (PyErr_Occurred()) {
                    goto done;
                }
                continue;
            }
            int wk = weak(levels, level_edit, &tokrun, w);
            if (wk <= 0) {
                Py_DECREF(w);
                if (wk < 0) {
                    goto done;
                }
                continue;
            }
            Py_ssize_t *at = is_left ? &span_kn[k] : &span_0k[k];
            if (*at < 0) {
                *at = nsets++;
            }
            splits[nsplits++] = (Split){w, *at, is_left};
        }
    }
    /* Each span's neighbours, once however many splits share it: (0, n) is set 0. */
    for (Py_ssize_t k = 0; k <= n; k++) {
        if (span_kn[k] >= 0 && sets[span_kn[k]] == NULL &&
            (sets[span_kn[k]] = call_near(&c, tok, k, n)) == NULL) {
            goto done;
        }
        if (span_0k[k] >= 0 && sets[span_0k[k]] == NULL &&
            (sets[span_0k[k]] = call_near(&c, tok, 0, k)) == NULL) {
            goto done;
        }
    }
    PyObject *near = sets[0];
    strong = PySet_New(near);
    pairs = PySet_New(NULL);
    if (strong == NULL || pairs == NULL) {
        goto done;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(levels, &pos, &key, &value)) {
        Py_INCREF(key); /* held: a level's __float__ (Python code) may change levels */
        Py_INCREF(value);
        double x = PyFloat_AsDouble(value);
        int rc = x == -1.0 && PyErr_Occurred() ? -1 : x >= level_edit ? PySet_Add(strong, key) : 0;
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0) {
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < nsplits; i++) {
        PyObject *it = PyObject_GetIter(sets[splits[i].set]), *w;
        if (it == NULL) {
            goto done;
        }
        while ((w = PyIter_Next(it)) != NULL) {
            int is_strong = PySet_Contains(strong, w);
            int rc = is_strong < 0 ? -1
                     : is_strong   ? 0
                     : splits[i].is_left ? add_pair(pairs, splits[i].word, w)
                                         : add_pair(pairs, w, splits[i].word);
            Py_DECREF(w);
            if (rc < 0) {
                Py_DECREF(it);
                goto done;
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    /* A transposition straddling the split: tok[:k-1] + tok[k] + tok[k-1] + tok[k+1:],
     * cut at k. */
    for (Py_ssize_t k = 1; k < n; k++) {
        Py_UCS4 *t = c.tmp;
        memcpy(t, c.cps, (size_t)n * sizeof(Py_UCS4));
        t[k - 1] = c.cps[k];
        t[k] = c.cps[k - 1];
        PyObject *left = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, t, k);
        PyObject *right = left == NULL ? NULL
                                       : PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, t + k,
                                                                   n - k);
        int rc = right == NULL ? -1 : PyDict_Contains(vocab, left);
        if (rc > 0) {
            rc = PyDict_Contains(vocab, right);
        }
        if (rc > 0) {
            rc = PySet_Contains(strong, left);
            rc = rc < 0 ? -1 : rc ? 0 : 1;
        }
        if (rc > 0) {
            rc = PySet_Contains(strong, right);
            rc = rc < 0 ? -1 : rc ? 0 : 1;
        }
        if (rc > 0) {
            rc = add_pair(pairs, left, right);
        }
        Py_XDECREF(left);
        Py_XDECREF(right);
        if (rc < 0) {
            goto done;
        }
    }
    PyObject *listed = PySequence_List(pairs);
    if (listed != NULL) {
        out = PyTuple_Pack(2, near, listed);
        Py_DECREF(listed);
    }
done:
    call_close(&c);
    for (Py_ssize_t i = 0; i < nsplits; i++) {
        Py_DECREF(splits[i].word);
    }
    if (sets != NULL) {
        for (Py_ssize_t i = 0; i < nsets; i++) {
            Py_XDECREF(sets[i]);
        }
    }
    PyMem_Free(splits);
    PyMem_Free(span_kn);
    PyMem_Free(sets);
    Py_XDECREF(strong);
    Py_XDECREF(pairs);
    return out;
}

/* ------------------------------------------------------------------ substrings
 *
 * substring_words(tok, words, live, tables, overlay) -> list[str]
 *
 * memstore/lexical.py's Lexicon._substring_words for a token of two characters or more,
 * or one kept alone as a gram (the oracle): the live vocabulary words holding tok, in
 * word-number order. tables and overlay are the gram table's (memstore/_vocabindex.py:
 * a gram's key is its code points packed, exact). A token of one to three characters is
 * a gram itself: its words. A longer one is in a word only if each of its trigrams is:
 * the words of its rarest trigram are tested for tok (Python intersects the trigrams'
 * words first, then tests; the words left are the same).
 */

#define GRAM_BI (UINT64_C(1) << 63)
#define GRAM_UNI ((UINT64_C(1) << 63) | (UINT64_C(1) << 62))

/* Keep the live ones of ids (their numbers checked against words). */
static int
live_only(const Probe *p, Ids *ids)
{
    Py_ssize_t nwords = PyList_GET_SIZE(p->words), kept = 0;
    for (Py_ssize_t k = 0; k < ids->n; k++) {
        int32_t id = ids->v[k];
        if (id < 0 || id >= nwords || (p->live != NULL && id >= p->nlive)) {
            PyErr_SetString(PyExc_IndexError, "substring_words: a word number past the words");
            return -1;
        }
        if (p->live == NULL || p->live[id]) {
            ids->v[kept++] = id;
        }
    }
    ids->n = kept;
    return 0;
}

PyObject *
memstore_substring_words(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tok, *words, *live, *tables, *overlay;
    if (!PyArg_ParseTuple(args, "UO!OO!O!:substring_words", &tok, &PyList_Type, &words, &live,
                          &PyTuple_Type, &tables, &PyDict_Type, &overlay)) {
        return NULL;
    }
    Call c;
    Ids best = {NULL, 0, 0};
    PyObject *out = NULL;
    if (call_open(&c, tok, NULL, words, live, tables, overlay) < 0) { /* no vocab: no lookups */
        goto done;
    }
    Py_ssize_t n = c.n;
    const Py_UCS4 *cp = c.cps;
    int verify = n > 3, found_best = 0;
    if (n == 0) {
        out = PyList_New(0);
        goto done;
    }
    Py_ssize_t nkeys = n <= 3 ? 1 : n - 2;
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        uint64_t key;
        if (n == 1) {
            key = GRAM_UNI | cp[0];
        }
        else if (n == 2) {
            key = GRAM_BI | ((uint64_t)cp[0] << 21) | cp[1];
        }
        else {
            key = ((uint64_t)cp[k] << 42) | ((uint64_t)cp[k + 1] << 21) | cp[k + 2];
        }
        c.ids.n = 0;
        if (probe_key(&c.p, key, &c.ids) < 0 || live_only(&c.p, &c.ids) < 0) {
            goto done;
        }
        if (!found_best || c.ids.n < best.n) { /* the rarest trigram so far: keep its words */
            Ids t = best;
            best = c.ids;
            c.ids = t;
            found_best = 1;
        }
        if (best.n == 0) {
            break; /* a trigram in no word: nor is tok */
        }
    }
    if (best.n > 1) {
        qsort(best.v, (size_t)best.n, sizeof(int32_t), cmp_i32);
    }
    out = PyList_New(0);
    for (Py_ssize_t k = 0; out != NULL && k < best.n; k++) {
        if (k && best.v[k] == best.v[k - 1]) {
            continue;
        }
        if (best.v[k] >= PyList_GET_SIZE(words)) { /* an overlay's __index__ changed it */
            PyErr_SetString(PyExc_IndexError, "substring_words: a word number past the words");
            Py_CLEAR(out);
            break;
        }
        PyObject *w = PyList_GET_ITEM(words, best.v[k]);
        int has = 1;
        if (verify) {
            if (!PyUnicode_Check(w)) {
                PyErr_SetString(PyExc_TypeError, "substring_words: words must be str");
                Py_CLEAR(out);
                break;
            }
            has = PyUnicode_Contains(w, tok);
        }
        if (has < 0 || (has && PyList_Append(out, w) < 0)) {
            Py_CLEAR(out);
        }
    }
done:
    call_close(&c);
    PyMem_Free(best.v);
    return out;
}

/* ------------------------------------------------------------------ one key
 *
 * key_words(key, words, live, tables, overlay) -> list[str]
 *
 * The live words under one key of a table (the stem table: memstore/_vocabindex.py's
 * VocabIndex.stem_words, whose numpy lookup is the oracle), in word-number order: one
 * binary search a segment instead of a few numpy calls.
 */
PyObject *
memstore_key_words(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long key;
    PyObject *words, *live, *tables, *overlay;
    if (!PyArg_ParseTuple(args, "KO!OO!O!:key_words", &key, &PyList_Type, &words, &live,
                          &PyTuple_Type, &tables, &PyDict_Type, &overlay)) {
        return NULL;
    }
    Call c;
    PyObject *out = NULL, *empty = PyUnicode_New(0, 0);
    if (empty == NULL || call_open(&c, empty, NULL, words, live, tables, overlay) < 0 ||
        probe_key(&c.p, (uint64_t)key, &c.ids) < 0 || live_only(&c.p, &c.ids) < 0) {
        goto done;
    }
    if (c.ids.n > 1) {
        qsort(c.ids.v, (size_t)c.ids.n, sizeof(int32_t), cmp_i32);
    }
    out = PyList_New(0);
    for (Py_ssize_t k = 0; out != NULL && k < c.ids.n; k++) {
        if ((k == 0 || c.ids.v[k] != c.ids.v[k - 1]) &&
            PyList_Append(out, PyList_GET_ITEM(words, c.ids.v[k])) < 0) {
            Py_CLEAR(out);
        }
    }
done:
    if (empty != NULL) {
        call_close(&c);
        Py_DECREF(empty);
    }
    return out;
}

/* ------------------------------------------------------------------ fuzzy
 *
 * fuzzy_words(tok, words, live, tables, overlay, min_dice, fuzzy_max) -> dict[str, float]
 *
 * memstore/lexical.py's Lexicon._fuzzy_words for a token of three characters or more
 * (the oracle): each live word sharing at least a third of tok's distinct trigrams (the
 * gram table, as for substring_words), whose trigram Dice coefficient with tok
 * (memstore/_matchrule.py's trigram_dice: 2 * shared / (tok's + the word's distinct
 * trigrams), the same double arithmetic) reaches min_dice, mapped to fuzzy_max * dice, in
 * word-number order. Trigrams are compared as their packed codes (exact), the word's
 * sorted and merged with the token's, instead of a frozenset of strings a word.
 */

static int
cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The distinct trigram codes of the run, sorted, into out (room for len - 2): how many. */
static Py_ssize_t
trigram_codes(const Run *r, uint64_t *out)
{
    Py_ssize_t n = r->len - 2;
    if (n <= 0) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = ((uint64_t)run_at(r, i) << 42) | ((uint64_t)run_at(r, i + 1) << 21) |
                 run_at(r, i + 2);
    }
    qsort(out, (size_t)n, sizeof(uint64_t), cmp_u64);
    Py_ssize_t k = 1;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (out[i] != out[k - 1]) {
            out[k++] = out[i];
        }
    }
    return k;
}

PyObject *
memstore_fuzzy_words(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tok, *words, *live, *tables, *overlay;
    double min_dice, fuzzy_max;
    if (!PyArg_ParseTuple(args, "UO!OO!O!dd:fuzzy_words", &tok, &PyList_Type, &words, &live,
                          &PyTuple_Type, &tables, &PyDict_Type, &overlay, &min_dice,
                          &fuzzy_max)) {
        return NULL;
    }
    if (PyUnicode_GET_LENGTH(tok) < 3) {
        Py_RETURN_NOTIMPLEMENTED; /* a short token is its own gram: the Python path */
    }
    Call c;
    PyObject *out = NULL;
    uint64_t *tg = NULL, *wg = NULL;
    Py_ssize_t wg_room = 0;
    if (call_open(&c, tok, NULL, words, live, tables, overlay) < 0) {
        goto done;
    }
    Run tr = {PyUnicode_KIND(tok), PyUnicode_DATA(tok), 0, c.n};
    tg = PyMem_Malloc((size_t)c.n * sizeof(uint64_t));
    if (tg == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t ntg = trigram_codes(&tr, tg);
    for (Py_ssize_t k = 0; k < ntg; k++) {
        if (probe_key(&c.p, tg[k], &c.ids) < 0) {
            goto done;
        }
    }
    if (live_only(&c.p, &c.ids) < 0) {
        goto done;
    }
    if (c.ids.n > 1) {
        qsort(c.ids.v, (size_t)c.ids.n, sizeof(int32_t), cmp_i32);
    }
    double need = (double)ntg / 3.0; /* dice >= 0.5 needs shared >= |tok's| / 3 */
    out = PyDict_New();
    for (Py_ssize_t k = 0; out != NULL && k < c.ids.n;) {
        int32_t id = c.ids.v[k];
        Py_ssize_t count = 0;
        while (k < c.ids.n && c.ids.v[k] == id) {
            count++;
            k++;
        }
        if (!((double)count >= need)) {
            continue;
        }
        if (id >= PyList_GET_SIZE(words)) { /* a word's __hash__ (in PyDict_SetItem) changed it */
            PyErr_SetString(PyExc_IndexError, "fuzzy_words: a word number past the words");
            Py_CLEAR(out);
            break;
        }
        PyObject *w = PyList_GET_ITEM(words, id);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "fuzzy_words: words must be str");
            Py_CLEAR(out);
            break;
        }
        Run wr = {PyUnicode_KIND(w), PyUnicode_DATA(w), 0, PyUnicode_GET_LENGTH(w)};
        Py_ssize_t nwg = 1, shared = 0; /* a word under three characters is its own gram */
        if (wr.len >= 3) {
            if (wr.len > wg_room) {
                PyMem_Free(wg);
                wg_room = wr.len;
                wg = PyMem_Malloc((size_t)wg_room * sizeof(uint64_t));
                if (wg == NULL) {
                    PyErr_NoMemory();
                    Py_CLEAR(out);
                    break;
                }
            }
            nwg = trigram_codes(&wr, wg);
            for (Py_ssize_t i = 0, j = 0; i < ntg && j < nwg;) {
                if (tg[i] < wg[j]) {
                    i++;
                }
                else if (tg[i] > wg[j]) {
                    j++;
                }
                else {
                    shared++;
                    i++;
                    j++;
                }
            }
        }
        double dice = 2.0 * (double)shared / (double)(ntg + nwg);
        if (dice >= min_dice) {
            PyObject *lv = PyFloat_FromDouble(fuzzy_max * dice);
            Py_INCREF(w); /* held: its __hash__ (Python code) may drop the list's reference */
            if (lv == NULL || PyDict_SetItem(out, w, lv) < 0) {
                Py_CLEAR(out);
            }
            Py_DECREF(w);
            Py_XDECREF(lv);
        }
    }
done:
    call_close(&c);
    PyMem_Free(tg);
    PyMem_Free(wg);
    return out;
}
