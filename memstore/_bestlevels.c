/* memstore._speedups.best_levels: a cold query token's matches merged, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c).
 *
 * best_levels(parts, capacity, alive) -> (bytes, bytes) | NotImplemented
 *
 * memstore/_tokenmatch.py's best_levels, the merge of a cold query token's matches: parts
 * is a list of (level, slots) pairs (slots: a non-empty 1-d int32 array), alive a bool
 * array or None. Returns each slot met (below capacity, alive), ascending, once, as native
 * 8-byte integers, and the best (largest) level it reaches as float64s. NotImplemented
 * (the numpy path decides, and raises what it raises) for a slot outside [0, capacity) or
 * past alive, slots that are not 1-d int32 (or not contiguous, as alive), or more than 255
 * distinct levels. The numpy path picks one of four merges by size (a dictionary, a sort,
 * a dense array), each several array calls holding the GIL (~70 us for a token's 500
 * entries); here the levels become ranks, a byte per slot of the range the slots span
 * keeps the best rank (one pass), and a scan of those bytes eight at a time writes the
 * answer. A range much wider than the entries is sorted
 * instead ((slot, rank) keys: the last of each slot's run is its best).
 */
#include "_speedups.h"

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

PyObject *
memstore_best_levels(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "best_levels(parts, capacity, alive): parts is a list");
        return NULL;
    }
    Py_ssize_t capacity = PyLong_AsSsize_t(args[1]);
    if (capacity == -1 && PyErr_Occurred()) {
        return NULL;
    }
    /* A snapshot of the parts: a level's __float__ (Python code) cannot pull one away. */
    PyObject *parts = PyList_AsTuple(args[0]);
    if (parts == NULL) {
        return NULL;
    }
    Py_ssize_t np_ = PyTuple_GET_SIZE(parts);
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
        if (PyObject_GetBuffer(args[2], &alive_view, PyBUF_STRIDES) < 0) {
            goto done;
        }
        have_alive = 1;
        if (alive_view.itemsize != 1 || alive_view.ndim != 1) {
            PyErr_SetString(PyExc_TypeError, "best_levels: alive must be a 1-d bool array");
            goto done;
        }
        if (!PyBuffer_IsContiguous(&alive_view, 'C')) { /* a view with steps: numpy's */
            result = Py_NewRef(Py_NotImplemented);
            goto done;
        }
    }
    Py_ssize_t total = 0;
    int64_t lo = INT64_MAX, hi = -1;
    /* Every level first, then every buffer, then the slots: the Python code a level may run
     * (its __float__) is over before a slot is read (it could write one already scanned,
     * past the range sized from it). */
    for (Py_ssize_t p = 0; p < np_; p++) {
        PyObject *part = PyTuple_GET_ITEM(parts, p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 2) {
            PyErr_SetString(PyExc_TypeError, "best_levels: a part is (level, slots)");
            goto done;
        }
        lv[p] = PyFloat_AsDouble(PyTuple_GET_ITEM(part, 0));
        if (lv[p] == -1.0 && PyErr_Occurred()) {
            goto done;
        }
    }
    for (; held < np_; held++) {
        PyObject *part = PyTuple_GET_ITEM(parts, held);
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(part, 1), &views[held], PyBUF_RECORDS_RO) < 0) {
            goto done;
        }
        const char *fmt = views[held].format;
        if (views[held].itemsize != 4 || views[held].ndim != 1 || fmt == NULL ||
            (strcmp(fmt, "i") != 0 && strcmp(fmt, "=i") != 0) ||
            !PyBuffer_IsContiguous(&views[held], 'C')) {
            held++; /* not contiguous 1-d int32 (a caller's own array): the numpy path's */
            result = Py_NewRef(Py_NotImplemented);
            goto done;
        }
    }
    for (Py_ssize_t p = 0; p < np_; p++) {
        const int32_t *a = views[p].buf;
        Py_ssize_t n = views[p].shape[0];
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
    Py_DECREF(parts);
    return result;
}
