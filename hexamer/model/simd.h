/* What hexamer's C kernels (panel_gemm.c, decode_attention.c, rms_norm.c) share: 16-float vectors
 * through GCC/Clang vector extensions (one AVX-512 register, two AVX2 or four NEON ones, as
 * -march=native decides), loads that widen bfloat16 to float32 on the fly, and float32 -> bfloat16
 * rounding as PyTorch rounds (to nearest even; a NaN stays a quiet NaN). */
#ifndef HX_SIMD_H
#define HX_SIMD_H

#include <stdint.h>
#include <string.h>

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4))); /* for unaligned loads/stores */
typedef int32_t i16v __attribute__((vector_size(64)));
typedef uint32_t w16 __attribute__((vector_size(64)));
typedef uint16_t h16u __attribute__((vector_size(32), aligned(2)));

#define HX_INLINE __attribute__((always_inline)) static inline

HX_INLINE float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

HX_INLINE uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* element i of p, which holds float32, or bfloat16 when bf16 */
HX_INLINE float load1(const void *p, int64_t i, int bf16) {
    return bf16 ? bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

HX_INLINE v16 from_bf16x16(h16u h) { return (v16)(__builtin_convertvector(h, w16) << 16); }

/* elements i .. i+15 of p (float32, or bfloat16 widened) */
HX_INLINE v16 load16(const void *p, int64_t i, int bf16) {
    if (bf16) return from_bf16x16(*(const h16u *)((const uint16_t *)p + i));
    return *(const v16u *)((const float *)p + i);
}

/* 16 floats rounded to bfloat16, lane by lane as f32_to_bf16 */
HX_INLINE h16u to_bf16x16(v16 a) {
    w16 bits = (w16)a;
    w16 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    w16 nan = (bits & 0x7fffffffu) > 0x7f800000u;
    rounded = (rounded & ~nan) | (0x7fc0u & nan);
    return __builtin_convertvector(rounded, h16u);
}

#endif
