/* The loops a document query spends most of its time in, compiled: the BM25 sums of the
 * lexical index.
 *
 * homeagent_core/memory/native.py loads this file's shared library with ctypes; where it
 * was not built, the same arithmetic runs in numpy (LexicalIndex._accumulate and
 * ForwardLists.weigh). Both give the same scores bit for bit: every step below is the float32
 * or float64 operation numpy performs, in the same order, and the library is compiled with
 * -ffp-contract=off so no step is fused into another.
 *
 * Two formulas, chosen as numpy chooses them (by how many postings a call adds):
 *   few:  c = (w * tf * k1p1) / (tf + norm)   in float32, summed per slot in float64, then
 *         rounded to float32;
 *   many: s = w (float64), times (tf * (1 + norm)) / (tf + norm) (float32) when tf > 1,
 *         summed per slot in float64, times the slot's tf = 1 factor `unit`, then rounded.
 * In both, the rounded sum is added to the float32 score.
 */

#include <stdint.h>

/* One posting's contribution under either formula (see above). */
static inline double bm25_few(float w, uint8_t tf, float norm, float k1p1) {
    float t = (float)tf;
    float c = ((w * t) * k1p1) / (t + norm);
    return (double)c;
}

static inline double bm25_many(float w, uint8_t tf, float norm) {
    double s = (double)w;
    if (tf > 1) {
        float t = (float)tf;
        float f = (t * (1.0f + norm)) / (t + norm);
        s *= (double)f;
    }
    return s;
}

int ha_native_abi(void) { return 1; }

/* Postings of `nranges` ranges of one posting array of `n` (range r: `lens[r]` postings from
 * `starts[r]`, weighted by `weights[r]`; the caller checked the ranges lie inside), summed per
 * slot into `acc` (float64, one per slot, zero on entry); then `out[s] += (float)acc[s]` (few)
 * or `(float)(acc[s] * unit[s])` (many) for every slot below `size`. Returns -1, or the position
 * of a posting whose slot is not below `size` (then `out` is unchanged). */
int64_t ha_bm25_ranges(const int32_t *slots, const uint8_t *tfs, int64_t n, const int64_t *starts,
                       const int64_t *lens, const float *weights, int64_t nranges, const float *norm,
                       const float *unit, float k1p1, int many, double *acc, float *out, int64_t size) {
    (void)n;
    for (int64_t r = 0; r < nranges; r++) {
        const int64_t first = starts[r];
        const int32_t *sl = slots + first;
        const uint8_t *tf = tfs + first;
        const float w = weights[r];
        const int64_t len = lens[r];
        if (many) {
            const double wd = (double)w;
            for (int64_t i = 0; i < len; i++) {
                const uint32_t s = (uint32_t)sl[i];
                if ((int64_t)s >= size) return first + i;
                acc[s] += tf[i] > 1 ? bm25_many(w, tf[i], norm[s]) : wd;
            }
        } else {
            for (int64_t i = 0; i < len; i++) {
                const uint32_t s = (uint32_t)sl[i];
                if ((int64_t)s >= size) return first + i;
                acc[s] += bm25_few(w, tf[i], norm[s], k1p1);
            }
        }
    }
    if (many) {
        for (int64_t s = 0; s < size; s++) out[s] += (float)(acc[s] * (double)unit[s]);
    } else {
        for (int64_t s = 0; s < size; s++) out[s] += (float)acc[s];
    }
    return -1;
}

/* Exact sums of over-budget buckets for candidates: candidate i (slot `slots[i]`) owns
 * `lens[i]` forward entries from `starts[i]` (term ids in `terms`, counts in `tfs`; the caller
 * checked the ranges lie inside). An entry whose term has a non-zero weight in `table` is one
 * of the query's buckets; per candidate, its entries' sums under both formulas go to `few[i]`
 * and `many[i]` (the caller picks one by the total). Returns the matching entries, or
 * -(position + 1) of an entry whose term id is not below `table_len`. */
#define HA_RESCORE(NAME, TERM_T)                                                                           \
    int64_t NAME(const TERM_T *terms, const uint8_t *tfs, int64_t n, const int64_t *starts,               \
                 const int64_t *lens, const int64_t *slots, int64_t ncand, const float *table,            \
                 int64_t table_len, const float *norm, float k1p1, double *few, double *many) {           \
        (void)n;                                                                                           \
        int64_t hits = 0;                                                                                  \
        for (int64_t i = 0; i < ncand; i++) {                                                              \
            const int64_t first = starts[i];                                                               \
            const TERM_T *tm = terms + first;                                                              \
            const uint8_t *tf = tfs + first;                                                               \
            const float nrm = norm[slots[i]];                                                              \
            double sum_few = 0.0, sum_many = 0.0;                                                          \
            for (int64_t j = 0; j < lens[i]; j++) {                                                        \
                if ((int64_t)tm[j] >= table_len) return -(first + j + 1);                                  \
                const float w = table[tm[j]];                                                              \
                if (w != 0.0f) {                                                                           \
                    sum_few += bm25_few(w, tf[j], nrm, k1p1);                                              \
                    sum_many += bm25_many(w, tf[j], nrm);                                                  \
                    hits++;                                                                                \
                }                                                                                          \
            }                                                                                              \
            few[i] = sum_few;                                                                              \
            many[i] = sum_many;                                                                            \
        }                                                                                                  \
        return hits;                                                                                       \
    }

HA_RESCORE(ha_bm25_rescore_u16, uint16_t)
HA_RESCORE(ha_bm25_rescore_u32, uint32_t)

