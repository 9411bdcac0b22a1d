/* memstore._speedups.lex_rank: a lexical query's rank, compiled.
 *
 * Part of the optional memstore._speedups module (_speedups.c).
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
#include "_speedups.h"

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

/* Matched entries over the query's tokens below which a call keeps the GIL: handing it to
 * another thread and taking it back (two thread switches when that thread wants it) would
 * cost about what the work does. */
#define NOGIL_MATCHES 2048

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

PyObject *
memstore_lex_rank(PyObject *self, PyObject *args)
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
        if (ms_hold_1d(PyTuple_GET_ITEM(cols, c), &views[held], col_size[c], "lex_rank",
                       col_name[c]) < 0) {
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
            if (ms_hold_1d(PyTuple_GET_ITEM(row, c), &views[held], size[c], "lex_rank",
                           name[c]) < 0) {
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
