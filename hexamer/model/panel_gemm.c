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
 * (AVX-512, AVX2 or NEON as the CPU has). bf16 weights are widened to fp32 in registers;
 * accumulation is fp32. Threads: OpenMP (the same runtime PyTorch's CPU build loads).
 */
#include <stdint.h>
#include <string.h>

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
typedef uint16_t h16u __attribute__((vector_size(32), aligned(2)));
typedef uint32_t w16 __attribute__((vector_size(64)));

#define PANEL 32 /* output columns per panel: two 16-float vectors */
#define MR 8     /* activation rows per register tile */
#define INLINE __attribute__((always_inline)) static inline

INLINE v16 load_w(const void *p, int bf16) {
    if (bf16) {
        w16 wide = __builtin_convertvector(*(const h16u *)p, w16) << 16;
        return (v16)wide;
    }
    return *(const v16u *)p;
}

INLINE const void *panel_at(const void *panels, int64_t offset, int bf16) {
    return bf16 ? (const void *)((const uint16_t *)panels + offset)
                : (const void *)((const float *)panels + offset);
}

/* rows x 32 tile of Y (row stride N) from one panel: `rows` <= MR, `cols` <= 32 valid columns */
INLINE void tile(const void *panel, const float *x, float *y, int64_t K, int64_t N, int64_t cols,
                 int rows, int bf16) {
    v16 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = (v16){0};
    for (int64_t k = 0; k < K; k++) {
        v16 w0 = load_w(panel_at(panel, k * PANEL, bf16), bf16);
        v16 w1 = load_w(panel_at(panel, k * PANEL + 16, bf16), bf16);
        for (int i = 0; i < rows; i++) {
            float xi = x[i * K + k];
            acc[i][0] += xi * w0;
            acc[i][1] += xi * w1;
        }
    }
    for (int i = 0; i < rows; i++) {
        float *out = y + i * N;
        if (cols == PANEL) {
            *(v16u *)out = acc[i][0];
            *(v16u *)(out + 16) = acc[i][1];
        } else {
            for (int64_t j = 0; j < cols; j++) out[j] = j < 16 ? acc[i][0][j] : acc[i][1][j - 16];
        }
    }
}

/* one activation row: k unrolled by two so four independent FMA chains hide the latency */
INLINE void tile_row(const void *panel, const float *x, float *y, int64_t K, int64_t cols,
                     int bf16) {
    v16 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) {
        float x0 = x[k], x1 = x[k + 1];
        a0 += x0 * load_w(panel_at(panel, k * PANEL, bf16), bf16);
        a1 += x0 * load_w(panel_at(panel, k * PANEL + 16, bf16), bf16);
        b0 += x1 * load_w(panel_at(panel, (k + 1) * PANEL, bf16), bf16);
        b1 += x1 * load_w(panel_at(panel, (k + 1) * PANEL + 16, bf16), bf16);
    }
    for (; k < K; k++) {
        a0 += x[k] * load_w(panel_at(panel, k * PANEL, bf16), bf16);
        a1 += x[k] * load_w(panel_at(panel, k * PANEL + 16, bf16), bf16);
    }
    a0 += b0;
    a1 += b1;
    for (int64_t j = 0; j < cols; j++) y[j] = j < 16 ? a0[j] : a1[j - 16];
}

INLINE void tile_n(const void *panel, const float *x, float *y, int64_t K, int64_t N,
                   int64_t cols, int rows, int bf16) {
    switch (rows) { /* constant row counts let the compiler keep the tile in registers */
    case 8: tile(panel, x, y, K, N, cols, 8, bf16); break;
    case 7: tile(panel, x, y, K, N, cols, 7, bf16); break;
    case 6: tile(panel, x, y, K, N, cols, 6, bf16); break;
    case 5: tile(panel, x, y, K, N, cols, 5, bf16); break;
    case 4: tile(panel, x, y, K, N, cols, 4, bf16); break;
    case 3: tile(panel, x, y, K, N, cols, 3, bf16); break;
    default: tile(panel, x, y, K, N, cols, 2, bf16); break;
    }
}

INLINE void linear(const void *panels, const float *x, float *y, int64_t M, int64_t N, int64_t K,
                   int threads, int bf16) {
    int64_t n_panels = (N + PANEL - 1) / PANEL;
    /* rows split into equal blocks of at most MR (16 rows -> 8 + 8, not 8 + 8 + 0) */
    int64_t n_blocks = (M + MR - 1) / MR;
    int64_t block = (M + n_blocks - 1) / n_blocks;
    n_blocks = (M + block - 1) / block;
    int64_t work = n_panels * n_blocks;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < work; t++) {
        int64_t p = t / n_blocks, m = (t % n_blocks) * block;
        int64_t n0 = p * PANEL, cols = N - n0 < PANEL ? N - n0 : PANEL;
        int rows = (int)(M - m < block ? M - m : block);
        const void *panel = panel_at(panels, p * K * PANEL, bf16);
        if (rows == 1)
            tile_row(panel, x + m * K, y + m * N + n0, K, cols, bf16);
        else
            tile_n(panel, x + m * K, y + m * N + n0, K, N, cols, rows, bf16);
    }
}

/* P[N/32][K][32] from row-major W[N][K]; padding columns are zero */
INLINE void pack(const void *w, void *p, int64_t N, int64_t K, int threads, int bf16) {
    int64_t n_panels = (N + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < n_panels; b++) {
        for (int64_t k = 0; k < K; k++) {
            for (int64_t j = 0; j < PANEL; j++) {
                int64_t n = b * PANEL + j, dst = (b * K + k) * PANEL + j;
                if (bf16)
                    ((uint16_t *)p)[dst] = n < N ? ((const uint16_t *)w)[n * K + k] : 0;
                else
                    ((float *)p)[dst] = n < N ? ((const float *)w)[n * K + k] : 0.0f;
            }
        }
    }
}

int hx_abi_version(void) { return 1; }

void hx_pack_f32(const float *w, float *p, int64_t N, int64_t K, int threads) {
    pack(w, p, N, K, threads, 0);
}

void hx_pack_bf16(const uint16_t *w, uint16_t *p, int64_t N, int64_t K, int threads) {
    pack(w, p, N, K, threads, 1);
}

void hx_linear_f32(const float *panels, const float *x, float *y, int64_t M, int64_t N, int64_t K,
                   int threads) {
    linear(panels, x, y, M, N, K, threads, 0);
}

void hx_linear_bf16(const uint16_t *panels, const float *x, float *y, int64_t M, int64_t N,
                    int64_t K, int threads) {
    linear(panels, x, y, M, N, K, threads, 1);
}
