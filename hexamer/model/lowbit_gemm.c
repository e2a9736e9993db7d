/* Integer dot-product projections: Y[M,N] = X[M,K] @ W[N,K]^T with X quantized per row to int8
 * on the fly and W stored as int8 (one scale per output column) or as grouped int4 (one scale
 * per output column and 32 inputs).
 *
 * Why: prefill and batched decode are compute-bound, and the int8 dot product (VPDPBUSD, AVX-512
 * VNNI: 64 multiply-adds per instruction) does four times the work of a float32 FMA per
 * instruction. Batch-1 decode is bound by the bytes read, and 4-bit weights halve them.
 *
 * Activations: each row, in groups of 32 inputs (as llama.cpp's Q8_0 blocks), is scaled by the
 * group's amax / 127 and rounded to nearest even (the PyTorch reference in hexamer.model.lowbit
 * rounds the same way, bit for bit); the codes are padded with zeros to a multiple of 32. The
 * int32 sum of each 32-input group is converted once and accumulated in fp32 times the group's
 * scales (activation x weight).
 *
 * int8 panels: 16 output columns, P[N/16][K/4][16][4] (4 consecutive k per column: one VPDPBUSD
 * lane). VPDPBUSD multiplies unsigned by signed bytes, so the activations are offset by +128 and
 * 128 * (the group's sum of W[n, k], kept at pack time) is subtracted from each group's sum.
 * int4 panels: per 32-input group, 4 blocks of [16 columns][4 bytes]; byte b of column j in
 * block p holds k = 8p + b in its low nibble and k = 8p + 4 + b in its high one, as q + 8
 * (0..15), so the nibbles are the unsigned operand directly and 8 * sum(x codes of the group) is
 * subtracted per group.
 *
 * Without AVX-512 VNNI the same layouts run through plain C loops (exact integer sums, the same
 * results).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#include <immintrin.h>
#define HX_VNNI 1
#else
#define HX_VNNI 0
#endif

#define QP 16  /* output columns per panel */
#define QMR 8  /* activation rows per register tile */
#define G4 32  /* int4 group size (inputs per scale) */


#define Q_INLINE __attribute__((always_inline)) static inline

int hx_vnni(void) { return HX_VNNI; }

static int64_t padded_k(int64_t K) { return (K + G4 - 1) / G4 * G4; }

__attribute__((unused)) static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One row r of K inputs -> codes q[Kp] (int8, +128 when `offset`; padding 0) with one scale per
 * 32 inputs, xs[g] = amax / 127 (0 for an all-zero group), and with gsum (when not NULL) the sum
 * of each group's codes (without the offset). */
static void quantize_row(const float *r, int64_t K, int64_t Kp, int8_t *q, float *xs, int32_t *gsum,
                         int offset) {
    int64_t Kg = Kp / G4;
    for (int64_t g = 0; g < Kg; g++) {
        int64_t k0 = g * G4, k1 = k0 + G4 < K ? k0 + G4 : K;
        float amax = 0.0f;
        for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(r[k]));
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        xs[g] = amax / 127.0f;
        int32_t sum = 0;
        for (int64_t k = k0; k < k0 + G4; k++) {
            int8_t c = k < k1 ? (int8_t)nearbyintf(r[k] * inv) : 0;
            sum += c;
            q[k] = offset ? (int8_t)((uint8_t)c ^ 0x80u) : c;
        }
        if (gsum) gsum[g] = sum;
    }
}

/* Every row m of X [M, K] through quantize_row: codes xq[m][Kp], scales xs[m][Kp / 32], sums
 * gsum[m][Kp / 32]. */
static void quantize_rows(const float *x, int64_t M, int64_t K, int64_t Kp, int8_t *xq, float *xs,
                          int32_t *gsum, int offset, int threads) {
    int64_t Kg = Kp / G4;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && M > 1)
    for (int64_t m = 0; m < M; m++)
        quantize_row(x + m * K, K, Kp, xq + m * Kp, xs + m * Kg, gsum ? gsum + m * Kg : NULL, offset);
}

/* ------------------------------------------------------------------------------ int8 weights */
int64_t hx_packed_size_w8(int64_t N, int64_t K) { return (N + QP - 1) / QP * padded_k(K) * QP; }
/* int32 sums of each column's weights per 32-input group, panel-ordered [N/16][Kp/32][16] */
int64_t hx_packed_sums_w8(int64_t N, int64_t K) { return (N + QP - 1) / QP * (padded_k(K) / G4) * QP; }

static int64_t w8_index(int64_t n, int64_t k, int64_t Kp) {
    return (((n / QP) * (Kp / 4) + k / 4) * QP + n % QP) * 4 + k % 4;
}

void hx_pack_w8(const int8_t *w, int8_t *p, int32_t *wsum, int64_t N, int64_t K, int threads) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    memset(p, 0, (size_t)hx_packed_size_w8(N, K));
    memset(wsum, 0, (size_t)hx_packed_sums_w8(N, K) * sizeof *wsum);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            p[w8_index(n, k, Kp)] = w[n * K + k];
            wsum[((n / QP) * Kg + k / G4) * QP + n % QP] += w[n * K + k];
        }
}

void hx_unpack_w8(const int8_t *p, int8_t *w, int64_t N, int64_t K) {
    int64_t Kp = padded_k(K);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) w[n * K + k] = p[w8_index(n, k, Kp)];
}

/* rows x `cols` tile of Y from one int8 panel: per group, the int32 sums of (x + 128) * w less
 * 128 * the group's weight sum, times the rows' group scales, summed in fp32; times the column
 * scales at the end */
Q_INLINE void w8_block(const int8_t *panel, const int32_t *wsum, const float *scale, const int8_t *xu,
                       const float *xs, float *y, int64_t N, int64_t Kp, int64_t cols, int rows) {
    int64_t Kg = Kp / G4;
#if HX_VNNI
    __m512 f[QMR];
    for (int i = 0; i < rows; i++) f[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < Kg; g++) {
        __m512i a[QMR];
        for (int i = 0; i < rows; i++) a[i] = _mm512_setzero_si512();
        for (int q = 0; q < G4 / 4; q++) {
            __m512i wv = _mm512_loadu_si512(panel + (g * (G4 / 4) + q) * 64);
            for (int i = 0; i < rows; i++) {
                int32_t xb;
                memcpy(&xb, xu + i * Kp + g * G4 + q * 4, 4);
                a[i] = _mm512_dpbusd_epi32(a[i], _mm512_set1_epi32(xb), wv);
            }
        }
        __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(wsum + g * QP), 7);
        for (int i = 0; i < rows; i++)
            f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[i], corr)),
                                   _mm512_set1_ps(xs[i * Kg + g]), f[i]);
    }
    __mmask16 keep = (__mmask16)((1u << cols) - 1u);
    __m512 sc = _mm512_maskz_loadu_ps(keep, scale);
    for (int i = 0; i < rows; i++) _mm512_mask_storeu_ps(y + i * N, keep, _mm512_mul_ps(f[i], sc));
#else
    float f[QMR][QP];
    memset(f, 0, sizeof f);
    for (int64_t g = 0; g < Kg; g++) {
        int32_t a[QMR][QP];
        memset(a, 0, sizeof a);
        for (int q = 0; q < G4 / 4; q++) {
            const int8_t *wq = panel + (g * (G4 / 4) + q) * 64;
            for (int i = 0; i < rows; i++) {
                const uint8_t *xr = (const uint8_t *)xu + i * Kp + g * G4 + q * 4;
                for (int j = 0; j < QP; j++)
                    a[i][j] += xr[0] * wq[j * 4] + xr[1] * wq[j * 4 + 1] + xr[2] * wq[j * 4 + 2] +
                               xr[3] * wq[j * 4 + 3];
            }
        }
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < QP; j++)
                f[i][j] += (float)(a[i][j] - 128 * wsum[g * QP + j]) * xs[i * Kg + g];
    }
    for (int i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) y[i * N + j] = f[i][j] * scale[j];
#endif
}

/* ------------------------------------------------------------------------------ int4 weights */
int64_t hx_packed_size_w4(int64_t N, int64_t K) { return (N + QP - 1) / QP * padded_k(K) * QP / 2; }
int64_t hx_packed_scales_w4(int64_t N, int64_t K) { return (N + QP - 1) / QP * (padded_k(K) / G4) * QP; }

/* byte holding (n, k) in the int4 panels, and whether in the high nibble */
static int64_t w4_index(int64_t n, int64_t k, int64_t Kp, int *high) {
    int64_t g = k / G4, r = k % G4, p = r / 8, within = r % 8;
    *high = within >= 4;
    return ((((n / QP) * (Kp / G4) + g) * 4 + p) * QP + n % QP) * 4 + within % 4;
}

/* codes [N][Kp/2] (byte k/2: even k low nibble, odd k high, each q + 8) and fp16 scales
 * [N][Kp/32] -> panels and panel-ordered scales (padded columns: code 8, scale 0) */
void hx_pack_w4(const uint8_t *codes, const uint16_t *scales, uint8_t *p, uint16_t *ps, int64_t N,
                int64_t K, int threads) {
    int64_t Kp = padded_k(K), Kg = Kp / G4, n_panels = (N + QP - 1) / QP;
    memset(p, 0x88, (size_t)hx_packed_size_w4(N, K));
    memset(ps, 0, (size_t)hx_packed_scales_w4(N, K) * sizeof *ps);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < n_panels; b++)
        for (int64_t n = b * QP; n < N && n < (b + 1) * QP; n++) {
            for (int64_t k = 0; k < Kp; k++) {
                int high;
                uint8_t code = (codes[n * (Kp / 2) + k / 2] >> (4 * (k % 2))) & 0xfu;
                int64_t at = w4_index(n, k, Kp, &high);
                p[at] = high ? (uint8_t)((p[at] & 0x0fu) | (code << 4)) : (uint8_t)((p[at] & 0xf0u) | code);
            }
            for (int64_t g = 0; g < Kg; g++) ps[(b * Kg + g) * QP + n % QP] = scales[n * Kg + g];
        }
}

void hx_unpack_w4(const uint8_t *p, const uint16_t *ps, uint8_t *codes, uint16_t *scales, int64_t N,
                  int64_t K) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    memset(codes, 0, (size_t)(N * Kp / 2));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < Kp; k++) {
            int high;
            int64_t at = w4_index(n, k, Kp, &high);
            uint8_t code = high ? p[at] >> 4 : p[at] & 0xfu;
            codes[n * (Kp / 2) + k / 2] |= (uint8_t)(code << (4 * (k % 2)));
        }
        for (int64_t g = 0; g < Kg; g++) scales[n * Kg + g] = ps[((n / QP) * Kg + g) * QP + n % QP];
    }
}

Q_INLINE void w4_block(const uint8_t *panel, const uint16_t *ps, const int8_t *xq, const int32_t *gsum,
                       const float *xs, float *y, int64_t N, int64_t Kp, int64_t cols, int rows) {
    int64_t Kg = Kp / G4;
#if HX_VNNI
    __m512 f[QMR];
    for (int i = 0; i < rows; i++) f[i] = _mm512_setzero_ps();
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int64_t g = 0; g < Kg; g++) {
        __m512i a[QMR];
        for (int i = 0; i < rows; i++) a[i] = _mm512_setzero_si512();
        const uint8_t *wg = panel + g * (G4 * QP / 2);
        for (int p = 0; p < 4; p++) {
            __m512i v = _mm512_loadu_si512(wg + p * 64);
            __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            for (int i = 0; i < rows; i++) {
                int32_t x0, x1;
                memcpy(&x0, xq + i * Kp + g * G4 + p * 8, 4);
                memcpy(&x1, xq + i * Kp + g * G4 + p * 8 + 4, 4);
                a[i] = _mm512_dpbusd_epi32(a[i], lo, _mm512_set1_epi32(x0));
                a[i] = _mm512_dpbusd_epi32(a[i], hi, _mm512_set1_epi32(x1));
            }
        }
        __m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ps + g * QP)));
        for (int i = 0; i < rows; i++) {
            __m512i corr = _mm512_set1_epi32(8 * gsum[i * Kg + g]);
            f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[i], corr)),
                                   _mm512_mul_ps(sc, _mm512_set1_ps(xs[i * Kg + g])), f[i]);
        }
    }
    __mmask16 keep = (__mmask16)((1u << cols) - 1u);
    for (int i = 0; i < rows; i++) _mm512_mask_storeu_ps(y + i * N, keep, f[i]);
#else
    float f[QMR][QP];
    memset(f, 0, sizeof f);
    for (int64_t g = 0; g < Kg; g++) {
        int32_t a[QMR][QP];
        memset(a, 0, sizeof a);
        const uint8_t *wg = panel + g * (G4 * QP / 2);
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < rows; i++) {
                const int8_t *xr = xq + i * Kp + g * G4 + p * 8;
                for (int j = 0; j < QP; j++)
                    for (int b = 0; b < 4; b++) {
                        uint8_t byte = wg[(p * QP + j) * 4 + b];
                        a[i][j] += (byte & 0xf) * xr[b] + (byte >> 4) * xr[4 + b];
                    }
            }
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < QP; j++)
                f[i][j] += (float)(a[i][j] - 8 * gsum[i * Kg + g]) * (half_to_float(ps[g * QP + j]) * xs[i * Kg + g]);
    }
    for (int i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) y[i * N + j] = f[i][j];
#endif
}

/* ------------------------------------------------------------------------------ drivers */
/* work item t: panel t / blocks, rows [m, m + rows) */
typedef struct {
    int64_t blocks, block;
} qsplit_t;

static qsplit_t qsplit(int64_t M) {
    qsplit_t s;
    s.blocks = (M + QMR - 1) / QMR;
    s.block = (M + s.blocks - 1) / s.blocks;
    s.blocks = (M + s.block - 1) / s.block;
    return s;
}

/* constant row counts, so each tile's accumulators stay in registers */
#define ROWS_SWITCH(rows, CALL) \
    switch (rows) {             \
    case 1: CALL(1); break;     \
    case 2: CALL(2); break;     \
    case 3: CALL(3); break;     \
    case 4: CALL(4); break;     \
    case 5: CALL(5); break;     \
    case 6: CALL(6); break;     \
    case 7: CALL(7); break;     \
    default: CALL(8); break;    \
    }

/* int8 weights x int8 activations: 0, or -1 when out of memory */
int hx_linear_w8a8(const int8_t *panels, const int32_t *wsum, const float *scales, const float *x,
                   float *y, int64_t M, int64_t N, int64_t K, int threads) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    int8_t *xq = malloc((size_t)(M * Kp));
    float *xs = malloc((size_t)(M * Kg) * sizeof *xs);
    if (xq == NULL || xs == NULL) {
        free(xq);
        free(xs);
        return -1;
    }
    quantize_rows(x, M, K, Kp, xq, xs, NULL, 1, threads);
    qsplit_t s = qsplit(M);
    int64_t work = (N + QP - 1) / QP * s.blocks;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < work; t++) {
        int64_t b = t / s.blocks, m = (t % s.blocks) * s.block, n0 = b * QP;
        int64_t cols = N - n0 < QP ? N - n0 : QP;
        int rows = (int)(M - m < s.block ? M - m : s.block);
        const int8_t *panel = panels + b * Kp * QP;
#define W8(R) \
    w8_block(panel, wsum + b * Kg * QP, scales + n0, xq + m * Kp, xs + m * Kg, y + m * N + n0, N, Kp, cols, R)
        ROWS_SWITCH(rows, W8)
#undef W8
    }
    free(xq);
    free(xs);
    return 0;
}

/* Scratch for the quantized activations: on the stack for decode-sized inputs (no allocator
 * call per projection), else on the heap. */
#define Q_STACK 16384
typedef struct {
    int8_t *xq;
    float *xs;
    int32_t *gsum;
    void *heap;
} qscratch_t;

static int qscratch_init(qscratch_t *s, void *stack, int64_t M, int64_t Kp) {
    int64_t Kg = Kp / G4;
    size_t need = (size_t)(M * Kp) + (size_t)(M * Kg) * (sizeof(float) + sizeof(int32_t)) + 64;
    s->heap = NULL;
    char *base = stack;
    if (need > Q_STACK) base = s->heap = malloc(need);
    if (base == NULL) return -1;
    s->xs = (float *)base;
    s->gsum = (int32_t *)(base + (size_t)(M * Kg) * sizeof(float));
    s->xq = (int8_t *)(base + (size_t)(M * Kg) * (sizeof(float) + sizeof(int32_t)));
    return 0;
}

/* one weight of a multi-output call: its panels, panel-ordered scales and output columns */
typedef struct {
    const uint8_t *panels;
    const uint16_t *ps;
    int64_t N;
} w4_weight_t;

/* Y[:, off_j : off_j + N_j] = X @ W_j^T for up to 3 weights sharing X (q/k/v): the activations are
 * quantized once, and one parallel loop runs over every panel of every weight, so both threads
 * stream weights for the whole call. `ldy` is Y's row stride. */
static int run_w4(const w4_weight_t *w, int count, const float *x, float *y, int64_t ldy, int64_t M,
                  int64_t K, int threads) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    _Alignas(64) char stack[Q_STACK];
    qscratch_t q;
    if (qscratch_init(&q, stack, M, Kp)) return -1;
    quantize_rows(x, M, K, Kp, q.xq, q.xs, q.gsum, 0, threads);
    qsplit_t s = qsplit(M);
    int64_t first[4] = {0}, off[4] = {0};
    for (int j = 0; j < count; j++) {
        first[j + 1] = first[j] + (w[j].N + QP - 1) / QP;
        off[j + 1] = off[j] + w[j].N;
    }
    int64_t work = first[count] * s.blocks;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && work > 1)
    for (int64_t t = 0; t < work; t++) {
        int64_t pb = t / s.blocks, m = (t % s.blocks) * s.block;
        int j = 0;
        while (pb >= first[j + 1]) j++;
        int64_t b = pb - first[j], n0 = b * QP, N = w[j].N;
        int64_t cols = N - n0 < QP ? N - n0 : QP;
        int rows = (int)(M - m < s.block ? M - m : s.block);
        const uint8_t *panel = w[j].panels + b * Kp * QP / 2;
        const uint16_t *ps = w[j].ps + b * Kg * QP;
        float *yt = y + m * ldy + off[j] + n0;
#define W4(R) w4_block(panel, ps, q.xq + m * Kp, q.gsum + m * Kg, q.xs + m * Kg, yt, ldy, Kp, cols, R)
        ROWS_SWITCH(rows, W4)
#undef W4
    }
    free(q.heap);
    return 0;
}

/* grouped int4 weights x int8 activations: 0, or -1 when out of memory */
int hx_linear_w4a8(const uint8_t *panels, const uint16_t *pscales, const float *x, float *y, int64_t M,
                   int64_t N, int64_t K, int threads) {
    w4_weight_t w = {panels, pscales, N};
    return run_w4(&w, 1, x, y, N, M, K, threads);
}

/* up to three int4 weights on the same input, outputs side by side: Y [M, N0 + N1 + N2] (N2 = 0
 * for two weights) */
int hx_linear_w4a8_multi(const uint8_t *p0, const uint16_t *s0, int64_t n0, const uint8_t *p1,
                         const uint16_t *s1, int64_t n1, const uint8_t *p2, const uint16_t *s2, int64_t n2,
                         const float *x, float *y, int64_t M, int64_t K, int threads) {
    w4_weight_t w[3] = {{p0, s0, n0}, {p1, s1, n1}, {p2, s2, n2}};
    return run_w4(w, n2 > 0 ? 3 : 2, x, y, n0 + n1 + n2, M, K, threads);
}

Q_INLINE float silu_f(float g) { return g / (1.0f + expf(-g)); }

/* SwiGLU's first half, Y [M, F] = silu(X @ G^T) * (X @ U^T), with G and U int4 [F, K]: one call,
 * the activations quantized once, each work item one gate panel and the matching up panel, and
 * the [M, 2F] intermediate never written. */
int hx_swiglu_w4a8(const uint8_t *gp, const uint16_t *gs, const uint8_t *up, const uint16_t *us,
                   const float *x, float *y, int64_t M, int64_t F, int64_t K, int threads) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    _Alignas(64) char stack[Q_STACK];
    qscratch_t q;
    if (qscratch_init(&q, stack, M, Kp)) return -1;
    quantize_rows(x, M, K, Kp, q.xq, q.xs, q.gsum, 0, threads);
    qsplit_t s = qsplit(M);
    int64_t work = (F + QP - 1) / QP * s.blocks;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && work > 1)
    for (int64_t t = 0; t < work; t++) {
        int64_t b = t / s.blocks, m = (t % s.blocks) * s.block, n0 = b * QP;
        int64_t cols = F - n0 < QP ? F - n0 : QP;
        int rows = (int)(M - m < s.block ? M - m : s.block);
        float g[QMR * QP], u[QMR * QP];
        const int8_t *xq = q.xq + m * Kp;
        const int32_t *gsum = q.gsum + m * Kg;
        const float *xs = q.xs + m * Kg;
#define SW(R)                                                                                       \
    w4_block(gp + b * Kp * QP / 2, gs + b * Kg * QP, xq, gsum, xs, g, QP, Kp, QP, R);               \
    w4_block(up + b * Kp * QP / 2, us + b * Kg * QP, xq, gsum, xs, u, QP, Kp, QP, R);
        ROWS_SWITCH(rows, SW)
#undef SW
        for (int i = 0; i < rows; i++)
            for (int64_t c = 0; c < cols; c++) y[(m + i) * F + n0 + c] = silu_f(g[i * QP + c]) * u[i * QP + c];
    }
    free(q.heap);
    return 0;
}
