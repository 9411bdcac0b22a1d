/* memstore._speedups.slot_map and slots_of: hits' and ids' snapshot slots, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c).
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
#include "_speedups.h"

PyObject *
memstore_slot_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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

/* slots_of(ids, slot, size) -> (bytes, bool)
 *
 * Each of ids' value in slot (a dict, id -> int) as a native 8-byte integer, -1 where slot
 * does not hold the id or holds it at size or past (a later snapshot's slot); and whether
 * none is -1. memstore/search/_lean.py's _slots_of is the oracle: the same numbers as its
 * itemgetter over the dict and its conversion to an array, without the tuple and the
 * Python ints in between (the lean fusion turns a channel's couple of hundred hit ids into
 * its snapshot's slots so; a hit's id is the store's own string, found by identity).
 */
PyObject *
memstore_slots_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out);
    int every = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* An id's __hash__ or __eq__ (Python code) may change a list of ids: each id is read
         * anew, and held while it is looked up. */
        if (i >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "slots_of: ids changed size during the call");
            goto fail;
        }
        PyObject *id = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *v = PyDict_GetItemWithError(args[1], id); /* borrowed */
        Py_DECREF(id);
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
