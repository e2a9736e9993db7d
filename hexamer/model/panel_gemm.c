/* Projection kernels for hexamer's CPU path: Y[M,N] = X[M,K] @ W[N,K]^T.
 *
 * Why: at decode (1-16 activation rows) a projection is a stream through the weights, and
 * PyTorch's kernels (oneDNN packed, MKL) read them at well under the memory bandwidth. Here each
 * weight matrix is stored once in "panels" of 32 output columns, P[N/32][K][32] (zero-padded), so
 * every k step reads 128 contiguous bytes (64 for bf16) and the whole matrix is one sequential
 * stream. A tile of up to 8 rows x 32 columns is kept in registers (16 accumulators), which is
 * bandwidth-bound at 1-4 rows and FMA-bound from about 8 rows, so the same layout also serves
 * batched decode and prefill.
 *
 * Portable C: GCC/Clang vector extensions, compiled with -march=native on the user's machine
 * (AVX-512, AVX2 or NEON as the CPU has); accumulation is always fp32. bf16 weights meet bf16
 * activations: on CPUs with AVX512-BF16 through VDPBF16PS (two k steps per instruction, so the
 * panels interleave k pairs: P[N/32][K/2][32][2]), elsewhere widened to fp32 in registers.
 * int8 weights (weight-only quantisation, one fp32 scale per output column) use the same panels
 * at one byte per element and are widened in registers: to fp32 for fp32 activations, and on
 * AVX512-BF16 CPUs to bf16 (exact: |q| <= 127) for VDPBF16PS with bf16 activations (k-pair
 * panels again); each column's sum is multiplied by its scale once, at the end.
 * Threads: OpenMP (the same runtime PyTorch's CPU build loads).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#define HX_BF16_DOT 1
#else
#define HX_BF16_DOT 0
#endif

#define PANEL 32 /* output columns per panel: two 16-float vectors */
#define MR 8     /* activation rows per register tile */

HX_INLINE const void *panel_at(const void *panels, int64_t offset, int bf16) {
    return bf16 ? (const void *)((const uint16_t *)panels + offset)
                : (const void *)((const float *)panels + offset);
}

/* element `off` of Y, which is float32, or bfloat16 when ybf16 */
HX_INLINE void *y_at(void *y, int64_t off, int ybf16) {
    return ybf16 ? (void *)((uint16_t *)y + off) : (void *)((float *)y + off);
}

/* the first `cols` of 32 results (a0: columns 0-15, a1: 16-31) into Y's row at `out` */
HX_INLINE void store_cols(void *out, v16 a0, v16 a1, int64_t cols, int ybf16) {
    if (ybf16) {
        h16u lo = to_bf16x16(a0), hi = to_bf16x16(a1);
        uint16_t *o = out;
        if (cols == PANEL) {
            *(h16u *)o = lo;
            *(h16u *)(o + 16) = hi;
        } else {
            for (int64_t j = 0; j < cols; j++) o[j] = j < 16 ? lo[j] : hi[j - 16];
        }
        return;
    }
    float *o = out;
    if (cols == PANEL) {
        *(v16u *)o = a0;
        *(v16u *)(o + 16) = a1;
    } else {
        for (int64_t j = 0; j < cols; j++) o[j] = j < 16 ? a0[j] : a1[j - 16];
    }
}

/* rows x 32 tile of Y (row stride N) from one panel: `rows` <= MR, `cols` <= 32 valid columns */
HX_INLINE void tile(const void *panel, const float *x, void *y, int64_t K, int64_t N, int64_t cols,
                 int rows, int bf16, int ybf16) {
    v16 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = (v16){0};
    for (int64_t k = 0; k < K; k++) {
        v16 w0 = load16(panel_at(panel, k * PANEL, bf16), 0, bf16);
        v16 w1 = load16(panel_at(panel, k * PANEL + 16, bf16), 0, bf16);
        for (int i = 0; i < rows; i++) {
            float xi = x[i * K + k];
            acc[i][0] += xi * w0;
            acc[i][1] += xi * w1;
        }
    }
    for (int i = 0; i < rows; i++) store_cols(y_at(y, i * N, ybf16), acc[i][0], acc[i][1], cols, ybf16);
}

/* one activation row: k unrolled by two so four independent FMA chains hide the latency */
HX_INLINE void tile_row(const void *panel, const float *x, void *y, int64_t K, int64_t cols, int bf16,
                     int ybf16) {
    v16 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) {
        float x0 = x[k], x1 = x[k + 1];
        a0 += x0 * load16(panel_at(panel, k * PANEL, bf16), 0, bf16);
        a1 += x0 * load16(panel_at(panel, k * PANEL + 16, bf16), 0, bf16);
        b0 += x1 * load16(panel_at(panel, (k + 1) * PANEL, bf16), 0, bf16);
        b1 += x1 * load16(panel_at(panel, (k + 1) * PANEL + 16, bf16), 0, bf16);
    }
    for (; k < K; k++) {
        a0 += x[k] * load16(panel_at(panel, k * PANEL, bf16), 0, bf16);
        a1 += x[k] * load16(panel_at(panel, k * PANEL + 16, bf16), 0, bf16);
    }
    store_cols(y, a0 + b0, a1 + b1, cols, ybf16);
}

HX_INLINE void tile_n(const void *panel, const float *x, void *y, int64_t K, int64_t N,
                   int64_t cols, int rows, int bf16, int ybf16) {
    switch (rows) { /* constant row counts let the compiler keep the tile in registers */
    case 8: tile(panel, x, y, K, N, cols, 8, bf16, ybf16); break;
    case 7: tile(panel, x, y, K, N, cols, 7, bf16, ybf16); break;
    case 6: tile(panel, x, y, K, N, cols, 6, bf16, ybf16); break;
    case 5: tile(panel, x, y, K, N, cols, 5, bf16, ybf16); break;
    case 4: tile(panel, x, y, K, N, cols, 4, bf16, ybf16); break;
    case 3: tile(panel, x, y, K, N, cols, 3, bf16, ybf16); break;
    default: tile(panel, x, y, K, N, cols, 2, bf16, ybf16); break;
    }
}

/* The work items of Y[M,N]: (panel, block of rows) pairs, rows split into equal blocks of at
 * most MR (16 rows -> 8 + 8, not 8 + 8 + 0); item t covers rows [m, m + rows), columns
 * [n0, n0 + cols) of panel p. */
typedef struct {
    int64_t n_blocks, block, work;
} split_t;

typedef struct {
    int64_t p, m, n0, cols;
    int rows;
} item_t;

static split_t split(int64_t M, int64_t N) {
    split_t s;
    s.n_blocks = (M + MR - 1) / MR;
    s.block = (M + s.n_blocks - 1) / s.n_blocks;
    s.n_blocks = (M + s.block - 1) / s.block;
    s.work = (N + PANEL - 1) / PANEL * s.n_blocks;
    return s;
}

HX_INLINE item_t item(split_t s, int64_t t, int64_t M, int64_t N) {
    item_t it;
    it.p = t / s.n_blocks;
    it.m = (t % s.n_blocks) * s.block;
    it.n0 = it.p * PANEL;
    it.cols = N - it.n0 < PANEL ? N - it.n0 : PANEL;
    it.rows = (int)(M - it.m < s.block ? M - it.m : s.block);
    return it;
}

HX_INLINE void linear(const void *panels, const float *x, void *y, int64_t M, int64_t N, int64_t K,
                   int threads, int bf16, int ybf16) {
    split_t s = split(M, N);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < s.work; t++) {
        item_t it = item(s, t, M, N);
        const void *panel = panel_at(panels, it.p * K * PANEL, bf16);
        const float *xb = x + it.m * K;
        void *yb = y_at(y, it.m * N + it.n0, ybf16);
        if (it.rows == 1)
            tile_row(panel, xb, yb, K, it.cols, bf16, ybf16);
        else
            tile_n(panel, xb, yb, K, N, it.cols, it.rows, bf16, ybf16);
    }
}

#if HX_BF16_DOT
/* k-pair layout: element (n, k) of panel b at ((b * KP + k / 2) * 32 + n % 32) * 2 + k % 2 */
static int64_t pairs(int64_t K) { return (K + 1) / 2; }

HX_INLINE __m512 dot_pairs(__m512 acc, uint32_t xpair, const uint16_t *w) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(w),
                            (__m512bh)_mm512_set1_epi32((int)xpair));
}

/* x pair (x[k], x[k+1]) as one 32-bit lane (one load); the pad beyond an odd K is zero */
HX_INLINE uint32_t x_pair(const uint16_t *x, int64_t k, int64_t K) {
    uint32_t pair;
    if (k + 1 < K) {
        memcpy(&pair, x + k, sizeof pair);
        return pair;
    }
    return (uint32_t)x[k];
}

HX_INLINE void dtile(const uint16_t *panel, const uint16_t *x, void *y, int64_t K, int64_t N,
                  int64_t cols, int rows, int ybf16) {
    __m512 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t kp = 0; kp < pairs(K); kp++) {
        const uint16_t *w = panel + kp * PANEL * 2;
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(w), w1 = (__m512bh)_mm512_loadu_si512(w + 32);
        for (int i = 0; i < rows; i++) {
            __m512bh xp = (__m512bh)_mm512_set1_epi32((int)x_pair(x + i * K, 2 * kp, K));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w0, xp);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], w1, xp);
        }
    }
    for (int i = 0; i < rows; i++)
        store_cols(y_at(y, i * N, ybf16), (v16)acc[i][0], (v16)acc[i][1], cols, ybf16);
}

HX_INLINE void dtile_row(const uint16_t *panel, const uint16_t *x, void *y, int64_t K, int64_t cols,
                      int ybf16) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t kp = 0, np = pairs(K);
    for (; kp + 2 <= np; kp += 2) {
        const uint16_t *w = panel + kp * PANEL * 2;
        uint32_t p0 = x_pair(x, 2 * kp, K), p1 = x_pair(x, 2 * kp + 2, K);
        a0 = dot_pairs(a0, p0, w);
        a1 = dot_pairs(a1, p0, w + 32);
        b0 = dot_pairs(b0, p1, w + 64);
        b1 = dot_pairs(b1, p1, w + 96);
    }
    for (; kp < np; kp++) {
        const uint16_t *w = panel + kp * PANEL * 2;
        uint32_t p0 = x_pair(x, 2 * kp, K);
        a0 = dot_pairs(a0, p0, w);
        a1 = dot_pairs(a1, p0, w + 32);
    }
    store_cols(y, (v16)_mm512_add_ps(a0, b0), (v16)_mm512_add_ps(a1, b1), cols, ybf16);
}

HX_INLINE void dtile_n(const uint16_t *panel, const uint16_t *x, void *y, int64_t K, int64_t N,
                    int64_t cols, int rows, int ybf16) {
    switch (rows) {
    case 8: dtile(panel, x, y, K, N, cols, 8, ybf16); break;
    case 7: dtile(panel, x, y, K, N, cols, 7, ybf16); break;
    case 6: dtile(panel, x, y, K, N, cols, 6, ybf16); break;
    case 5: dtile(panel, x, y, K, N, cols, 5, ybf16); break;
    case 4: dtile(panel, x, y, K, N, cols, 4, ybf16); break;
    case 3: dtile(panel, x, y, K, N, cols, 3, ybf16); break;
    default: dtile(panel, x, y, K, N, cols, 2, ybf16); break;
    }
}

static void linear_bf16_dot(const uint16_t *panels, const uint16_t *x, void *y, int64_t M,
                            int64_t N, int64_t K, int threads, int ybf16) {
    split_t s = split(M, N);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < s.work; t++) {
        item_t it = item(s, t, M, N);
        const uint16_t *panel = panels + it.p * pairs(K) * PANEL * 2;
        const uint16_t *xb = x + it.m * K;
        void *yb = y_at(y, it.m * N + it.n0, ybf16);
        if (it.rows == 1)
            dtile_row(panel, xb, yb, K, it.cols, ybf16);
        else
            dtile_n(panel, xb, yb, K, N, it.cols, it.rows, ybf16);
    }
}
#endif

/* ---- int8 weights ------------------------------------------------------------------------ */
/* 16 int8 weights widened to fp32: sign-extending loads by intrinsics where the CPU has them (GCC
 * turns a vector-extension int8 -> int32 conversion into 16 scalar conversions) */
#if defined(__AVX512F__)
#include <immintrin.h>
HX_INLINE v16 load_i8x16(const int8_t *p) {
    return (v16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
#elif defined(__AVX2__)
#include <immintrin.h>
HX_INLINE v16 load_i8x16(const int8_t *p) {
    __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8))));
    v16 out;
    memcpy(&out, &lo, sizeof lo);
    memcpy((char *)&out + sizeof lo, &hi, sizeof hi);
    return out;
}
#else
typedef int8_t b16 __attribute__((vector_size(16)));
HX_INLINE v16 load_i8x16(const int8_t *p) {
    b16 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(__builtin_convertvector(b, i16v), v16);
}
#endif

/* the 32 scales of a panel's columns (zero beyond `cols`) as two vectors */
HX_INLINE void panel_scales(const float *scales, int64_t n0, int64_t cols, v16 *s0, v16 *s1) {
    if (cols == PANEL) {
        *s0 = *(const v16u *)(scales + n0);
        *s1 = *(const v16u *)(scales + n0 + 16);
        return;
    }
    float s[PANEL] = {0};
    for (int64_t j = 0; j < cols; j++) s[j] = scales[n0 + j];
    *s0 = *(const v16u *)s;
    *s1 = *(const v16u *)(s + 16);
}

/* `wide` (when not NULL): the same panel already widened to fp32 (see linear_i8_staged) */
HX_INLINE void qtile(const int8_t *panel, const float *wide, const float *x, void *y, v16 s0, v16 s1,
                     int64_t K, int64_t N, int64_t cols, int rows, int ybf16) {
    v16 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = (v16){0};
    for (int64_t k = 0; k < K; k++) {
        v16 w0 = wide ? *(const v16 *)(wide + k * PANEL) : load_i8x16(panel + k * PANEL);
        v16 w1 = wide ? *(const v16 *)(wide + k * PANEL + 16) : load_i8x16(panel + k * PANEL + 16);
        for (int i = 0; i < rows; i++) {
            float xi = x[i * K + k];
            acc[i][0] += xi * w0;
            acc[i][1] += xi * w1;
        }
    }
    for (int i = 0; i < rows; i++)
        store_cols(y_at(y, i * N, ybf16), acc[i][0] * s0, acc[i][1] * s1, cols, ybf16);
}

/* one activation row: k unrolled by four (eight independent FMA chains; the widening adds
 * latency that two chains per column do not hide) */
HX_INLINE void qtile_row(const int8_t *panel, const float *x, void *y, v16 s0, v16 s1, int64_t K,
                         int64_t cols, int ybf16) {
    v16 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0 = {0}, c1 = {0}, d0 = {0}, d1 = {0};
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        const int8_t *w = panel + k * PANEL;
        a0 += x[k] * load_i8x16(w);
        a1 += x[k] * load_i8x16(w + 16);
        b0 += x[k + 1] * load_i8x16(w + 32);
        b1 += x[k + 1] * load_i8x16(w + 48);
        c0 += x[k + 2] * load_i8x16(w + 64);
        c1 += x[k + 2] * load_i8x16(w + 80);
        d0 += x[k + 3] * load_i8x16(w + 96);
        d1 += x[k + 3] * load_i8x16(w + 112);
    }
    for (; k < K; k++) {
        a0 += x[k] * load_i8x16(panel + k * PANEL);
        a1 += x[k] * load_i8x16(panel + k * PANEL + 16);
    }
    store_cols(y, ((a0 + b0) + (c0 + d0)) * s0, ((a1 + b1) + (c1 + d1)) * s1, cols, ybf16);
}

HX_INLINE void qtile_n(const int8_t *panel, const float *wide, const float *x, void *y, v16 s0,
                       v16 s1, int64_t K, int64_t N, int64_t cols, int rows, int ybf16) {
    switch (rows) {
    case 8: qtile(panel, wide, x, y, s0, s1, K, N, cols, 8, ybf16); break;
    case 7: qtile(panel, wide, x, y, s0, s1, K, N, cols, 7, ybf16); break;
    case 6: qtile(panel, wide, x, y, s0, s1, K, N, cols, 6, ybf16); break;
    case 5: qtile(panel, wide, x, y, s0, s1, K, N, cols, 5, ybf16); break;
    case 4: qtile(panel, wide, x, y, s0, s1, K, N, cols, 4, ybf16); break;
    case 3: qtile(panel, wide, x, y, s0, s1, K, N, cols, 3, ybf16); break;
    default: qtile(panel, wide, x, y, s0, s1, K, N, cols, 2, ybf16); break;
    }
}

/* More than one block of rows (M > 8): each thread widens a panel once into its own buffer (L2
 * sized: K x 32 floats) and runs every row block over it, instead of widening it per block. The
 * widened values are exact, so the results are those of the unstaged path. 0, or -1 when out of
 * memory. */
static int linear_i8_staged(const int8_t *panels, const float *scales, const float *x, void *y,
                            split_t s, int64_t M, int64_t N, int64_t K, int threads, int ybf16) {
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        float *wide = aligned_alloc(64, (size_t)(K * PANEL) * sizeof *wide);
        int64_t current = -1;
        if (wide == NULL) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < s.work; t++) {
            if (wide == NULL) continue;
            item_t it = item(s, t, M, N);
            if (it.p != current) {
                const int8_t *panel = panels + it.p * K * PANEL;
                for (int64_t k = 0; k < K; k++) {
                    *(v16 *)(wide + k * PANEL) = load_i8x16(panel + k * PANEL);
                    *(v16 *)(wide + k * PANEL + 16) = load_i8x16(panel + k * PANEL + 16);
                }
                current = it.p;
            }
            v16 s0, s1;
            panel_scales(scales, it.n0, it.cols, &s0, &s1);
            const float *xb = x + it.m * K;
            void *yb = y_at(y, it.m * N + it.n0, ybf16);
            if (it.rows == 1)
                qtile_row(panels + it.p * K * PANEL, xb, yb, s0, s1, K, it.cols, ybf16);
            else
                qtile_n(NULL, wide, xb, yb, s0, s1, K, N, it.cols, it.rows, ybf16);
        }
        free(wide);
    }
    return failed ? -1 : 0;
}

static int linear_i8(const int8_t *panels, const float *scales, const float *x, void *y, int64_t M,
                     int64_t N, int64_t K, int threads, int ybf16) {
    split_t s = split(M, N);
    if (s.n_blocks > 1) return linear_i8_staged(panels, scales, x, y, s, M, N, K, threads, ybf16);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < s.work; t++) {
        item_t it = item(s, t, M, N);
        const int8_t *panel = panels + it.p * K * PANEL;
        v16 s0, s1;
        panel_scales(scales, it.n0, it.cols, &s0, &s1);
        const float *xb = x + it.m * K;
        void *yb = y_at(y, it.m * N + it.n0, ybf16);
        if (it.rows == 1)
            qtile_row(panel, xb, yb, s0, s1, K, it.cols, ybf16);
        else
            qtile_n(panel, NULL, xb, yb, s0, s1, K, N, it.cols, it.rows, ybf16);
    }
    return 0;
}

#if HX_BF16_DOT
/* 32 int8 weights (16 columns x a k pair) as 32 bf16 lanes, exactly (|q| <= 127) */
HX_INLINE __m512bh i8x32_to_bf16(const int8_t *p) {
    __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16))));
    return _mm512_cvtne2ps_pbh(hi, lo); /* lanes 0-15 from lo, 16-31 from hi */
}

/* `wide` (when not NULL): the same panel already widened to bf16 (see linear_i8_bf16_staged) */
HX_INLINE void qdtile(const int8_t *panel, const uint16_t *wide, const uint16_t *x, void *y, v16 s0,
                      v16 s1, int64_t K, int64_t N, int64_t cols, int rows, int ybf16) {
    __m512 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t kp = 0; kp < pairs(K); kp++) {
        __m512bh w0, w1;
        if (wide) {
            w0 = (__m512bh)_mm512_load_si512(wide + kp * PANEL * 2);
            w1 = (__m512bh)_mm512_load_si512(wide + kp * PANEL * 2 + 32);
        } else {
            w0 = i8x32_to_bf16(panel + kp * PANEL * 2);
            w1 = i8x32_to_bf16(panel + kp * PANEL * 2 + 32);
        }
        for (int i = 0; i < rows; i++) {
            __m512bh xp = (__m512bh)_mm512_set1_epi32((int)x_pair(x + i * K, 2 * kp, K));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w0, xp);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], w1, xp);
        }
    }
    for (int i = 0; i < rows; i++)
        store_cols(y_at(y, i * N, ybf16), (v16)acc[i][0] * s0, (v16)acc[i][1] * s1, cols, ybf16);
}

HX_INLINE void qdtile_row(const int8_t *panel, const uint16_t *x, void *y, v16 s0, v16 s1,
                          int64_t K, int64_t cols, int ybf16) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t kp = 0, np = pairs(K);
    for (; kp + 2 <= np; kp += 2) {
        const int8_t *w = panel + kp * PANEL * 2;
        __m512bh p0 = (__m512bh)_mm512_set1_epi32((int)x_pair(x, 2 * kp, K));
        __m512bh p1 = (__m512bh)_mm512_set1_epi32((int)x_pair(x, 2 * kp + 2, K));
        a0 = _mm512_dpbf16_ps(a0, i8x32_to_bf16(w), p0);
        a1 = _mm512_dpbf16_ps(a1, i8x32_to_bf16(w + 32), p0);
        b0 = _mm512_dpbf16_ps(b0, i8x32_to_bf16(w + 64), p1);
        b1 = _mm512_dpbf16_ps(b1, i8x32_to_bf16(w + 96), p1);
    }
    for (; kp < np; kp++) {
        const int8_t *w = panel + kp * PANEL * 2;
        __m512bh p0 = (__m512bh)_mm512_set1_epi32((int)x_pair(x, 2 * kp, K));
        a0 = _mm512_dpbf16_ps(a0, i8x32_to_bf16(w), p0);
        a1 = _mm512_dpbf16_ps(a1, i8x32_to_bf16(w + 32), p0);
    }
    store_cols(y, (v16)_mm512_add_ps(a0, b0) * s0, (v16)_mm512_add_ps(a1, b1) * s1, cols, ybf16);
}

HX_INLINE void qdtile_n(const int8_t *panel, const uint16_t *wide, const uint16_t *x, void *y,
                        v16 s0, v16 s1, int64_t K, int64_t N, int64_t cols, int rows, int ybf16) {
    switch (rows) {
    case 8: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 8, ybf16); break;
    case 7: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 7, ybf16); break;
    case 6: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 6, ybf16); break;
    case 5: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 5, ybf16); break;
    case 4: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 4, ybf16); break;
    case 3: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 3, ybf16); break;
    default: qdtile(panel, wide, x, y, s0, s1, K, N, cols, 2, ybf16); break;
    }
}

/* as linear_i8_staged: a panel widened to bf16 once per thread for all its row blocks */
static int linear_i8_bf16_staged(const int8_t *panels, const float *scales, const uint16_t *x,
                                 void *y, split_t s, int64_t M, int64_t N, int64_t K, int threads,
                                 int ybf16) {
    int failed = 0;
    int64_t panel_elems = pairs(K) * PANEL * 2;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        uint16_t *wide = aligned_alloc(64, (size_t)panel_elems * sizeof *wide);
        int64_t current = -1;
        if (wide == NULL) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < s.work; t++) {
            if (wide == NULL) continue;
            item_t it = item(s, t, M, N);
            const int8_t *panel = panels + it.p * panel_elems;
            if (it.p != current) {
                for (int64_t e = 0; e < panel_elems; e += 32)
                    _mm512_store_si512(wide + e, (__m512i)i8x32_to_bf16(panel + e));
                current = it.p;
            }
            v16 s0, s1;
            panel_scales(scales, it.n0, it.cols, &s0, &s1);
            const uint16_t *xb = x + it.m * K;
            void *yb = y_at(y, it.m * N + it.n0, ybf16);
            if (it.rows == 1)
                qdtile_row(panel, xb, yb, s0, s1, K, it.cols, ybf16);
            else
                qdtile_n(NULL, wide, xb, yb, s0, s1, K, N, it.cols, it.rows, ybf16);
        }
        free(wide);
    }
    return failed ? -1 : 0;
}

static int linear_i8_bf16_dot(const int8_t *panels, const float *scales, const uint16_t *x,
                              void *y, int64_t M, int64_t N, int64_t K, int threads, int ybf16) {
    split_t s = split(M, N);
    if (s.n_blocks > 1) return linear_i8_bf16_staged(panels, scales, x, y, s, M, N, K, threads, ybf16);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < s.work; t++) {
        item_t it = item(s, t, M, N);
        const int8_t *panel = panels + it.p * pairs(K) * PANEL * 2;
        v16 s0, s1;
        panel_scales(scales, it.n0, it.cols, &s0, &s1);
        const uint16_t *xb = x + it.m * K;
        void *yb = y_at(y, it.m * N + it.n0, ybf16);
        if (it.rows == 1)
            qdtile_row(panel, xb, yb, s0, s1, K, it.cols, ybf16);
        else
            qdtile_n(panel, NULL, xb, yb, s0, s1, K, N, it.cols, it.rows, ybf16);
    }
    return 0;
}
#endif

int hx_abi_version(void) { return 5; } /* of the whole library, decode_attention.c included */

/* 1 where bf16 runs on VDPBF16PS (k-pair panels), 0 where it is widened to fp32 */
int hx_bf16_dot(void) { return HX_BF16_DOT; }

/* bf16 matrices use k-pair panels where the CPU has a bf16 dot product; fp32 never does */
static int pair_layout(int bf16) { return bf16 && HX_BF16_DOT; }

/* elements a packed [N, K] matrix takes */
int64_t hx_packed_size(int64_t N, int64_t K, int bf16) {
    int64_t cols = (N + PANEL - 1) / PANEL * PANEL;
    return pair_layout(bf16) ? cols * ((K + 1) / 2) * 2 : cols * K;
}

/* where element (n, k) lives: P[N/32][K][32], or P[N/32][K/2][32][2] with k pairs */
static int64_t packed_index(int64_t n, int64_t k, int64_t K, int pairs_layout) {
    if (pairs_layout) return ((n / PANEL * ((K + 1) / 2) + k / 2) * PANEL + n % PANEL) * 2 + k % 2;
    return (n / PANEL * K + k) * PANEL + n % PANEL;
}

/* row-major W[N][K] -> panels (padding zero). Typed loops, not one generic one: OpenMP outlines
 * the loop body before the element size could be folded into it, and a per-element memcpy call
 * made packing 1.2-2.5x slower. The loop orders are the faster of the two for each layout. */
void hx_pack_f32(const float *w, float *p, int64_t N, int64_t K, int threads) {
    int64_t n_panels = (N + PANEL - 1) / PANEL;
    memset(p, 0, (size_t)hx_packed_size(N, K, 0) * sizeof *p);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < n_panels; b++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = b * PANEL; n < N && n < (b + 1) * PANEL; n++)
                p[packed_index(n, k, K, 0)] = w[n * K + k];
}

void hx_pack_bf16(const uint16_t *w, uint16_t *p, int64_t N, int64_t K, int threads) {
    int64_t n_panels = (N + PANEL - 1) / PANEL;
    int pairs_layout = pair_layout(1);
    memset(p, 0, (size_t)hx_packed_size(N, K, 1) * sizeof *p);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < n_panels; b++)
        for (int64_t n = b * PANEL; n < N && n < (b + 1) * PANEL; n++)
            for (int64_t k = 0; k < K; k++) p[packed_index(n, k, K, pairs_layout)] = w[n * K + k];
}

void hx_unpack_f32(const float *p, float *w, int64_t N, int64_t K) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) w[n * K + k] = p[packed_index(n, k, K, 0)];
}

void hx_unpack_bf16(const uint16_t *p, uint16_t *w, int64_t N, int64_t K) {
    int pairs_layout = pair_layout(1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) w[n * K + k] = p[packed_index(n, k, K, pairs_layout)];
}

void hx_linear_f32(const float *panels, const float *x, float *y, int64_t M, int64_t N, int64_t K,
                   int threads) {
    linear(panels, x, y, M, N, K, threads, 0, 0);
}

/* bf16 weights x bf16 activations -> Y in fp32, or in bf16 (each result rounded once) when
 * out_bf16; returns 0, or -1 when out of memory */
int hx_linear_bf16(const uint16_t *panels, const uint16_t *x, void *y, int64_t M, int64_t N,
                   int64_t K, int threads, int out_bf16) {
#if HX_BF16_DOT
    linear_bf16_dot(panels, x, y, M, N, K, threads, out_bf16);
    return 0;
#else
    float *wide = malloc((size_t)(M * K) * sizeof *wide);
    if (wide == NULL) return -1;
    for (int64_t i = 0; i < M * K; i++) wide[i] = bf16_to_f32(x[i]);
    linear(panels, wide, y, M, N, K, threads, 1, out_bf16);
    free(wide);
    return 0;
#endif
}

/* int8 panels: k-pair layout where bf16 activations meet VDPBF16PS (x_bf16 and a bf16 dot
 * product), the plain k-major one otherwise; `x_bf16` names the activations they will meet */
int64_t hx_packed_size_i8(int64_t N, int64_t K, int x_bf16) { return hx_packed_size(N, K, x_bf16); }

void hx_pack_i8(const int8_t *w, int8_t *p, int64_t N, int64_t K, int x_bf16, int threads) {
    int64_t n_panels = (N + PANEL - 1) / PANEL;
    int pairs_layout = pair_layout(x_bf16);
    memset(p, 0, (size_t)hx_packed_size(N, K, x_bf16));
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < n_panels; b++)
        for (int64_t n = b * PANEL; n < N && n < (b + 1) * PANEL; n++)
            for (int64_t k = 0; k < K; k++) p[packed_index(n, k, K, pairs_layout)] = w[n * K + k];
}

void hx_unpack_i8(const int8_t *p, int8_t *w, int64_t N, int64_t K, int x_bf16) {
    int pairs_layout = pair_layout(x_bf16);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) w[n * K + k] = p[packed_index(n, k, K, pairs_layout)];
}

/* int8 weights (scale per output column) x activations X (float32, or bfloat16 when x_bf16; the
 * panels packed for the same x_bf16) -> Y in fp32, or bf16 when out_bf16; 0, or -1 when out of
 * memory */
int hx_linear_i8(const int8_t *panels, const float *scales, const void *x, void *y, int64_t M,
                 int64_t N, int64_t K, int threads, int x_bf16, int out_bf16) {
    if (!x_bf16) return linear_i8(panels, scales, x, y, M, N, K, threads, out_bf16);
#if HX_BF16_DOT
    return linear_i8_bf16_dot(panels, scales, x, y, M, N, K, threads, out_bf16);
#else
    float *wide = malloc((size_t)(M * K) * sizeof *wide);
    if (wide == NULL) return -1;
    for (int64_t i = 0; i < M * K; i++) wide[i] = bf16_to_f32(((const uint16_t *)x)[i]);
    int code = linear_i8(panels, scales, wide, y, M, N, K, threads, out_bf16);
    free(wide);
    return code;
#endif
}
