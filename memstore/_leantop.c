/* memstore._speedups.lean_top: the lean fusion's best candidates, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c).
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
#include "_speedups.h"

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

PyObject *
memstore_lean_top(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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
        if (ms_hold_1d(args[held], &v[held], size[held], "lean_top", name[held]) < 0) {
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
    /* The best need candidates met, as a heap (a sort of them all cost more than the scan).
     * No more than n can be met: a need past n (a caller's huge limit) sizes nothing, and
     * need * sizeof(TopCand) could wrap around to a small block. */
    Py_ssize_t room = need < n ? need : n;
    cand = PyMem_Malloc((size_t)(room ? room : 1) * sizeof(TopCand));
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
            top_offer(cand, &m, room, &x);
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
