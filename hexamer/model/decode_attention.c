/* Decode attention for hexamer's CPU path: a few new tokens per row against the KV cache.
 *
 * Why: at decode shapes PyTorch's CPU attention (scaled_dot_product_attention with a mask) costs
 * ~85 us per layer at batch 1 whatever the cache length and reads the cache well below the memory
 * bandwidth at batch 16, and around it each layer runs ~15 small ops (rotary embedding, two
 * indexed cache writes, casts of q/k/v to fp32 and back in bf16 models) of a few microseconds
 * each. Here one call does a layer's rotary embedding, cache write and attention. One work item
 * is (batch row, KV head): it writes that head's new keys/values, then for each new token the
 * query heads of the group share one pass over the keys (scores into a scratch row) and one pass
 * over the values, so the cache is read once per token and item, in whatever dtype it is stored.
 *
 * Exact softmax in fp32 (max, exp, sum, divide); exp is a degree-6 polynomial on the reduced
 * argument (relative error ~1e-7, the order of one fp32 rounding). Keys the mask hides
 * contribute exactly zero. The rotation rounds as PyTorch's ops do (so the cache holds the same
 * bits as on the PyTorch path); bf16 values are widened in registers and rounded to nearest-even
 * once on the way out. Head dims that are a multiple of 16 run on 16-float vectors, others on a
 * scalar loop. Compiled together with panel_gemm.c (same flags, same library).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"

#define VL 16
#define EXP_FLOOR (-87.0f) /* below this exp() is < 2e-38: counted as zero */

/* sum of the 16 lanes as a tree (a lane-by-lane loop is a 16-add dependency chain) */
HX_INLINE float hsum(v16 v) {
    v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return v[0];
}

/* exp(x) for x in [EXP_FLOOR, 0]: x = n ln2 + r, |r| <= ln2/2, exp(r) by Horner, 2^n from bits */
HX_INLINE v16 vexp(v16 x) {
    const v16 magic = (v16){0} + 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    v16 n = (x * 1.44269504f + magic) - magic;
    v16 r = x - n * 0.693145752f - n * 1.42860677e-6f;
    v16 p = (v16){0} + (1.0f / 720);
    p = p * r + (1.0f / 120);
    p = p * r + (1.0f / 24);
    p = p * r + (1.0f / 6);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    i16v scale = (__builtin_convertvector(n, i16v) + 127) << 23;
    return p * (v16)scale;
}

typedef struct {
    const void *q, *k_new, *v_new; /* (B, T, heads, D) at strides (sb, st, sh) each */
    int64_t q_sb, q_st, q_sh, n_sb, n_st, n_sh;
    const void *cos, *sin; /* (B, T, D) contiguous rotary tables, or NULL: no rotation */
    const int64_t *slots;  /* (B, T) contiguous: cache slot of each new token */
    void *k, *v;           /* caches (rows, G, slots, D) at strides (c_sb, c_sh, c_ss); paged: */
    int64_t c_sb, c_sh, c_ss; /* block pools (G, blocks, block size, D), c_sb the block stride */
    const int64_t *rows; /* cache row of each batch row, or NULL: row b */
    const int64_t *tab;  /* paged: block table (cache rows, tab_s) of pool blocks; NULL: contiguous */
    int64_t tab_s;
    int bshift; /* log2 of the block size */
    const uint8_t *mask; /* (B, T, S) at strides (m_sb, m_st): nonzero = attend */
    int64_t m_sb, m_st;
    void *out; /* (B, T, H, D) contiguous */
    int64_t T, H, G, D, S;
    float scale;
    int bf16, kv_bf16; /* activations (q, new k/v, tables, out) and cache dtypes */
} attn_t;

/* Rotary embedding of one head vector, rounded exactly as PyTorch's elementwise ops round
 * `x * cos + rotate_half(x) * sin` in the activation dtype: each product, then the sum. In fp32
 * the products go through volatile locals, the portable way to stop the compiler from fusing one
 * of them into the add (-ffp-contract=fast would, and round once instead of twice); bf16 operands
 * multiply exactly in float and each result is rounded to bf16 as PyTorch's bf16 ops do. */
static void rope_head(const void *x, int64_t base, const void *cos, const void *sin, int64_t tbase,
                      int64_t D, int bf16, float *dst) {
    int64_t half = D / 2;
    for (int64_t d = 0; d < D; d++) {
        float xv = load1(x, base + d, bf16);
        if (cos == NULL) {
            dst[d] = xv;
            continue;
        }
        float rot = d < half ? -load1(x, base + d + half, bf16) : load1(x, base + d - half, bf16);
        float c = load1(cos, tbase + d, bf16), s = load1(sin, tbase + d, bf16);
        if (bf16) {
            float a = bf16_to_f32(f32_to_bf16(xv * c)), b = bf16_to_f32(f32_to_bf16(rot * s));
            dst[d] = bf16_to_f32(f32_to_bf16(a + b));
        } else {
            volatile float a = xv * c, b = rot * s;
            dst[d] = a + b;
        }
    }
}

static void store_row(void *cache, int64_t off, const float *src, int64_t D, int bf16) {
    for (int64_t d = 0; d < D; d++) {
        if (bf16)
            ((uint16_t *)cache)[off + d] = f32_to_bf16(src[d]);
        else
            ((float *)cache)[off + d] = src[d];
    }
}

/* Element offset of slot s of one cache row and KV head: ``base`` + the slot's place in the row
 * (contiguous, trow NULL) or in its block (paged: block trow[s / block size]). */
HX_INLINE int64_t slot_at(const attn_t *a, const int64_t *trow, int64_t base, int64_t s) {
    if (trow == NULL) return base + s * a->c_ss;
    return base + trow[s >> a->bshift] * a->c_sb + (s & ((INT64_C(1) << a->bshift) - 1)) * a->c_ss;
}

/* Slots from s0 (the start of a block when paged) that lie contiguously in memory: the rest of
 * the row (contiguous cache), or the run of consecutive pool blocks starting at s0's block, so a
 * row whose blocks were handed out in order is read as one stream and the table once per run. */
HX_INLINE int64_t run_from(const attn_t *a, const int64_t *trow, int64_t s0) {
    if (trow == NULL) return a->S - s0;
    if (a->c_sb != a->c_ss << a->bshift) return INT64_C(1) << a->bshift; /* blocks not adjacent */
    int64_t i = s0 >> a->bshift, n = (a->S + (INT64_C(1) << a->bshift) - 1) >> a->bshift, j = i + 1;
    while (j < n && trow[j] == trow[j - 1] + 1) j++;
    return ((j - i) << a->bshift);
}

/* scores -> probabilities in place (masked and padding lanes exactly 0) */
static void softmax_row(float *row, int64_t S, int64_t sp, float max) {
    for (int64_t s = S; s < sp; s++) row[s] = -INFINITY; /* vector padding */
    v16 total = {0};
    for (int64_t s = 0; s < sp; s += VL) {
        v16 x = *(v16u *)(row + s) - max;
        i16v live = x >= EXP_FLOOR;
        x = (v16)((i16v)x & live); /* dead lanes: exp(0), zeroed below */
        v16 p = (v16)((i16v)vexp(x) & live);
        *(v16u *)(row + s) = p;
        total += p;
    }
    float sum = hsum(total), inv = sum > 0 ? 1.0f / sum : 0.0f;
    for (int64_t s = 0; s < sp; s += VL) *(v16u *)(row + s) *= inv;
}

/* Attention of the group's query heads (pre-rotated, pre-scaled in qw) at query t of row b over
 * the cache, the head dim as NV 16-float vectors (NV a compile-time constant at each call site,
 * so key and value rows live in registers) and the cache dtype fixed; NV == 0 is the scalar path
 * for any head dim. The result goes to out. */
HX_INLINE void attend(const attn_t *a, int64_t b, int64_t t, const float *qw, const int64_t *trow,
                      int64_t base, float *acc, float *scores, int64_t rep, float *out,
                      const int NV, const int kv_bf16) {
    const int64_t D = NV ? NV * VL : a->D, S = a->S, sp = (S + VL - 1) / VL * VL;
    const int64_t es = kv_bf16 ? 2 : 4;
    const char *kbase = (const char *)a->k, *vbase = (const char *)a->v;
    const uint8_t *m = a->mask + b * a->m_sb + t * a->m_st;
    float maxes[64];
    for (int64_t j = 0; j < rep; j++) maxes[j] = -INFINITY;
    /* the slots are walked in runs that lie contiguously in memory (run_from) */
    const int64_t ss = a->c_ss * es;
    for (int64_t s0 = 0, span; s0 < S; s0 += span) { /* pass 1: scores */
    span = run_from(a, trow, s0);
    const char *kblk = kbase + slot_at(a, trow, base, s0) * es;
    for (int64_t s = s0, end = s0 + span < S ? s0 + span : S; s < end; s++) {
        if (!m[s]) {
            for (int64_t j = 0; j < rep; j++) scores[j * sp + s] = -INFINITY;
            continue;
        }
        const char *krow = kblk + (s - s0) * ss;
        v16 kv[NV ? NV : 1];
        for (int c = 0; c < NV; c++) kv[c] = load16(krow, c * VL, kv_bf16);
        for (int64_t j = 0; j < rep; j++) {
            float dot = 0;
            if (NV) {
                v16 sum = {0};
                for (int c = 0; c < NV; c++) sum += *(const v16u *)(qw + j * D + c * VL) * kv[c];
                dot = hsum(sum);
            } else {
                for (int64_t d = 0; d < D; d++) dot += qw[j * D + d] * load1(krow, d, kv_bf16);
            }
            scores[j * sp + s] = dot;
            maxes[j] = dot > maxes[j] ? dot : maxes[j];
        }
    }
    }
    for (int64_t j = 0; j < rep; j++) softmax_row(scores + j * sp, S, sp, maxes[j]);
    memset(acc, 0, (size_t)(rep * D) * sizeof *acc);
    for (int64_t s0 = 0, span; s0 < S; s0 += span) { /* pass 2: probability-weighted values */
    span = run_from(a, trow, s0);
    const char *vblk = vbase + slot_at(a, trow, base, s0) * es;
    for (int64_t s = s0, end = s0 + span < S ? s0 + span : S; s < end; s++) {
        if (!m[s]) continue;
        const char *vrow = vblk + (s - s0) * ss;
        if (NV) {
            v16 vv[NV ? NV : 1];
            for (int c = 0; c < NV; c++) vv[c] = load16(vrow, c * VL, kv_bf16);
            for (int64_t j = 0; j < rep; j++) {
                float p = scores[j * sp + s];
                for (int c = 0; c < NV; c++) *(v16u *)(acc + j * D + c * VL) += p * vv[c];
            }
        } else {
            for (int64_t j = 0; j < rep; j++)
                for (int64_t d = 0; d < D; d++) acc[j * D + d] += scores[j * sp + s] * load1(vrow, d, kv_bf16);
        }
    }
    }
    memcpy(out, acc, (size_t)(rep * D) * sizeof *out);
}

/* One (row b, KV head g) item: rotate and store its T new keys/values, then attend for each t.
 * scratch holds rep * (3 * D + sp) floats, sp = S rounded up to 16. */
static void attend_item(const attn_t *a, int64_t b, int64_t g, float *scratch) {
    const int64_t D = a->D, rep = a->H / a->G;
    float *qw = scratch, *acc = qw + rep * D, *res = acc + rep * D, *scores = res + rep * D;
    int64_t row = a->rows ? a->rows[b] : b;
    const int64_t *trow = a->tab ? a->tab + row * a->tab_s : NULL;
    int64_t off = (trow ? 0 : row * a->c_sb) + g * a->c_sh;
    for (int64_t t = 0; t < a->T; t++) {
        int64_t slot = slot_at(a, trow, off, a->slots[b * a->T + t]), src = b * a->n_sb + t * a->n_st + g * a->n_sh;
        rope_head(a->k_new, src, a->cos, a->sin, (b * a->T + t) * D, D, a->bf16, res);
        store_row(a->k, slot, res, D, a->kv_bf16);
        for (int64_t d = 0; d < D; d++) res[d] = load1(a->v_new, src + d, a->bf16);
        store_row(a->v, slot, res, D, a->kv_bf16);
    }
    for (int64_t t = 0; t < a->T; t++) {
        for (int64_t j = 0; j < rep; j++) {
            rope_head(a->q, b * a->q_sb + t * a->q_st + (g * rep + j) * a->q_sh, a->cos, a->sin,
                      (b * a->T + t) * D, D, a->bf16, qw + j * D);
            for (int64_t d = 0; d < D; d++) qw[j * D + d] *= a->scale;
        }
#define HX_ATTEND(nv)                                                                              \
    (a->kv_bf16 ? attend(a, b, t, qw, trow, off, acc, scores, rep, res, nv, 1)                     \
                : attend(a, b, t, qw, trow, off, acc, scores, rep, res, nv, 0))
        switch (D) { /* the head dims of the Carbon family (64, 96, 128) and 16/32/256 */
        case 16: HX_ATTEND(1); break;
        case 32: HX_ATTEND(2); break;
        case 64: HX_ATTEND(4); break;
        case 96: HX_ATTEND(6); break;
        case 128: HX_ATTEND(8); break;
        case 256: HX_ATTEND(16); break;
        default: HX_ATTEND(0); break;
        }
#undef HX_ATTEND
        int64_t o = ((b * a->T + t) * a->H + g * rep) * D;
        store_row(a->out, o, res, rep * D, a->bf16);
    }
}

/* The attention of a decode-shaped forward (a few new tokens per row) for one layer:
 *   1. rotate the new keys (k_new, (B, T, G, D)) with the rotary tables and write them, and the new
 *      values, into the cache at slots[b, t] of cache row rows[b] (paged, tab not NULL: slot s of
 *      row r lives in pool block tab[r * tab_s + s / 2^bshift] at offset s mod 2^bshift);
 *   2. out[b, t] (B, T, H, D) = softmax(scale * rope(q) k^T, masked) v over the first S slots.
 * Activations (q, k_new, v_new, cos, sin, out) are all float32 or all bfloat16 (bf16); the cache
 * is float32 or bfloat16 (kv_bf16). The mask must cover the new tokens' own slots (causality is
 * the mask's business). Returns 0, -1 when out of memory, -2 for head counts it does not take
 * (H not a multiple of G, or more than 64 query heads per KV head). */
int hx_decode_attention(const void *q, int64_t q_sb, int64_t q_st, int64_t q_sh, const void *k_new,
                        const void *v_new, int64_t n_sb, int64_t n_st, int64_t n_sh,
                        const void *cos, const void *sin, const int64_t *slots, int bf16, void *k,
                        void *v, int64_t c_sb, int64_t c_sh, int64_t c_ss, int kv_bf16,
                        const int64_t *rows, const int64_t *tab, int64_t tab_s, int bshift,
                        const uint8_t *mask, int64_t m_sb, int64_t m_st,
                        void *out, int64_t B, int64_t T, int64_t H, int64_t G, int64_t D, int64_t S,
                        float scale, int threads) {
    if (G <= 0 || H % G != 0 || H / G > 64) return -2;
    attn_t a = {q,    k_new, v_new, q_sb, q_st, q_sh, n_sb, n_st, n_sh, cos,   sin,
                slots, k,    v,     c_sb, c_sh, c_ss, rows, tab,  tab_s, bshift, mask,
                m_sb, m_st,  out,   T,    H,    G,    D,    S,    scale, bf16,  kv_bf16};
    int64_t rep = H / G, sp = (S + VL - 1) / VL * VL, items = B * G;
    size_t scratch_bytes = ((size_t)(rep * (3 * D + sp)) * sizeof(float) + 63) / 64 * 64;
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1 && items > 1)
    {
        float *scratch = aligned_alloc(64, scratch_bytes);
        if (scratch == NULL) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < items; i++)
            if (scratch != NULL) attend_item(&a, i / G, i % G, scratch);
        free(scratch);
    }
    return failed ? -1 : 0;
}
