/* memstore._speedups.joined_slots: the documents holding a joined pair of words, compiled.
 *
 * Part of the optional memstore._speedups module (setup.py compiles this file with
 * _speedups.c). The oracle is the pure path of memstore/lexical.py's
 * Lexicon._joined_slots, which a differential test holds this one to.
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
 * the larger, then the texts of those left searched for the pattern (by memmem, and
 * without the GIL when they are ASCII and long, as holding() in _speedups.c does).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Hold obj's buffer of int32 slots (C-contiguous, 1-d). */
static int
hold_slots(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    if (view->itemsize != 4 || view->ndim != 1) {
        PyErr_SetString(PyExc_TypeError, "joined_slots: slots must be 1-d int32 arrays");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

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

/* Characters of ASCII texts above which one pair's tests run without the GIL (as
 * memstore/_speedups.c's holding does: other threads run while a long run of texts is
 * searched). */
#define JOINED_NOGIL_CHARS 32768

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
    int ascii = HAVE_MEMMEM && PyUnicode_IS_ASCII(pattern);
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
#if HAVE_MEMMEM
        const char *pat = (const char *)PyUnicode_1BYTE_DATA(pattern);
        size_t m = (size_t)PyUnicode_GET_LENGTH(pattern);
        PyThreadState *released = chars >= JOINED_NOGIL_CHARS ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < c->n; i++) {
            const char *t = (const char *)PyUnicode_1BYTE_DATA(c->text[i]);
            c->hit[i] = memmem(t, (size_t)PyUnicode_GET_LENGTH(c->text[i]), pat, m) != NULL;
        }
        if (released != NULL) {
            PyEval_RestoreThread(released);
        }
#endif
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
        if (hold_slots(PyList_GET_ITEM(strong, k), &v) < 0) {
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
        if (hold_slots(PyTuple_GET_ITEM(pair, 0), &a) < 0) {
            Py_CLEAR(out);
            break;
        }
        if (hold_slots(PyTuple_GET_ITEM(pair, 1), &b) < 0) {
            PyBuffer_Release(&a);
            Py_CLEAR(out);
            break;
        }
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
