/* The loops a document query spends most of its time in, compiled: the BM25 sums of the
 * lexical index, and the int8 dot products of the dense leg's scans (at the end).
 *
 * homeagent_core/memory/documents/native.py loads this file's shared library with ctypes; where it
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HA_X86 1
#endif

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

int ha_native_abi(void) { return 2; }

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


/* Int8 dot products, the dense leg's scans: out[i] = sum_j rows[i * dim + j] * q[j] for `n` rows
 * of `dim`, summed exactly in int32 and converted to float, as simsimd's int8 "dot" does (the
 * fallback where this library is not built): the same scores bit for bit, for every int8 value.
 * The quantizer writes [-127, 127]; a damaged file may hold -128 in a row, which scores as it
 * does in simsimd. A query holding -128 (never quantized so) takes the plain loop. */
static void i8_dots_plain(const int8_t *rows, int64_t n, int64_t dim, const int8_t *q, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const int8_t *r = rows + i * dim;
        int32_t sum = 0;
        for (int64_t j = 0; j < dim; j++) sum += (int32_t)r[j] * (int32_t)q[j];
        out[i] = (float)sum;
    }
}

#ifdef HA_X86
/* acc + the 32 products row[0..32) * q, as 8 int32 partial sums: |row| (unsigned, so |-128| =
 * 128 holds) times q's values with the row's sign (q has no -128, so -q fits), summed in pairs
 * (|pair| <= 2 * 128 * 127, no 16-bit overflow), then in fours. `qv` = q. */
__attribute__((target("avx2"))) static inline __m256i i8_step(__m256i acc, const int8_t *row, __m256i qv,
                                                              __m256i ones) {
    const __m256i rv = _mm256_loadu_si256((const __m256i *)row);
    const __m256i prod = _mm256_maddubs_epi16(_mm256_abs_epi8(rv), _mm256_sign_epi8(qv, rv));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(prod, ones));
}

/* Four rows at a time, 32 values per step; the four sums are reduced together. */
__attribute__((target("avx2"))) static void i8_dots_avx2(const int8_t *rows, int64_t n, int64_t dim,
                                                         const int8_t *q, float *out) {
    const int64_t body = dim & ~(int64_t)31;
    const __m256i ones = _mm256_set1_epi16(1);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const int8_t *r = rows + i * dim;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = 0; j < body; j += 32) {
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(q + j));
            a0 = i8_step(a0, r + j, qv, ones);
            a1 = i8_step(a1, r + dim + j, qv, ones);
            a2 = i8_step(a2, r + 2 * dim + j, qv, ones);
            a3 = i8_step(a3, r + 3 * dim + j, qv, ones);
        }
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
        int32_t sums[4];
        _mm_storeu_si128((__m128i *)sums, _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
        for (int k = 0; k < 4; k++) {
            const int8_t *row = r + k * dim;
            for (int64_t j = body; j < dim; j++) sums[k] += (int32_t)row[j] * (int32_t)q[j];
            out[i + k] = (float)sums[k];
        }
    }
    i8_dots_plain(rows + i * dim, n - i, dim, q, out + i);
}

/* Whether q holds -128, which the AVX2 loop cannot negate. */
static int has_min_i8(const int8_t *q, int64_t dim) {
    for (int64_t j = 0; j < dim; j++)
        if (q[j] == INT8_MIN) return 1;
    return 0;
}
#endif

void ha_i8_dots(const int8_t *rows, int64_t n, int64_t dim, const int8_t *q, float *out) {
#ifdef HA_X86
    if (__builtin_cpu_supports("avx2") && !has_min_i8(q, dim)) {
        i8_dots_avx2(rows, n, dim, q, out);
        return;
    }
#endif
    i8_dots_plain(rows, n, dim, q, out);
}
