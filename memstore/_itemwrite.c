/* memstore._speedups.plain_item and row_json: a durable write's per-item checks and
 * journal row, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c).
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
 */
#include "_speedups.h"
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

PyObject *
memstore_plain_item(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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

PyObject *
memstore_row_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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
