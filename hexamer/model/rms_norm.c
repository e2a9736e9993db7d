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

#include "simd.h"

typedef double dv8 __attribute__((vector_size(64)));

/* each lane rounded to bf16, kept as the widened float value */
HX_INLINE v16 round16(v16 v) { return from_bf16x16(to_bf16x16(v)); }

/* sum of x^2 rounded once to fp32: products and sums in double (exact products, negligible
 * summation error), which is what PyTorch's multi-accumulator fp32 sum approximates */
static float sum_of_squares(const void *x, int64_t N, int bf16) {
    dv8 acc = {0};
    int64_t i = 0;
    for (; i + 16 <= N; i += 16) {
        v16 v = load16(x, i, bf16);
        dv8 lo = __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), dv8);
        dv8 hi = __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), dv8);
        acc += lo * lo + hi * hi;
    }
    double total = 0;
    for (int j = 0; j < 8; j++) total += acc[j];
    for (; i < N; i++) {
        double v = load1(x, i, bf16);
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
            v16 normed = load16(row, i, bf16) * r;
            if (bf16) {
                h16u h = to_bf16x16(load16(weight, i, 1) * round16(normed));
                memcpy((uint16_t *)out + m * N + i, &h, sizeof h);
            } else {
                v16 y = load16(weight, i, 0) * normed;
                memcpy((float *)out + m * N + i, &y, sizeof y);
            }
        }
        for (; i < N; i++) {
            if (bf16) {
                float normed = bf16_to_f32(f32_to_bf16(load1(row, i, 1) * r));
                ((uint16_t *)out)[m * N + i] = f32_to_bf16(load1(weight, i, 1) * normed);
            } else {
                float normed = load1(row, i, 0) * r;
                ((float *)out)[m * N + i] = load1(weight, i, 0) * normed;
            }
        }
    }
}
