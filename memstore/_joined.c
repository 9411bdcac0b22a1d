/* memstore._speedups.holding and joined_slots: the documents holding a pair of words,
 * compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c). The oracles are
 * memstore/lexical.py's _holding and the pure path of Lexicon._joined_slots, which
 * differential tests hold these to.
 *
 * holding(texts, slots, pair) -> list[int] | NotImplemented
 *
 * Those of slots whose text (texts[slot], a str) holds pair. The substring tests run
 * without the GIL over ASCII texts (each held by a reference for the call) when they are
 * long enough (NOGIL_CHARS); NotImplemented when pair or a text is not ASCII (the
 * caller tests those in Python).
 *
 * joined_slots(pairs, texts, strong, capacity) -> list[int]
 *
 * A token one edit from two adjacent words joined (w1 w2) matches the documents
 * holding them adjacently. pairs is a list of (a, b, pattern): a and b the postings of
 * w1 and w2 (sorted int32 arrays of slots) and pattern " w1 w2 "; texts[slot] is a
 * document's words as one space-padded str; strong is a list of int32 arrays of slots
 * matched at the edit level or better already (left out: they gain nothing). Returns
 * each slot below capacity that holds some pair's pattern, is in both its postings and
 * in no strong array, once, pair by pair. Python tests the few documents of the rarer
 * word directly and intersects larger postings with numpy first, a few array calls a
 * pair; here both are one loop: each slot of the smaller postings binary-searched in
 * the larger, then the texts of those left searched for the pattern (as holding does:
 * without the GIL when they are ASCII and long).
 */
#include "_speedups.h"

/* Whether sorted big[0:n] holds x. */
static int
has_slot(const int32_t *big, Py_ssize_t n, int32_t x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (big[mid] < x) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo < n && big[lo] == x;
}

#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
#define HAVE_MEMMEM 1
#else
#define HAVE_MEMMEM 0
#endif

/* Characters of ASCII texts below which a call keeps the GIL: handing it to another
 * thread and taking it back (two thread switches when that thread wants it) would cost
 * about what the search does. */
#define NOGIL_CHARS 32768

/* Whether text[0:n] holds pat[0:m]. */
static int
holds(const char *text, Py_ssize_t n, const char *pat, Py_ssize_t m)
{
    if (m == 0) {
        return 1;
    }
    if (n < m) {
        return 0;
    }
#if HAVE_MEMMEM
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

PyObject *
memstore_holding(PyObject *self, PyObject *args)
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
    /* held[i]: slot i's text; held[n + i]: the slot itself (another thread may change the
     * list while the GIL is released). */
    PyObject **held = PyMem_Calloc((size_t)(2 * n + 1), sizeof(PyObject *));
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
        held[n + i] = Py_NewRef(PyList_GET_ITEM(slots, i));
    }
    const char *pat = (const char *)PyUnicode_1BYTE_DATA(pair);
    Py_ssize_t m = PyUnicode_GET_LENGTH(pair);
    Py_ssize_t bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        bytes += PyUnicode_GET_LENGTH(held[i]);
    }
    PyThreadState *released = bytes >= NOGIL_CHARS ? PyEval_SaveThread() : NULL;
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
            PyList_SET_ITEM(out, k++, Py_NewRef(held[n + i]));
        }
    }
done:
    if (held != NULL) {
        for (Py_ssize_t i = 0; i < 2 * n; i++) {
            Py_XDECREF(held[i]);
        }
    }
    PyMem_Free(held);
    PyMem_Free(found);
    return out;
}

/* The candidates of one pair: their slots and texts (strong references). */
typedef struct {
    int32_t *slot;
    PyObject **text;
    char *hit;
    Py_ssize_t n;
} Cands;

static void
cands_clear(Cands *c)
{
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_DECREF(c->text[i]);
    }
    c->n = 0;
}

/* Test the slots of the smaller of a and b that the larger holds too and none excludes:
 * append those whose text holds pattern to out, and exclude them. c has room for the
 * smaller's size. 0, or -1 with an error. */
static int
test_pair(const Py_buffer *a, const Py_buffer *b, PyObject *pattern, PyObject *texts,
          uint8_t *excluded, Py_ssize_t capacity, Cands *c, PyObject *out)
{
    const Py_buffer *few = a->shape[0] <= b->shape[0] ? a : b, *many = few == a ? b : a;
    const int32_t *fs = few->buf, *ms = many->buf;
    Py_ssize_t nf = few->shape[0], nm = many->shape[0], ntexts = PyList_GET_SIZE(texts);
    int ascii = PyUnicode_IS_ASCII(pattern);
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        int32_t s = fs[i];
        if (s < 0 || s >= capacity || s >= ntexts) {
            PyErr_SetString(PyExc_IndexError, "joined_slots: a slot past the texts");
            return -1;
        }
        if (excluded[s] || !has_slot(ms, nm, s)) {
            continue;
        }
        PyObject *text = PyList_GET_ITEM(texts, s);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "joined_slots: texts must be str");
            return -1;
        }
        ascii = ascii && PyUnicode_IS_ASCII(text);
        chars += PyUnicode_GET_LENGTH(text);
        c->slot[c->n] = s;
        c->text[c->n++] = Py_NewRef(text);
    }
    if (ascii) {
        const char *pat = (const char *)PyUnicode_1BYTE_DATA(pattern);
        Py_ssize_t m = PyUnicode_GET_LENGTH(pattern);
        PyThreadState *released = chars >= NOGIL_CHARS ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < c->n; i++) {
            c->hit[i] = (char)holds((const char *)PyUnicode_1BYTE_DATA(c->text[i]),
                                    PyUnicode_GET_LENGTH(c->text[i]), pat, m);
        }
        if (released != NULL) {
            PyEval_RestoreThread(released);
        }
    }
    else {
        for (Py_ssize_t i = 0; i < c->n; i++) {
            int has = PyUnicode_Contains(c->text[i], pattern);
            if (has < 0) {
                return -1;
            }
            c->hit[i] = (char)has;
        }
    }
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (c->hit[i]) {
            excluded[c->slot[i]] = 1;
            PyObject *slot = PyLong_FromLong(c->slot[i]);
            int rc = slot == NULL ? -1 : PyList_Append(out, slot);
            Py_XDECREF(slot);
            if (rc < 0) {
                return -1;
            }
        }
    }
    return 0;
}

PyObject *
memstore_joined_slots(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *pairs, *texts, *strong;
    Py_ssize_t capacity;
    if (!PyArg_ParseTuple(args, "O!O!O!n:joined_slots", &PyList_Type, &pairs, &PyList_Type,
                          &texts, &PyList_Type, &strong, &capacity)) {
        return NULL;
    }
    if (capacity < 0) {
        PyErr_SetString(PyExc_ValueError, "joined_slots: capacity must be >= 0");
        return NULL;
    }
    uint8_t *excluded = PyMem_Calloc((size_t)capacity + 1, 1);
    PyObject *out = NULL;
    Cands c = {NULL, NULL, NULL, 0};
    Py_ssize_t room = 0;
    if (excluded == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(strong); k++) {
        Py_buffer v;
        if (ms_hold_1d(PyList_GET_ITEM(strong, k), &v, 4, "joined_slots", "slots") < 0) {
            goto done;
        }
        const int32_t *s = v.buf;
        for (Py_ssize_t i = 0; i < v.shape[0]; i++) {
            if (s[i] >= 0 && s[i] < capacity) {
                excluded[s[i]] = 1;
            }
        }
        PyBuffer_Release(&v);
    }
    out = PyList_New(0);
    for (Py_ssize_t k = 0; out != NULL && k < PyList_GET_SIZE(pairs); k++) {
        PyObject *pair = PyList_GET_ITEM(pairs, k);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 3 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 2))) {
            PyErr_SetString(PyExc_TypeError, "joined_slots: pairs hold (a, b, pattern)");
            Py_CLEAR(out);
            break;
        }
        Py_buffer a, b;
        if (ms_hold_1d(PyTuple_GET_ITEM(pair, 0), &a, 4, "joined_slots", "slots") < 0) {
            Py_CLEAR(out);
            break;
        }
        if (ms_hold_1d(PyTuple_GET_ITEM(pair, 1), &b, 4, "joined_slots", "slots") < 0) {
            PyBuffer_Release(&a);
            Py_CLEAR(out);
            break;
        }
        /* Held for the test: another thread may change pairs while the GIL is released. */
        Py_INCREF(pair);
        Py_ssize_t few = a.shape[0] <= b.shape[0] ? a.shape[0] : b.shape[0];
        int rc = 0;
        if (few > room) { /* room for the rarer word's slots */
            PyMem_Free(c.slot);
            PyMem_Free(c.text);
            PyMem_Free(c.hit);
            c.slot = PyMem_Malloc((size_t)few * sizeof(int32_t));
            c.text = PyMem_Malloc((size_t)few * sizeof(PyObject *));
            c.hit = PyMem_Malloc((size_t)few);
            room = few;
            if (c.slot == NULL || c.text == NULL || c.hit == NULL) {
                PyErr_NoMemory();
                room = 0;
                rc = -1;
            }
        }
        if (rc == 0) {
            rc = test_pair(&a, &b, PyTuple_GET_ITEM(pair, 2), texts, excluded, capacity, &c, out);
        }
        cands_clear(&c);
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        Py_DECREF(pair);
        if (rc < 0) {
            Py_CLEAR(out);
        }
    }
done:
    PyMem_Free(excluded);
    PyMem_Free(c.slot);
    PyMem_Free(c.text);
    PyMem_Free(c.hit);
    return out;
}
