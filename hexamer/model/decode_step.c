/* A whole int4 decode step (one new token per sequence, up to 8 sequences) through every decoder
 * layer in one call and one OpenMP parallel region.
 *
 * Why: at batch 1 a 500M-shape layer is about 10 Python-level calls (norms, q/k/v, attention, o,
 * residual adds, SwiGLU, down), each with its own thread-team start: 141 parallel regions and
 * about 280 calls per step, a few microseconds to tens of microseconds each, against a few
 * milliseconds of weight streaming. Here the thread team is started once per step and its
 * threads meet at a barrier between the phases of a layer (5 per layer):
 *
 *   every thread: RMSNorm of x, rounded to int8 (each thread its own copy: no barrier)
 *   q/k/v projections, panels split over threads                                  | barrier
 *   RoPE + cache write + attention (decode_attention.c), (row, KV head) items     | barrier
 *   every thread: the attention output rounded to int8; o projection + residual   | barrier
 *   every thread: RMSNorm, int8; SwiGLU gate/up (lowbit_gemm.c's pairing)         | barrier
 *   every thread: the SwiGLU output rounded to int8; down projection + residual   | barrier
 *
 * The arithmetic is that of the separate kernels, call for call (the same per-panel code, the
 * same rounding of the activations, the same attention item): the step's numbers are the
 * per-module path's, bit for bit. Activations and norms are float32; the KV cache is the paged
 * pool of hexamer.model.KVCache (float32 or bfloat16).
 *
 * Built as its own library from this file, which includes the kernels' sources (so their static
 * helpers are shared without exporting them).
 */
#include "lowbit_gemm.c"
#include "decode_attention.c"
#include "rms_norm.c"

#define STEP_ABI 1
#define STEP_MAX_ROWS QMR

int hx_step_abi_version(void) { return STEP_ABI; }

/* Pointers of one layer, in the order of the int64 table the caller passes per layer. */
enum {
    L_QP, L_QS, L_KP, L_KS, L_VP, L_VS, L_OP, L_OS, L_GP, L_GS, L_UP, L_US, L_DP, L_DS, L_N1, L_N2,
    L_FIELDS
};

/* The per-step shape and cache arguments (one struct: fewer arguments through ctypes). */
typedef struct {
    int64_t M, hidden, ffn, heads, kv_heads, head_dim, S;
    float eps, scale;
    const float *cos, *sin;                /* (M, D) rotary tables */
    const int64_t *slots, *rows;           /* (M,) cache slot of each new token; cache rows or NULL */
    const int64_t *tab;                    /* block table (cache rows, tab_s) */
    int64_t tab_s, bshift;                 /* its row stride, log2 of the block size */
    int64_t c_sb, c_sh, c_ss, kv_bf16;     /* pool strides (block, head, slot), pool dtype */
    const uint8_t *mask;                   /* (M, 1, 1, S) bool at strides m_sb */
    int64_t m_sb, m_st;
} step_t;

/* RMSNorm of rows, as hx_rms_norm rounds in float32 */
static void norm_rows(const float *x, const float *w, float *out, int64_t M, int64_t N, float eps) {
    for (int64_t m = 0; m < M; m++) {
        const float *row = x + m * N;
        float r = 1.0f / sqrtf(sum_of_squares(row, N, 0) / (float)N + eps);
        for (int64_t i = 0; i < N; i++) out[m * N + i] = w[i] * (row[i] * r);
    }
}

typedef struct {
    int8_t *xq;
    float *xs;
    int32_t *gsum;
} qrows_t;

static void quantize_private(const float *x, int64_t M, int64_t K, const qrows_t *q) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    for (int64_t m = 0; m < M; m++) quantize_row(x + m * K, K, Kp, q->xq + m * Kp, q->xs + m * Kg, q->gsum + m * Kg, 0);
}

/* Y[:, off_j + n] (= or +=) X @ W_j^T over every panel of up to 3 weights, panels shared out over
 * the team (an orphaned `omp for`: its barrier ends the phase). */
static void project(const w4_weight_t *w, int count, const qrows_t *q, int64_t M, int64_t K, float *y,
                    int64_t ldy, int add) {
    int64_t Kp = padded_k(K), Kg = Kp / G4, first[4] = {0}, off[4] = {0};
    for (int j = 0; j < count; j++) {
        first[j + 1] = first[j] + (w[j].N + QP - 1) / QP;
        off[j + 1] = off[j] + w[j].N;
    }
#pragma omp for schedule(static)
    for (int64_t pb = 0; pb < first[count]; pb++) {
        int j = 0;
        while (pb >= first[j + 1]) j++;
        int64_t b = pb - first[j], n0 = b * QP, N = w[j].N, cols = N - n0 < QP ? N - n0 : QP;
        float t[QMR * QP];
        const uint8_t *panel = w[j].panels + b * Kp * QP / 2;
        const uint16_t *ps = w[j].ps + b * Kg * QP;
#define W4(R) w4_block(panel, ps, q->xq, q->gsum, q->xs, t, QP, Kp, QP, R)
        ROWS_SWITCH(M, W4)
#undef W4
        for (int64_t i = 0; i < M; i++) {
            float *yr = y + i * ldy + off[j] + n0;
            for (int64_t c = 0; c < cols; c++) yr[c] = add ? yr[c] + t[i * QP + c] : t[i * QP + c];
        }
    }
}

/* silu(X @ G^T) * (X @ U^T) into h [M, F], a gate panel and its up panel per item */
static void swiglu(const int64_t *lw, const qrows_t *q, int64_t M, int64_t K, int64_t F, float *h) {
    int64_t Kp = padded_k(K), Kg = Kp / G4;
    const uint8_t *gp = (const uint8_t *)lw[L_GP], *up = (const uint8_t *)lw[L_UP];
    const uint16_t *gs = (const uint16_t *)lw[L_GS], *us = (const uint16_t *)lw[L_US];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < (F + QP - 1) / QP; b++) {
        int64_t n0 = b * QP, cols = F - n0 < QP ? F - n0 : QP;
        float g[QMR * QP], u[QMR * QP];
#define SW(R)                                                                                      \
    w4_block(gp + b * Kp * QP / 2, gs + b * Kg * QP, q->xq, q->gsum, q->xs, g, QP, Kp, QP, R);    \
    w4_block(up + b * Kp * QP / 2, us + b * Kg * QP, q->xq, q->gsum, q->xs, u, QP, Kp, QP, R);
        ROWS_SWITCH(M, SW)
#undef SW
        for (int64_t i = 0; i < M; i++)
            for (int64_t c = 0; c < cols; c++) h[i * F + n0 + c] = silu_f(g[i * QP + c]) * u[i * QP + c];
    }
}

/* One layer, run by every thread of the team. */
static void layer_step(const step_t *st, const int64_t *lw, void *kc, void *vc, float *x, float *qkv,
                       float *att, float *h, float *xn, const qrows_t *q, float *scratch) {
    const int64_t M = st->M, H = st->hidden, D = st->head_dim, nq = st->heads * D, nkv = st->kv_heads * D;
    const int64_t ld = nq + 2 * nkv;
    norm_rows(x, (const float *)lw[L_N1], xn, M, H, st->eps);
    quantize_private(xn, M, H, q);
    w4_weight_t qkvw[3] = {{(const uint8_t *)lw[L_QP], (const uint16_t *)lw[L_QS], nq},
                           {(const uint8_t *)lw[L_KP], (const uint16_t *)lw[L_KS], nkv},
                           {(const uint8_t *)lw[L_VP], (const uint16_t *)lw[L_VS], nkv}};
    project(qkvw, 3, q, M, H, qkv, ld, 0);
    attn_t a = {.q = qkv, .k_new = qkv + nq, .v_new = qkv + nq + nkv, .q_sb = ld, .q_st = ld, .q_sh = D,
                .n_sb = ld, .n_st = ld, .n_sh = D, .cos = st->cos, .sin = st->sin, .slots = st->slots,
                .k = kc, .v = vc, .c_sb = st->c_sb, .c_sh = st->c_sh, .c_ss = st->c_ss, .rows = st->rows,
                .tab = st->tab, .tab_s = st->tab_s, .bshift = (int)st->bshift, .mask = st->mask,
                .m_sb = st->m_sb, .m_st = st->m_st, .out = att, .T = 1, .H = st->heads, .G = st->kv_heads,
                .D = D, .S = st->S, .scale = st->scale, .bf16 = 0, .kv_bf16 = (int)st->kv_bf16};
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M * st->kv_heads; i++) attend_item(&a, i / st->kv_heads, i % st->kv_heads, scratch);
    quantize_private(att, M, nq, q);
    w4_weight_t ow = {(const uint8_t *)lw[L_OP], (const uint16_t *)lw[L_OS], H};
    project(&ow, 1, q, M, nq, x, H, 1);
    norm_rows(x, (const float *)lw[L_N2], xn, M, H, st->eps);
    quantize_private(xn, M, H, q);
    swiglu(lw, q, M, H, st->ffn, h);
    quantize_private(h, M, st->ffn, q);
    w4_weight_t dw = {(const uint8_t *)lw[L_DP], (const uint16_t *)lw[L_DS], H};
    project(&dw, 1, q, M, st->ffn, x, H, 1);
}

/* x [M, hidden] float32 through `layers` decoder layers in place; `weights` [layers][L_FIELDS]
 * pointers, `caches` [layers][2] (keys, values) pool pointers. 0, -1 when out of memory, -2 for a
 * shape it does not take (more than 8 rows, heads not a multiple of KV heads). */
int hx_int4_decode_step(const int64_t *weights, const int64_t *caches, int64_t layers, float *x,
                        const step_t *st, int threads) {
    const int64_t M = st->M, D = st->head_dim, nq = st->heads * D, nkv = st->kv_heads * D;
    if (M < 1 || M > STEP_MAX_ROWS || st->kv_heads <= 0 || st->heads % st->kv_heads || st->heads / st->kv_heads > 64)
        return -2;
    int64_t kmax = st->hidden > nq ? st->hidden : nq;
    kmax = kmax > st->ffn ? kmax : st->ffn;
    int64_t kp = padded_k(kmax), rep = st->heads / st->kv_heads, sp = (st->S + VL - 1) / VL * VL;
    size_t shared = (size_t)(M * (nq + 2 * nkv) + M * nq + M * st->ffn) * sizeof(float);
    size_t own = ((size_t)(M * st->hidden) * sizeof(float) + (size_t)(M * kp) +
                  (size_t)(M * kp / G4) * (sizeof(float) + sizeof(int32_t)) +
                  (size_t)(rep * (3 * D + sp)) * sizeof(float) + 4 * 64 + 63) / 64 * 64;
    float *buf = malloc(shared);
    if (buf == NULL) return -1;
    float *qkv = buf, *att = qkv + M * (nq + 2 * nkv), *h = att + M * nq;
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        char *mine = aligned_alloc(64, own);
#pragma omp atomic update
        failed += mine == NULL;
#pragma omp barrier
        if (!failed) {
            float *scratch = (float *)mine; /* attention scratch first: 64-byte aligned */
            char *p = mine + ((size_t)(rep * (3 * D + sp)) * sizeof(float) + 63) / 64 * 64;
            float *xn = (float *)p;
            p += ((size_t)(M * st->hidden) * sizeof(float) + 63) / 64 * 64;
            qrows_t q = {.xs = (float *)p};
            p += ((size_t)(M * kp / G4) * sizeof(float) + 63) / 64 * 64;
            q.gsum = (int32_t *)p;
            p += ((size_t)(M * kp / G4) * sizeof(int32_t) + 63) / 64 * 64;
            q.xq = (int8_t *)p;
            for (int64_t l = 0; l < layers; l++)
                layer_step(st, weights + l * L_FIELDS, (void *)caches[2 * l], (void *)caches[2 * l + 1], x, qkv,
                           att, h, xn, &q, scratch);
        }
        free(mine);
    }
    free(buf);
    return failed ? -1 : 0;
}
