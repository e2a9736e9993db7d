/* Fused float32 training kernels: RMSNorm, rotary embedding and SwiGLU, forward and backward.
 *
 * Why: written as PyTorch ops each of these is 4-10 elementwise passes over the activations in
 * the forward and as many again in autograd's backward (plus the temporaries autograd keeps);
 * on CPU those passes were about a third of a fine-tuning step of the 500M shape. Each function
 * here is one pass (two for the norm's backward, which needs a row's dot product first), rows
 * split over OpenMP threads. The maths is the reference's (transformers' LlamaRMSNorm,
 * apply_rotary_pos_emb with rotate_half, silu(gate) * up); only rounding differs (fused
 * multiply-adds, summation order), checked against PyTorch in tests/model/test_train_ops.py.
 * Built and loaded by hexamer/model/train_native.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

int hx_train_abi_version(void) { return 2; }

/* Values a call must touch before it splits over threads: these passes are memory-bound and
 * take well under a millisecond on one core at a training step's sizes, where a parallel
 * region's barrier costs more than it saves when the cores are shared (and a second OpenMP
 * runtime beside PyTorch's would spin against it). */
#define PARALLEL_MIN (1 << 22)

/* ---- RMSNorm: y = w * (x * r), r = 1 / sqrt(mean(x^2) + eps); x, y: [M, N], r: [M] */
void hx_rms_fwd(const float *x, const float *w, float *y, float *rstd, int64_t M, int64_t N, float eps,
                int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && M * N >= PARALLEL_MIN)
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = 0; i < N; i++) ss += (double)xr[i] * (double)xr[i];
        float r = 1.0f / sqrtf((float)ss / (float)N + eps);
        rstd[m] = r;
#pragma omp simd
        for (int64_t i = 0; i < N; i++) yr[i] = w[i] * (xr[i] * r);
    }
}

/* gx = r * g * w - x * r^3 * mean(g * w * x); gw += sum over rows of g * x * r (gw may be NULL).
 * Returns 0, or 1 when the per-thread partial sums of gw could not be allocated. */
int hx_rms_bwd(const float *g, const float *x, const float *w, const float *rstd, float *gx, float *gw,
               int64_t M, int64_t N, int threads) {
    if (threads < 1) threads = 1;
    float *part = NULL;
    if (gw != NULL) {
        part = (float *)calloc((size_t)threads * (size_t)N, sizeof(float));
        if (part == NULL) return 1;
    }
#pragma omp parallel num_threads(threads) if (threads > 1 && M * N >= PARALLEL_MIN)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        float *acc = part != NULL ? part + (size_t)t * (size_t)N : NULL;
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++) {
            const float *gr = g + m * N, *xr = x + m * N;
            float *out = gx + m * N;
            float r = rstd[m];
            double dot = 0.0;
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < N; i++) dot += (double)(gr[i] * w[i]) * (double)xr[i];
            float c = (float)(dot / (double)N) * r * r * r;
#pragma omp simd
            for (int64_t i = 0; i < N; i++) out[i] = r * (gr[i] * w[i]) - c * xr[i];
            if (acc != NULL) {
#pragma omp simd
                for (int64_t i = 0; i < N; i++) acc[i] += gr[i] * (xr[i] * r);
            }
        }
    }
    if (gw != NULL) {
        for (int t = 0; t < threads; t++) {
            const float *p = part + (size_t)t * (size_t)N;
            for (int64_t i = 0; i < N; i++) gw[i] += p[i];
        }
        free(part);
    }
    return 0;
}

/* ---- rotary embedding on [R, H, D] rows (R = batch * tokens, H heads), tables [R, D]:
 * y[:h] = x[:h] * cos[:h] - x[h:] * sin[:h];  y[h:] = x[h:] * cos[h:] + x[:h] * sin[h:]  (h = D / 2)
 * backward (the transposed rotation) with transpose != 0:
 * gx[:h] = g[:h] * cos[:h] + g[h:] * sin[h:];  gx[h:] = g[h:] * cos[h:] - g[:h] * sin[:h] */
void hx_rope(const float *x, const float *cos, const float *sin, float *y, int64_t R, int64_t H, int64_t D,
             int transpose, int threads) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && R * H * D >= PARALLEL_MIN)
    for (int64_t r = 0; r < R; r++) {
        const float *c = cos + r * D, *s = sin + r * D;
        for (int64_t h = 0; h < H; h++) {
            const float *a = x + (r * H + h) * D, *b = a + half;
            float *ya = y + (r * H + h) * D, *yb = ya + half;
            if (!transpose) {
#pragma omp simd
                for (int64_t i = 0; i < half; i++) {
                    float lo = a[i], hi = b[i];
                    ya[i] = lo * c[i] - hi * s[i];
                    yb[i] = hi * c[half + i] + lo * s[half + i];
                }
            } else {
#pragma omp simd
                for (int64_t i = 0; i < half; i++) {
                    float lo = a[i], hi = b[i];
                    ya[i] = lo * c[i] + hi * s[half + i];
                    yb[i] = hi * c[half + i] - lo * s[i];
                }
            }
        }
    }
}

/* ---- SwiGLU: y = silu(a) * b over n values; backward: ga = g * b * sig(a) * (1 + a * (1 - sig(a))),
 * gb = g * silu(a) (either output may be NULL when its input needs no gradient) */

/* exp(x) for |x| <= 88 as Cephes' expf (a degree-6 polynomial on x - n ln2, then 2^n by the
 * exponent bits; within 2 ulp of expf), on 16 lanes with GCC's vector extensions: libm's expf
 * does not vectorise without -ffast-math, and scalar calls made SwiGLU 8x slower than PyTorch */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

static inline v16f splat(float v) { return (v16f){v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v}; }

static inline v16f select16(v16i mask, v16f yes, v16f no) {
    return (v16f)(((v16i)yes & mask) | ((v16i)no & ~mask));
}

static inline v16f exp16(v16f x) {
    x = select16(x < splat(-87.0f), splat(-87.0f), x);
    x = select16(x > splat(88.0f), splat(88.0f), x);
    v16f t = x * splat(1.44269504088896341f) + splat(0.5f);
    v16i k = __builtin_convertvector(t, v16i); /* truncation, then down to the floor */
    k += (v16i)(__builtin_convertvector(k, v16f) > t);
    v16f n = __builtin_convertvector(k, v16f);
    v16f r = x - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    v16f p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    return p * (v16f)((k + 127) << 23);
}

/* 16 values from p, or the first n < 16 and zeros; stored back likewise */
static inline v16f load16f(const float *p, int64_t n) {
    v16f v = splat(0.0f);
    if (n >= 16)
        memcpy(&v, p, sizeof v);
    else
        for (int64_t i = 0; i < n; i++) v[i] = p[i];
    return v;
}

static inline void store16f(float *p, v16f v, int64_t n) {
    if (n >= 16)
        memcpy(p, &v, sizeof v);
    else
        for (int64_t i = 0; i < n; i++) p[i] = v[i];
}

static inline v16f sigmoid16(v16f v) { return splat(1.0f) / (splat(1.0f) + exp16(-v)); }

/* one block of the forward / backward, 16 values at a time */
static void swiglu_fwd_block(const float *a, const float *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        v16f v = load16f(a + i, n - i);
        store16f(y + i, (v * sigmoid16(v)) * load16f(b + i, n - i), n - i);
    }
}

static void swiglu_bwd_block(const float *g, const float *a, const float *b, float *ga, float *gb, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        v16f v = load16f(a + i, n - i), gi = load16f(g + i, n - i), sg = sigmoid16(v);
        if (ga != NULL) {
            v16f slope = sg * (splat(1.0f) + v * (splat(1.0f) - sg)); /* d silu / d v */
            store16f(ga + i, gi * load16f(b + i, n - i) * slope, n - i);
        }
        if (gb != NULL) store16f(gb + i, gi * (v * sg), n - i);
    }
}

#define BLOCK 16384

void hx_swiglu_fwd(const float *a, const float *b, float *y, int64_t n, int threads) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n >= PARALLEL_MIN)
    for (int64_t k = 0; k < blocks; k++) {
        int64_t lo = k * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        swiglu_fwd_block(a + lo, b + lo, y + lo, len);
    }
}

void hx_swiglu_bwd(const float *g, const float *a, const float *b, float *ga, float *gb, int64_t n,
                   int threads) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n >= PARALLEL_MIN)
    for (int64_t k = 0; k < blocks; k++) {
        int64_t lo = k * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        swiglu_bwd_block(g + lo, a + lo, b + lo, ga ? ga + lo : NULL, gb ? gb + lo : NULL, len);
    }
}

/* ---- bfloat16 (under CPU autocast the projections emit bf16) */
typedef uint16_t v16h __attribute__((vector_size(32)));
typedef uint32_t v16u __attribute__((vector_size(64)));

static inline float bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, NaN kept NaN */
    union { float f; uint32_t u; } v = {.f = f};
    if (f != f) return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static inline v16f widen16(v16h h) { return (v16f)(__builtin_convertvector(h, v16u) << 16); }

static inline v16f round16(v16f f) { /* each lane rounded to bf16 and widened back */
    v16u u = (v16u)f;
    v16u r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return select16((v16i)(f != f), f, (v16f)r);
}

static inline v16h narrow16(v16f f) { return __builtin_convertvector((v16u)round16(f) >> 16, v16h); }

static inline v16f load16h(const uint16_t *p, int64_t n) {
    v16h h = {0};
    if (n >= 16)
        memcpy(&h, p, sizeof h);
    else
        for (int64_t i = 0; i < n; i++) h[i] = p[i];
    return widen16(h);
}

static inline void store16h(uint16_t *p, v16f f, int64_t n) {
    v16h h = narrow16(f);
    if (n >= 16)
        memcpy(p, &h, sizeof h);
    else
        for (int64_t i = 0; i < n; i++) p[i] = h[i];
}

/* y = bf16(bf16(silu(a)) * b), as autocast's silu then multiply round */
void hx_swiglu_fwd_bf16(const uint16_t *a, const uint16_t *b, uint16_t *y, int64_t n, int threads) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n >= PARALLEL_MIN)
    for (int64_t k = 0; k < blocks; k++) {
        int64_t lo = k * BLOCK, hi = n - lo < BLOCK ? n : lo + BLOCK;
        for (int64_t i = lo; i < hi; i += 16) {
            v16f v = load16h(a + i, hi - i);
            store16h(y + i, round16(v * sigmoid16(v)) * load16h(b + i, hi - i), hi - i);
        }
    }
}

/* autograd's rounding: gs = bf16(g * b), gb = bf16(g * bf16(silu(a))), ga = bf16(gs * silu'(a)) */
void hx_swiglu_bwd_bf16(const uint16_t *g, const uint16_t *a, const uint16_t *b, uint16_t *ga, uint16_t *gb,
                        int64_t n, int threads) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n >= PARALLEL_MIN)
    for (int64_t k = 0; k < blocks; k++) {
        int64_t lo = k * BLOCK, hi = n - lo < BLOCK ? n : lo + BLOCK;
        for (int64_t i = lo; i < hi; i += 16) {
            v16f v = load16h(a + i, hi - i), gi = load16h(g + i, hi - i), sg = sigmoid16(v);
            if (ga != NULL) {
                v16f slope = sg * (splat(1.0f) + v * (splat(1.0f) - sg));
                store16h(ga + i, round16(gi * load16h(b + i, hi - i)) * slope, hi - i);
            }
            if (gb != NULL) store16h(gb + i, gi * round16(v * sg), hi - i);
        }
    }
}

/* the rotation of bf16 x into float32 y (x * cos promotes to float32 under autocast), and its
 * transpose from a float32 gradient into a bf16 one (autograd casts it back to x's dtype) */
void hx_rope_bf16(const uint16_t *x, const float *cos, const float *sin, float *y, int64_t R, int64_t H,
                  int64_t D, int threads) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && R * H * D >= PARALLEL_MIN)
    for (int64_t r = 0; r < R; r++) {
        const float *c = cos + r * D, *s = sin + r * D;
        for (int64_t h = 0; h < H; h++) {
            const uint16_t *a = x + (r * H + h) * D, *b = a + half;
            float *ya = y + (r * H + h) * D, *yb = ya + half;
            for (int64_t i = 0; i < half; i++) {
                float lo = bf16_to_f32(a[i]), hi = bf16_to_f32(b[i]);
                ya[i] = lo * c[i] - hi * s[i];
                yb[i] = hi * c[half + i] + lo * s[half + i];
            }
        }
    }
}

void hx_rope_t_bf16(const float *g, const float *cos, const float *sin, uint16_t *gx, int64_t R, int64_t H,
                    int64_t D, int threads) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && R * H * D >= PARALLEL_MIN)
    for (int64_t r = 0; r < R; r++) {
        const float *c = cos + r * D, *s = sin + r * D;
        for (int64_t h = 0; h < H; h++) {
            const float *a = g + (r * H + h) * D, *b = a + half;
            uint16_t *ya = gx + (r * H + h) * D, *yb = ya + half;
            for (int64_t i = 0; i < half; i++) {
                float lo = a[i], hi = b[i];
                ya[i] = f32_to_bf16(lo * c[i] + hi * s[half + i]);
                yb[i] = f32_to_bf16(hi * c[half + i] - lo * s[i]);
            }
        }
    }
}
