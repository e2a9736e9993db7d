/* RMSNorm for hexamer's CPU path: out = weight * (x / sqrt(mean(x^2) + eps)), row by row.
 *
 * Why: written as PyTorch ops the Llama norm is 6-8 small kernels (upcast, square, mean, add,
 * rsqrt, multiply, downcast, multiply), ~25 us per call at decode shapes, two calls per layer;
 * this is one pass that costs about the price of the call. Rounding follows the reference
 * (Hugging Face's LlamaRMSNorm): statistics in fp32, the normalised row rounded to the
 * activation dtype, then multiplied by the weight in that dtype. Only the summation of
 * mean(x^2) differs from PyTorch's (done in double here), so results agree to the last bit or,
 * rarely, one unit in it.
 * Compiled together with panel_gemm.c (same flags, same library).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float nv16 __attribute__((vector_size(64)));
typedef float nv16u __attribute__((vector_size(64), aligned(4)));
typedef uint16_t nh16u __attribute__((vector_size(32), aligned(2)));
typedef uint32_t nw16 __attribute__((vector_size(64)));
typedef double dv8 __attribute__((vector_size(64)));

static inline float bf16_value(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static inline float elem(const void *p, int64_t i, int bf16) {
    return bf16 ? bf16_value(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline nv16 load_row16(const void *p, int64_t i, int bf16) {
    if (bf16) return (nv16)(__builtin_convertvector(*(const nh16u *)((const uint16_t *)p + i), nw16) << 16);
    return *(const nv16u *)((const float *)p + i);
}

/* round each lane to bf16 (nearest even; NaN stays NaN), kept as the widened float value */
static inline nv16 round16(nv16 v) {
    nw16 bits = (nw16)v;
    nw16 rounded = ((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) << 16;
    nw16 nan = (bits & 0x7fffffffu) > 0x7f800000u;
    return (nv16)((rounded & ~nan) | (bits & nan));
}

/* sum of x^2 rounded once to fp32: products and sums in double (exact products, negligible
 * summation error), which is what PyTorch's multi-accumulator fp32 sum approximates */
static float sum_of_squares(const void *x, int64_t N, int bf16) {
    dv8 acc = {0};
    int64_t i = 0;
    for (; i + 16 <= N; i += 16) {
        nv16 v = load_row16(x, i, bf16);
        dv8 lo = __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), dv8);
        dv8 hi = __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), dv8);
        acc += lo * lo + hi * hi;
    }
    double total = 0;
    for (int j = 0; j < 8; j++) total += acc[j];
    for (; i < N; i++) {
        double v = elem(x, i, bf16);
        total += v * v;
    }
    return (float)total;
}

/* x, weight, out: [M, N] rows (weight [N]), all float32 or all bfloat16 (bf16) */
void hx_rms_norm(const void *x, const void *weight, void *out, int64_t M, int64_t N, float eps,
                 int bf16, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && M >= 8)
    for (int64_t m = 0; m < M; m++) {
        const void *row = bf16 ? (const void *)((const uint16_t *)x + m * N)
                               : (const void *)((const float *)x + m * N);
        float r = 1.0f / sqrtf(sum_of_squares(row, N, bf16) / (float)N + eps);
        int64_t i = 0;
        for (; i + 16 <= N; i += 16) { /* the normalised value is rounded before the weight */
            nv16 normed = load_row16(row, i, bf16) * r;
            if (bf16) {
                nv16 y = round16(load_row16(weight, i, 1) * round16(normed));
                nh16u h = __builtin_convertvector((nw16)y >> 16, nh16u);
                memcpy((uint16_t *)out + m * N + i, &h, sizeof h);
            } else {
                nv16 y = load_row16(weight, i, 0) * normed;
                memcpy((float *)out + m * N + i, &y, sizeof y);
            }
        }
        for (; i < N; i++) {
            if (bf16) {
                float normed = bf16_value(to_bf16(elem(row, i, 1) * r));
                ((uint16_t *)out)[m * N + i] = to_bf16(elem(weight, i, 1) * normed);
            } else {
                float normed = elem(row, i, 0) * r;
                ((float *)out)[m * N + i] = elem(weight, i, 0) * normed;
            }
        }
    }
}
