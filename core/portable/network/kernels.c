// The compiled kernels under core.ops: the matrix products and activations NumPy runs slowly where it
// has no BLAS and no SIMD (Pyodide). Built to WebAssembly SIMD by scripts/build_kernels.py, and with
// the same source natively (GCC/Clang vector extensions; the compiler picks the vector instructions).
//
// The WebAssembly module runs inside Pyodide's own memory: it imports that memory, and every pointer
// is a NumPy array's data pointer handed over by core/portable/network/kernels.py, which checks dtype, contiguity,
// shapes and writability before each call. So the code must not own any memory: no globals, no
// static data, no local arrays or address-taken locals (they would need a shadow stack at a fixed
// address inside Pyodide's heap), no libc. The build fails if the module has globals or data.
//
// Two WebAssembly builds come from this file: WebAssembly SIMD (every browser with SIMD), and relaxed
// SIMD (-mrelaxed-simd, __wasm_relaxed_simd__), where the products' multiply-adds are fused (MADD).
//
// All arrays are C-contiguous float32 unless named otherwise; `bias` may be 0 (none).
#include <stdint.h>
#if defined(__SSE2__) && !defined(__wasm__)
#include <immintrin.h>
#endif

#if defined(__wasm__)
#include <wasm_simd128.h>
#define EXPORT(name) __attribute__((export_name(#name)))
#define LANES 4
#elif defined(__AVX512F__)
// AVX-512's whole registers: the decoder's convolutions 1.2-1.4x faster than with 8 lanes (one
// thread), the sums across lanes of the products of a few float rows ~10% slower.
#define EXPORT(name) __attribute__((visibility("default")))
#define LANES 16
#else
#define EXPORT(name) __attribute__((visibility("default")))
#define LANES 8
#endif

// Vectors of LANES floats, loaded and stored at any 4-byte alignment.
typedef float vf __attribute__((vector_size(LANES * 4), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(LANES * 4), aligned(4), may_alias));
typedef double vd __attribute__((vector_size(LANES * 8)));

#define LOAD(p) (*(const vf *)(p))
#define STORE(p, v) (*(vf *)(p) = (v))

#if defined(__wasm__)
static inline vf splat(float x) { return (vf){0} + x; }
#else
// x - 0 is x for every x (-0 included), so the compiler broadcasts x alone, where x + 0 kept a
// scalar add before every broadcast.
static inline vf splat(float x) { return x - (vf){0}; }
#endif

// a + b * c. With relaxed SIMD one f32x4.relaxed_madd, which the engine runs fused (one rounding)
// where the processor has fused multiply-add and as a multiply then an add elsewhere: so the last
// bits of a product may differ between machines (browser/kernel_check.py's bound covers both).
#if defined(__wasm_relaxed_simd__)
#define MADD(a, b, c) ((vf)wasm_f32x4_relaxed_madd((v128_t)(b), (v128_t)(c), (v128_t)(a)))
#else
#define MADD(a, b, c) ((a) + (b) * (c))
#endif

// Lanes of a where mask (a comparison's result) is set, else of b.
static inline vf blend(vi mask, vf a, vf b) { return (vf)(((vi)a & mask) | ((vi)b & ~mask)); }

// The sum of the lanes (constant lane indices: a variable index would put the vector in memory).
static inline float hsum(vf v) {
#if LANES == 4
  return (v[0] + v[1]) + (v[2] + v[3]);
#elif LANES == 16
  return (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))) +
         (((v[8] + v[9]) + (v[10] + v[11])) + ((v[12] + v[13]) + (v[14] + v[15])));
#else
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
#endif
}

// Natively, flush-to-zero and denormals-are-zero for the length of a call: a denormal (a decaying
// activation, a quiet stretch of a voice) takes the processor's slow path on every operation it
// enters, and halved the int8 kernel's speed. Results change only where a value is below 1.2e-38.
// The caller's mode comes back before the call returns, so NumPy around the kernels keeps IEEE's.
// WebAssembly has no such mode (its engines keep denormals).
#if defined(__SSE2__) && !defined(__wasm__)
#define FLUSH_DENORMALS()                 \
  unsigned int mode_ = _mm_getcsr();      \
  _mm_setcsr(mode_ | 0x8040);             \
  __asm__ volatile("" ::: "memory")
#define RESTORE_DENORMALS()               \
  do {                                    \
    __asm__ volatile("" ::: "memory");    \
    _mm_setcsr(mode_);                    \
  } while (0)
#elif defined(__aarch64__)
#define FLUSH_DENORMALS()                                                   \
  uint64_t mode_;                                                           \
  __asm__ volatile("mrs %0, fpcr" : "=r"(mode_)::"memory");                 \
  __asm__ volatile("msr fpcr, %0" ::"r"(mode_ | (1ull << 24)) : "memory")
#define RESTORE_DENORMALS() __asm__ volatile("msr fpcr, %0" ::"r"(mode_) : "memory")
#else
#define FLUSH_DENORMALS() (void)0
#define RESTORE_DENORMALS() (void)0
#endif

// ---------------------------------------------------------------------------------------------
// Linear layers: Y[M, N] = X[M, K] @ W[N, K]^T + bias[N], the weight stored as nn.Linear stores it.

// Rows of X per pass over W: a block of X (40 KB at K = 512) stays in cache while W streams by.
#define ROW_BLOCK 16

// y[0..4) = the sums s0..s3 of four rows of W (w0, stride K) with x, plus the columns k >= kv.
static inline void row_tail(const float *x, const float *w0, int K, int kv, float *y, float s0, float s1, float s2,
                            float s3) {
  const float *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
  for (int k = kv; k < K; k++) {
    s0 += x[k] * w0[k]; s1 += x[k] * w1[k]; s2 += x[k] * w2[k]; s3 += x[k] * w3[k];
  }
  y[0] = s0; y[1] = s1; y[2] = s2; y[3] = s3;
}

// Columns [0, 4) of Y (row stride N) for all M rows: four rows of W (w, stride K) against every
// row of X, two X rows at a time.
static void linear_4cols(const float *X, const float *w0, float *Y, int M, int N, int K) {
  const float *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
  int kv = K - K % LANES;
  int m = 0;
  for (; m + 2 <= M; m += 2) {
    const float *x0 = X + (long)m * K, *x1 = x0 + K;
    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
    for (int k = 0; k < kv; k += LANES) {
      vf u = LOAD(x0 + k), v = LOAD(x1 + k), w;
      w = LOAD(w0 + k); a0 = MADD(a0, u, w); b0 = MADD(b0, v, w);
      w = LOAD(w1 + k); a1 = MADD(a1, u, w); b1 = MADD(b1, v, w);
      w = LOAD(w2 + k); a2 = MADD(a2, u, w); b2 = MADD(b2, v, w);
      w = LOAD(w3 + k); a3 = MADD(a3, u, w); b3 = MADD(b3, v, w);
    }
    float *y = Y + (long)m * N;
    row_tail(x0, w0, K, kv, y, hsum(a0), hsum(a1), hsum(a2), hsum(a3));
    row_tail(x1, w0, K, kv, y + N, hsum(b0), hsum(b1), hsum(b2), hsum(b3));
  }
  if (m < M) {  // the last odd row (the matrix-vector case): k unrolled twice, 8 accumulators
    const float *x = X + (long)m * K;
    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
    int k = 0;
    for (; k + 2 * LANES <= kv; k += 2 * LANES) {
      vf u = LOAD(x + k), v = LOAD(x + k + LANES);
      a0 = MADD(a0, u, LOAD(w0 + k)); b0 = MADD(b0, v, LOAD(w0 + k + LANES));
      a1 = MADD(a1, u, LOAD(w1 + k)); b1 = MADD(b1, v, LOAD(w1 + k + LANES));
      a2 = MADD(a2, u, LOAD(w2 + k)); b2 = MADD(b2, v, LOAD(w2 + k + LANES));
      a3 = MADD(a3, u, LOAD(w3 + k)); b3 = MADD(b3, v, LOAD(w3 + k + LANES));
    }
    for (; k < kv; k += LANES) {
      vf u = LOAD(x + k);
      a0 = MADD(a0, u, LOAD(w0 + k)); a1 = MADD(a1, u, LOAD(w1 + k));
      a2 = MADD(a2, u, LOAD(w2 + k)); a3 = MADD(a3, u, LOAD(w3 + k));
    }
    row_tail(x, w0, K, kv, Y + (long)m * N, hsum(a0 + b0), hsum(a1 + b1), hsum(a2 + b2), hsum(a3 + b3));
  }
}

static float dot(const float *x, const float *w, int K) {
  vf a = {0};
  int k = 0;
  for (; k + LANES <= K; k += LANES) a = MADD(a, LOAD(x + k), LOAD(w + k));
  float s = hsum(a);
  for (; k < K; k++) s += x[k] * w[k];
  return s;
}

// `count` columns of Y (row stride N) for all M rows, from `count` rows of W starting at W.
static void linear_cols(const float *X, const float *W, float *Y, int M, int N, int K, int count) {
  int n = 0;
  for (; n + 4 <= count; n += 4) linear_4cols(X, W + (long)n * K, Y + n, M, N, K);
  for (; n < count; n++)
    for (int m = 0; m < M; m++) Y[(long)m * N + n] = dot(X + (long)m * K, W + (long)n * K, K);
}

static void add_bias(float *Y, const float *bias, int M, int N) {
  if (!bias) return;
  for (int m = 0; m < M; m++) {
    float *y = Y + (long)m * N;
    int n = 0;
    for (; n + LANES <= N; n += LANES) STORE(y + n, LOAD(y + n) + LOAD(bias + n));
    for (; n < N; n++) y[n] += bias[n];
  }
}

EXPORT(pk_linear_f32)
void pk_linear_f32(const float *X, const float *W, const float *bias, float *Y, int M, int N, int K) {
  FLUSH_DENORMALS();
  for (int m = 0; m < M; m += ROW_BLOCK) {
    int rows = M - m < ROW_BLOCK ? M - m : ROW_BLOCK;
    linear_cols(X + (long)m * K, W, Y + (long)m * N, rows, N, K, N);
  }
  add_bias(Y, bias, M, N);
  RESTORE_DENORMALS();
}

// ---------------------------------------------------------------------------------------------
// int8 weights times int8 activations: Y[M, N] = X[M, K] @ W[N, K]^T + bias[N], where
// W[n, k] = Q[n, k] * S[n, k / G] (int8 values, a float32 scale per group of G consecutive columns).
//
// Each row x of X is quantized on the fly in two 7-bit parts, so that the products are int8 x int8
// dot products (no widening of int8 to float) while the activations keep about 14 bits:
//   lo = min(0, min x), hi = max(0, max x), scale = (hi - lo) / 125 (1 where that is not > 1e-30),
//   inv = 1 / scale, zero = rint(-lo * inv) + 1; for each k, v = x[k] * inv, r = rint(v):
//   u[k] = clamp(r + zero, 0, 127), f[k] = rint((v - r) * 126) + 63 (0..126),
// so x[k] ~ scale * (u[k] - zero + (f[k] - 63) / 126), within scale / 252. (125 levels and the
// zero point's + 1 keep r + zero inside 0..127 whatever the rounding at the ends.) Then
//   Y[m, n] = scale / 126 * sum over g of S[n, g] * V[g] + bias[n], where
//   V[g] = 126 (U - zero * sums) + (F - 63 * sums) = sum over the group of Q[n, k] a[k],
//   a[k] = 126 (u[k] - zero) + f[k] - 63 (|a| <= 16065: an int16),
// with U = u . Q[n, group g], F = f . Q[n, group g] and sums[n, g] the group's sum of Q (pk_i8_sums).
// U and F are exact int32 sums: 0..127 times -128..127 never overflows the 16-bit pairwise sums
// that the relaxed dot product and x86's pmaddubsw make. V is exact as a double and rounded to
// float32 once (i8_value), so that every way of making it gives the same float: the two parts'
// sums, or AVX2's 16-bit blocks, which multiply a itself (one pmaddwd where the parts took four
// instructions). Only the float32 scaling after it rounds.
// One relaxed dot product per 16 weights and part, where widening int8 to float took 10 operations.

#if defined(__wasm__)
#define I8_SUM(acc) \
  (wasm_i32x4_extract_lane(acc, 0) + wasm_i32x4_extract_lane(acc, 1) + wasm_i32x4_extract_lane(acc, 2) + wasm_i32x4_extract_lane(acc, 3))
#endif
#if defined(__wasm_relaxed_simd__)
#define I8_CHUNK 16
typedef v128_t iacc;
#define I8_WEIGHTS(q) v128_t w_ = wasm_v128_load(q)
#define I8_DOT(acc, u) (acc = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(w_, wasm_v128_load(u), acc))
#elif defined(__wasm__)
// Without relaxed SIMD: both sides widened to 16 bits, then i32x4.dot_i16x8 (still exact).
#define I8_CHUNK 16
typedef v128_t iacc;
#define I8_WEIGHTS(q) \
  v128_t b_ = wasm_v128_load(q), wl_ = wasm_i16x8_extend_low_i8x16(b_), wh_ = wasm_i16x8_extend_high_i8x16(b_)
#define I8_DOT(acc, u)                                                                                        \
  do {                                                                                                        \
    v128_t a_ = wasm_v128_load(u);                                                                            \
    acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_dot_i16x8(wl_, wasm_u16x8_extend_low_u8x16(a_)),     \
                                             wasm_i32x4_dot_i16x8(wh_, wasm_u16x8_extend_high_u8x16(a_)))); \
  } while (0)
#elif defined(__AVX512VNNI__)
// AVX-512 VNNI: one vpdpbusd per 64 weights and part (unsigned by signed bytes, summed into int32:
// no 16-bit pairwise sum at all), where AVX2 takes three instructions per 32.
#define I8_CHUNK 64
typedef __m512i iacc;
#define I8_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define I8_DOTW(acc, a, w) (acc = _mm512_dpbusd_epi32(acc, a, w))
#define I8_SUM(acc) _mm512_reduce_add_epi32(acc)
#elif defined(__AVX2__)
#define I8_CHUNK 32
typedef __m256i iacc;
#define I8_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#if defined(__AVXVNNI__)
// AVX-VNNI (Intel's cores from Alder Lake on, where AVX-512 is off; AMD's from Zen 5): AVX-512
// VNNI's vpdpbusd on 256-bit registers.
#define I8_DOTW(acc, a, w) (acc = _mm256_dpbusd_avx_epi32(acc, a, w))
#else
#define I8_DOTW(acc, a, w) (acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), _mm256_set1_epi16(1))))
#endif
static inline int I8_SUM(__m256i acc) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}
#endif
#if defined(__aarch64__) && !defined(__wasm__)
// aarch64 (NEON): chunks of 16 bytes, held as int32x4_t (iacc holds weights and parts alike). A
// part's bytes (0..127) read as signed are the same values, so its products are int8 by int8.
// With dotprod one sdot per 16 weights and part (four 4-term sums into int32, exact); without,
// two widening multiplies, each 16-bit lane the sum of two products (|.| <= 2 x 127 x 128 <
// 32768), then a pairwise add into int32. GCC 12 and Clang 14 make no sdot of the plain loops.
#include <arm_neon.h>
#define I8_CHUNK 16
typedef int32x4_t iacc;
#define I8_LOAD(p) vreinterpretq_s32_s8(vld1q_s8((const int8_t *)(p)))
#if defined(__ARM_FEATURE_DOTPROD)
#define I8_DOTW(acc, a, w) (acc = vdotq_s32(acc, vreinterpretq_s8_s32(a), vreinterpretq_s8_s32(w)))
#else
static inline int32x4_t i8_dot_neon(int32x4_t acc, int32x4_t a, int32x4_t w) {
  int8x16_t x = vreinterpretq_s8_s32(a), y = vreinterpretq_s8_s32(w);
  return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(x), vget_low_s8(y)), x, y));
}
#define I8_DOTW(acc, a, w) (acc = i8_dot_neon(acc, a, w))
#endif
#define I8_SUM(acc) vaddvq_s32(acc)
#endif
// A group's V (above) from its two parts' sums, its zero point and its sum of Q, all as doubles
// (scalars, or vectors of a row per lane): every term is exact (|V| < 2^53 for any K that fits an
// int), so every path that rounds it to float32 once gets the same float.
#define I8_VALUE(whole, parts, zero, sum) (126.0 * ((whole) - (zero) * (sum)) + ((parts) - 63.0 * (sum)))

static inline float i8_value(int whole, int parts, int zero, int sum) {
  return (float)I8_VALUE((double)whole, (double)parts, (double)zero, (double)sum);
}

// Natively with a vector instruction set: a chunk loaded (I8_LOAD), and the products of a loaded
// chunk of a part with loaded weights added to an accumulator (I8_DOTW), of which the chunk-at-a-time
// forms above are made.
#if defined(I8_LOAD)
#define I8_WEIGHTS(q) iacc w_ = I8_LOAD(q)
#define I8_DOT(acc, u) I8_DOTW(acc, I8_LOAD(u), w_)
#elif !defined(__wasm__)
// Elsewhere natively: plain integer loops, which the compiler vectorizes as it can.
#define I8_CHUNK 16
typedef int32_t iacc;
#define I8_WEIGHTS(q) const int8_t *w_ = (q)
#define I8_DOT(acc, u)                                            \
  do {                                                            \
    const uint8_t *a_ = (u);                                      \
    for (int i_ = 0; i_ < I8_CHUNK; i_++) acc += a_[i_] * w_[i_]; \
  } while (0)
#define I8_SUM(acc) (acc)
#endif

// rint of each lane (to nearest, ties to even), where the instruction set has it: the quantization
// below runs a vector at a time there, and a value at a time elsewhere (the same results).
#if defined(__wasm__)
#define VRINT(v) ((vf)wasm_f32x4_nearest((v128_t)(v)))
#elif LANES == 16
#define VRINT(v) ((vf)_mm512_roundscale_ps((__m512)(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#elif defined(__AVX__)
#define VRINT(v) ((vf)_mm256_round_ps((__m256)(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#endif
#if defined(__aarch64__) && !defined(__wasm__)
// frintn on each 4 lanes of the vector (the compiler keeps v in registers).
static inline vf vrint_neon(vf v) {
  vf r;
  for (int i = 0; i < LANES; i += 4) vst1q_f32((float *)&r + i, vrndnq_f32(vld1q_f32((const float *)&v + i)));
  return r;
}
#define VRINT(v) vrint_neon(v)
#endif

// Bytes of a vector's lanes (integral values in 0..255), stored at any alignment.
typedef uint8_t vb __attribute__((vector_size(LANES), aligned(1), may_alias));

static inline float hmin(vf v) {
  float m = v[0];
  for (int i = 1; i < LANES; i++) m = v[i] < m ? v[i] : m;
  return m;
}

static inline float hmax(vf v) {
  float m = v[0];
  for (int i = 1; i < LANES; i++) m = v[i] > m ? v[i] : m;
  return m;
}

// Row x quantized into its two parts u and f, [0, K) each, as above; returns its scale and writes
// its zero point to *zero. The vector loops compute each value as the scalar ones do (the minimum
// and maximum are exact in any order), so the parts are the same either way.
static inline __attribute__((always_inline)) float quantize_row(const float *x, uint8_t *u, uint8_t *f,
                                                                uint8_t *zero, int K) {
  float lo = 0, hi = 0;
  int k = 0;
#if defined(VRINT)
  vf lows = {0}, highs = {0};
  for (; k + LANES <= K; k += LANES) {
    vf v = LOAD(x + k);
    lows = blend(v < lows, v, lows);
    highs = blend(v > highs, v, highs);
  }
  lo = hmin(lows), hi = hmax(highs);
#endif
  for (; k < K; k++) {
    lo = x[k] < lo ? x[k] : lo;
    hi = x[k] > hi ? x[k] : hi;
  }
  float scale = (hi - lo) / 125.0f;
  if (!(scale > 1e-30f)) scale = 1.0f;
  float inv = 1.0f / scale, z = __builtin_rintf(-lo * inv) + 1.0f;
  k = 0;
#if defined(VRINT)
  vf inverse = splat(inv), zero_point = splat(z);
  for (; k + LANES <= K; k += LANES) {
    vf v = LOAD(x + k) * inverse, r = VRINT(v), c = r + zero_point;
    c = blend(c > 0, c, splat(0));
    c = blend(c < 127, c, splat(127));
    vf fine = VRINT((v - r) * 126.0f) + 63.0f;
    *(vb *)(u + k) = __builtin_convertvector(__builtin_convertvector(c, vi), vb);
    *(vb *)(f + k) = __builtin_convertvector(__builtin_convertvector(fine, vi), vb);
  }
#endif
  for (; k < K; k++) {
    float v = x[k] * inv, r = __builtin_rintf(v), c = r + z;
    c = c > 0 ? c : 0;
    u[k] = (uint8_t)(c < 127 ? c : 127);
    f[k] = (uint8_t)(__builtin_rintf((v - r) * 126.0f) + 63.0f);
  }
  *zero = (uint8_t)z;
  return scale;
}

// R (1 to 4) quantized rows (parts U and F, row stride K) against the N rows of Q, into Y (row
// stride ldy): each chunk of weights is loaded once for all R rows, and each row's result is the
// same whatever R is.
static inline __attribute__((always_inline)) void linear_i8_rows(const uint8_t *U, const uint8_t *F, const int8_t *Q,
                                                                 const float *S, const int32_t *sums, float *Y, int R,
                                                                 int N, int ldy, int K, int G, float x0, float x1,
                                                                 float x2, float x3, int z0, int z1, int z2, int z3) {
  int groups = K / G;
  const uint8_t *u0 = U, *u1 = U + K, *u2 = U + 2 * K, *u3 = U + 3 * K;
  const uint8_t *f0 = F, *f1 = F + K, *f2 = F + 2 * K, *f3 = F + 3 * K;
  for (int n = 0; n < N; n++) {
    const int8_t *q = Q + (long)n * K;
    const float *s = S + (long)n * groups;
    const int32_t *sum = sums + (long)n * groups;
    float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    for (int g = 0; g < groups; g++) {
      int k = g * G, end = k + G;
      iacc a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
      for (; k + I8_CHUNK <= end; k += I8_CHUNK) {
        I8_WEIGHTS(q + k);
        I8_DOT(a0, u0 + k);
        I8_DOT(b0, f0 + k);
        if (R > 1) I8_DOT(a1, u1 + k);
        if (R > 1) I8_DOT(b1, f1 + k);
        if (R > 2) I8_DOT(a2, u2 + k);
        if (R > 2) I8_DOT(b2, f2 + k);
        if (R > 3) I8_DOT(a3, u3 + k);
        if (R > 3) I8_DOT(b3, f3 + k);
      }
      int c0 = I8_SUM(a0), c1 = R > 1 ? I8_SUM(a1) : 0, c2 = R > 2 ? I8_SUM(a2) : 0, c3 = R > 3 ? I8_SUM(a3) : 0;
      int d0 = I8_SUM(b0), d1 = R > 1 ? I8_SUM(b1) : 0, d2 = R > 2 ? I8_SUM(b2) : 0, d3 = R > 3 ? I8_SUM(b3) : 0;
      for (; k < end; k++) {
        c0 += u0[k] * q[k], d0 += f0[k] * q[k];
        if (R > 1) c1 += u1[k] * q[k], d1 += f1[k] * q[k];
        if (R > 2) c2 += u2[k] * q[k], d2 += f2[k] * q[k];
        if (R > 3) c3 += u3[k] * q[k], d3 += f3[k] * q[k];
      }
      t0 += s[g] * i8_value(c0, d0, z0, sum[g]);
      if (R > 1) t1 += s[g] * i8_value(c1, d1, z1, sum[g]);
      if (R > 2) t2 += s[g] * i8_value(c2, d2, z2, sum[g]);
      if (R > 3) t3 += s[g] * i8_value(c3, d3, z3, sum[g]);
    }
    Y[n] = x0 * t0;
    if (R > 1) Y[ldy + n] = x1 * t1;
    if (R > 2) Y[2 * ldy + n] = x2 * t2;
    if (R > 3) Y[3 * ldy + n] = x3 * t3;
  }
}

#if defined(I8_LOAD)
// One quantized row (parts u and f) against four rows of Q at a time: the matrix-vector product of a
// stream's step, which streams its weights from memory. Eight independent accumulator chains where
// one row of Q had two, each chunk of the row loaded once for four, and the next four rows of Q
// (contiguous) prefetched while these are multiplied: english's flow-LM matrices, 1.4x (AVX-512
// VNNI) and 2.5x (AVX2) faster from the caches, 1.2x and 1.4x from memory. Each result is
// linear_i8_rows's for R = 1, operation for operation (integer sums are exact in any order).
// Columns from which the next rows go to L2 only (prefetcht1): rows 2048 bytes apart or more share
// L1 sets with the rows being multiplied (their lines are 4 KB apart at 4096 columns) and evicted
// them. From memory, one thread, this Zen 4, alternating builds: english's 1024x4096 0.69x the time
// (AVX2) and 0.83x (AVX-512 VNNI), the flow-LM step 6.5 ms against 7.2 (AVX2); with 1024 columns
// the same prefetch was 1.3x slower.
#define I8_FAR_ROWS 2048
#define I8_PREFETCH_4_LINES(p, locality)         \
  do {                                           \
    __builtin_prefetch((p), 0, locality);        \
    __builtin_prefetch((p) + 64, 0, locality);   \
    __builtin_prefetch((p) + 128, 0, locality);  \
    __builtin_prefetch((p) + 192, 0, locality);  \
  } while (0)
static void linear_i8_vector(const uint8_t *u, const uint8_t *f, const int8_t *Q, const float *S, const int32_t *sums,
                             float *Y, int N, int K, int G, float x0, int z0) {
  int groups = K / G;
  int n = 0;
  for (; n + 4 <= N; n += 4) {
    const int8_t *q0 = Q + (long)n * K, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
    const float *s0 = S + (long)n * groups, *s1 = s0 + groups, *s2 = s1 + groups, *s3 = s2 + groups;
    const int32_t *m0 = sums + (long)n * groups, *m1 = m0 + groups, *m2 = m1 + groups, *m3 = m2 + groups;
    float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    for (int g = 0; g < groups; g++) {
      int k = g * G, end = k + G;
      iacc a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
      for (; k + I8_CHUNK <= end; k += I8_CHUNK) {
        const int8_t *ahead = q0 + 4 * (long)K + 4 * (long)k;
        if (K >= I8_FAR_ROWS)
          I8_PREFETCH_4_LINES(ahead, 1);
        else
          I8_PREFETCH_4_LINES(ahead, 3);
        iacc uk = I8_LOAD(u + k), fk = I8_LOAD(f + k), w;
        w = I8_LOAD(q0 + k); I8_DOTW(a0, uk, w); I8_DOTW(b0, fk, w);
        w = I8_LOAD(q1 + k); I8_DOTW(a1, uk, w); I8_DOTW(b1, fk, w);
        w = I8_LOAD(q2 + k); I8_DOTW(a2, uk, w); I8_DOTW(b2, fk, w);
        w = I8_LOAD(q3 + k); I8_DOTW(a3, uk, w); I8_DOTW(b3, fk, w);
      }
      int c0 = I8_SUM(a0), c1 = I8_SUM(a1), c2 = I8_SUM(a2), c3 = I8_SUM(a3);
      int d0 = I8_SUM(b0), d1 = I8_SUM(b1), d2 = I8_SUM(b2), d3 = I8_SUM(b3);
      for (; k < end; k++) {
        c0 += u[k] * q0[k], d0 += f[k] * q0[k];
        c1 += u[k] * q1[k], d1 += f[k] * q1[k];
        c2 += u[k] * q2[k], d2 += f[k] * q2[k];
        c3 += u[k] * q3[k], d3 += f[k] * q3[k];
      }
      t0 += s0[g] * i8_value(c0, d0, z0, m0[g]);
      t1 += s1[g] * i8_value(c1, d1, z0, m1[g]);
      t2 += s2[g] * i8_value(c2, d2, z0, m2[g]);
      t3 += s3[g] * i8_value(c3, d3, z0, m3[g]);
    }
    Y[n] = x0 * t0;
    Y[n + 1] = x0 * t1;
    Y[n + 2] = x0 * t2;
    Y[n + 3] = x0 * t3;
  }
  if (n < N)
    linear_i8_rows(u, f, Q + (long)n * K, S + (long)n * groups, sums + (long)n * groups, Y + n, 1, N - n, 0, K, G, x0,
                   0, 0, 0, z0, 0, 0, 0);
}
#define I8_VECTOR 1
#endif

#if defined(__AVX2__) || defined(__AVX512VNNI__)
// The next tile's rows of Q on their way into the caches while a pass over this tile multiplies
// (a decoder frame's weights come from memory, the flow LM's step streaming its own beside it), a
// line at a time as the pass goes: `left` lines from `at`, `per_row` of each row, rows `stride`
// bytes apart. All of them at once before the pass stalled on the processor's misses in flight:
// spread, one thread, this Zen 4, weights from memory (a 64 MB sweep before each call), AVX2: the
// decoder's 16 rows by 1536x512 0.8x the time, 40 by 4096x1024 0.9x; AVX-512 VNNI: 0.72x and 0.9x.
typedef struct {
  const int8_t *at;
  long left, per_row, stride, line;
} ahead_lines;

// Rows [from, to) of Q (K columns, N rows in all).
static inline ahead_lines rows_ahead(const int8_t *Q, int from, int to, int N, int K) {
  int rows = (to < N ? to : N) - from;
  ahead_lines a = {Q, 0, (K + 63) / 64, K, 0};
  if (rows > 0) a.at = Q + (long)from * K, a.left = rows * a.per_row;
  return a;
}

static inline void ahead_one(ahead_lines *a) {
  if (a->left) {
    __builtin_prefetch(a->at + a->line * 64);
    a->left--;
    if (++a->line == a->per_row) a->line = 0, a->at += a->stride;
  }
}
#endif

#if defined(__AVX2__) && !defined(__AVXVNNI__) && !defined(__AVX512VNNI__) && !defined(__wasm__)
// AVX2 without a byte dot product into int32: blocks of 8 rows of X packed as their int16 values a
// (above: one part, where the byte products need two), against I8_TILE rows of Q widened to int16,
// one pmaddwd and an add per 2 columns, a row of the block per lane: where the two parts took
// pmaddubsw, pmaddwd and an add per 4 columns and part (twice the multiplies). The sums are V
// itself, exact (int32 for I8_RUN columns at a time, then doubles), so each row's result is still
// linear_i8_rows's: the same V, then the same float32 operations. The tile (I8_TILE rows of Q
// widened, in the scratch) passes every block before the next is widened. One thread, this Zen 4
// held to AVX2, best of 40: 40 rows by 4096x1024 2.4 ms where the two parts took 3.1 (AVX-512
// VNNI's blocks: 2.5), by 1024x4096 2.6 against 3.3; the decoder's 16 rows by 2048x512 0.30
// against 0.35.
#define I8_WIDE 1
#define I8_BLOCK 8
#define I8_TILE 8
#define I8_BLOCK_FROM 6
// Columns whose int32 sums cannot overflow: a pmaddwd lane is at most 2 x 128 x 16065, and 256 of
// them stay under 2^31.
#define I8_RUN 512

// 8 vectors of 8 int32 each (a row's 8 pairs of int16 values), stored as 8 vectors of 8 pairs, a
// row each, pair j of the rows at out + 16 j: an 8 x 8 transpose of int32.
static inline void store_pairs(const __m256i *r, int16_t *out) {
  __m256i h[8], v[8];
  for (int c = 0; c < 8; c += 2) {
    h[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);
    h[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);
  }
  for (int c = 0; c < 8; c += 4)
    for (int j = 0; j < 2; j++) {
      v[c + j] = _mm256_unpacklo_epi64(h[c + j], h[c + j + 2]);
      v[c + j + 2] = _mm256_unpackhi_epi64(h[c + j], h[c + j + 2]);
    }
  // v[0] holds pairs 0 and 4 of rows 0-3 and v[4] of rows 4-7; v[2] pairs 1 and 5, v[1] 2 and 6,
  // v[3] 3 and 7.
  for (int j = 0; j < 4; j++) {
    int at = j == 1 ? 2 : j == 2 ? 1 : j;
    __m256i lo = v[at], hi = v[at + 4];
    _mm256_storeu_si256((__m256i *)(out + 16 * j), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 16 * (j + 4)), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

// R (<= I8_BLOCK) rows (parts U and F, row stride K; zero points zs) packed as their values a,
// zeros after them: P[k / 2][r][k % 2] = a[r][k]. 16 columns at a time, then one by one.
static void pack_wide(const uint8_t *U, const uint8_t *F, const uint8_t *zs, int R, int K, int16_t *P) {
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256i a[8];
    for (int r = 0; r < I8_BLOCK; r++) {
      if (r >= R) {
        a[r] = _mm256_setzero_si256();
        continue;
      }
      __m256i u = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(U + (long)r * K + k)));
      __m256i f = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(F + (long)r * K + k)));
      __m256i whole = _mm256_mullo_epi16(_mm256_sub_epi16(u, _mm256_set1_epi16(zs[r])), _mm256_set1_epi16(126));
      a[r] = _mm256_add_epi16(whole, _mm256_sub_epi16(f, _mm256_set1_epi16(63)));
    }
    store_pairs(a, P + (long)k * I8_BLOCK);
  }
  for (; k < K; k++)
    for (int r = 0; r < I8_BLOCK; r++) {
      long at = (long)r * K + k;
      P[(long)(k - k % 2) * I8_BLOCK + 2 * r + k % 2] = r < R ? (int16_t)(126 * (U[at] - zs[r]) + F[at] - 63) : 0;
    }
}

// C (<= I8_TILE) rows of Q (row stride K) widened to int16 and packed as the blocks are, a row of Q
// per pair of values: W[k / 2][c][k % 2] = Q[c][k] (each 2 columns' weights in one 32-byte line:
// rows of Q apart by K bytes each, 4 KB at english's largest, met in the same L1 cache set and
// took turns evicting each other, 1.4x slower). 16 columns of a whole tile at a time.
static void widen_tile(const int8_t *Q, int C, int K, int16_t *W) {
  int k = 0;
  if (C == I8_TILE)
    for (; k + 16 <= K; k += 16) {
      __m256i r[8];
      for (int c = 0; c < 8; c++) r[c] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(Q + (long)c * K + k)));
      store_pairs(r, W + (long)k * I8_TILE);
    }
  for (; k < K; k++)
    for (int c = 0; c < C; c++) W[(long)(k - k % 2) * I8_TILE + 2 * c + k % 2] = Q[(long)c * K + k];
}

// The int32 sums of columns [k, end) (at most I8_RUN) of a packed block against C (I8_TILE or 1)
// rows of a widened tile (from W's row 0): sums[c], a row of the block per lane, prefetching a line
// of `ahead` every 8 columns. Nothing else is live. (Two blocks by half a tile, 6 loads for 8
// pmaddwd where this takes 9: no faster.)
static inline __attribute__((always_inline)) void wide_sums(const int16_t *P, const int16_t *W, int C, int k, int end,
                                                            ahead_lines *ahead, __m256i *sums) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const int16_t *w = W + (long)k * I8_TILE, *p = P + (long)k * I8_BLOCK;
  ahead_lines lines = *ahead;
#define I8_WIDE_DOT(c, a)                                                  \
  do {                                                                     \
    int32_t w2_;                                                           \
    __builtin_memcpy(&w2_, w + i * I8_TILE + 2 * (c), 4);                  \
    a = _mm256_add_epi32(a, _mm256_madd_epi16(x, _mm256_set1_epi32(w2_))); \
  } while (0)
#pragma GCC unroll 2
  for (long i = 0; i < end - k; i += 2) {
    if (!(i & 6)) ahead_one(&lines);
    __m256i x = _mm256_loadu_si256((const __m256i *)(p + i * I8_BLOCK));
    I8_WIDE_DOT(0, a0);
    if (C > 1) I8_WIDE_DOT(1, a1);
    if (C > 2) I8_WIDE_DOT(2, a2);
    if (C > 3) I8_WIDE_DOT(3, a3);
    if (C > 4) I8_WIDE_DOT(4, a4);
    if (C > 5) I8_WIDE_DOT(5, a5);
    if (C > 6) I8_WIDE_DOT(6, a6);
    if (C > 7) I8_WIDE_DOT(7, a7);
  }
#undef I8_WIDE_DOT
  *ahead = lines;
  sums[0] = a0;
  if (C > 1) sums[1] = a1;
  if (C > 2) sums[2] = a2;
  if (C > 3) sums[3] = a3;
  if (C > 4) sums[4] = a4;
  if (C > 5) sums[5] = a5;
  if (C > 6) sums[6] = a6;
  if (C > 7) sums[7] = a7;
}

static __attribute__((noinline)) void wide_sums_tile(const int16_t *P, const int16_t *W, int k, int end,
                                                     ahead_lines *ahead, __m256i *sums) {
  wide_sums(P, W, I8_TILE, k, end, ahead, sums);
}

// R packed rows (blocks of I8_BLOCK, the last one partial; scales xs of the rows) against N rows of
// Q, into Y (row stride ldy). W: room for I8_TILE rows of Q widened. The first block's pass over a
// tile prefetches the next tile.
static void linear_wide(const int16_t *P, int R, const int8_t *Q, const float *S, float *Y, int N, int ldy, int K,
                        int G, const float *xs, int16_t *W) {
  int groups = K / G;
  for (int n = 0; n < N; n += I8_TILE) {
    int C = N - n < I8_TILE ? N - n : I8_TILE;
    widen_tile(Q + (long)n * K, C, K, W);
    ahead_lines next = rows_ahead(Q, n + C, n + C + I8_TILE, N, K), none = rows_ahead(Q, 0, 0, N, K);
    for (int m = 0; m < R; m += I8_BLOCK) {
      const int16_t *p = P + (long)m * K;
      int rows = R - m < I8_BLOCK ? R - m : I8_BLOCK;
      vf t[I8_TILE];
      for (int c = 0; c < C; c++) t[c] = splat(0);
      for (int g = 0; g < groups; g++) {
        vd v[I8_TILE];
        for (int c = 0; c < C; c++) v[c] = (vd){0};
        for (int k = g * G, end = k + G; k < end; k += I8_RUN) {
          int stop = end - k < I8_RUN ? end : k + I8_RUN;
          __m256i dots[I8_TILE];
          if (C == I8_TILE)
            wide_sums_tile(p, W, k, stop, m == 0 ? &next : &none, dots);
          else
            for (int c = 0; c < C; c++) wide_sums(p, W + 2 * c, 1, k, stop, &none, dots + c);
          for (int c = 0; c < C; c++) v[c] += __builtin_convertvector((vi)dots[c], vd);
        }
        for (int c = 0; c < C; c++) t[c] += S[(long)(n + c) * groups + g] * __builtin_convertvector(v[c], vf);
      }
      vf scales = splat(0);
      for (int r = 0; r < rows; r++) scales[r] = xs[m + r];
      for (int c = 0; c < C; c++) {
        vf y = scales * t[c];
        for (int r = 0; r < rows; r++) Y[(long)(m + r) * ldy + n + c] = y[r];
      }
    }
  }
}
#elif defined(__AVX512VNNI__) || defined(__AVX2__)
// Blocks of I8_BLOCK rows of X (a text prompt's) against I8_TILE rows of Q at a time, with no sum
// across a vector's lanes: the block's parts are packed so that a vector holds 4 consecutive
// columns of each of its rows (an int32 lane per row, vpdpbusd's layout), and each 4 values of a
// row of Q are broadcast to all lanes, so one I8_DOTW adds 4 products to each of the block's rows'
// sums. Each row's result is still linear_i8_rows's, operation for operation: the same integer
// sums, then the same float32 operations, a row per lane (I8_BLOCK is LANES). Native only: the
// tile's accumulators, the block's two parts and the weights fit the registers, 16 rows by 8 in
// AVX-512's 32, 8 by 6 in AVX-VNNI's 16 (40 rows by 4096x1024, one thread: 1.9 ms, 2.1 by 4), 8 by
// 4 with AVX2's pmaddubsw, pmaddwd and their ones vector (by 6: no faster). A block costs what 5-6
// rows cost on linear_i8_rows (timings: pk_linear_i8).
#if defined(__AVX512VNNI__)
#define I8_BLOCK 16
#define I8_TILE 8
#define I8_BLOCK_FROM 6
#define I8_ZERO() _mm512_setzero_si512()
#define I8_SPLAT(w) _mm512_set1_epi32(w)
#else
#define I8_BLOCK 8
#if defined(__AVXVNNI__)
#define I8_TILE 6
#else
#define I8_TILE 4
#endif
#define I8_BLOCK_FROM 6
#define I8_ZERO() _mm256_setzero_si256()
#define I8_SPLAT(w) _mm256_set1_epi32(w)
#endif

// R (<= I8_BLOCK) rows of a part (row stride K) packed, zeros after them:
// P[k / 4][r][k % 4] = part[r][k].
static void pack_block(const uint8_t *part, int R, int K, uint8_t *P) {
  for (int k = 0; k < K; k += 4)
    for (int r = 0; r < I8_BLOCK; r++) {
      uint8_t *to = P + (long)k * I8_BLOCK + 4 * r;
      if (r < R)
        __builtin_memcpy(to, part + (long)r * K + k, 4);
      else
        __builtin_memset(to, 0, 4);
    }
}

// The integer sums of columns [k, end) of a packed block (parts PU, PF) against C (I8_TILE or 1)
// rows of Q: into sums[2 c] their products with u, into sums[2 c + 1] those with f, a row of the
// block per lane, prefetching a line of `ahead` every 4 columns. Nothing else is live here: with
// the tile's float sums beside them in linear_i8_tile, GCC 12 copied the 16 accumulators between
// registers on every step (0.8x).
static inline __attribute__((always_inline)) void i8_block_sums(const uint8_t *PU, const uint8_t *PF, const int8_t *Q,
                                                                int C, int K, int k, int end, ahead_lines *ahead,
                                                                iacc *sums) {
  ahead_lines lines = *ahead;
  iacc a0 = I8_ZERO(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  iacc b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
  const int8_t *q = Q + k;
  const uint8_t *pu = PU + (long)k * I8_BLOCK, *pf = PF + (long)k * I8_BLOCK;
  long K1 = K, K2 = 2 * K1, K3 = 3 * K1, K4 = 4 * K1, K5 = 5 * K1, K6 = 6 * K1, K7 = 7 * K1;
#define I8_BLOCK_DOT(offset, a, b)               \
  do {                                           \
    int32_t w4_;                                 \
    __builtin_memcpy(&w4_, q + i + (offset), 4); \
    iacc w_ = I8_SPLAT(w4_);                     \
    I8_DOTW(a, u, w_);                           \
    I8_DOTW(b, f, w_);                           \
  } while (0)
#pragma GCC unroll 2
  for (long i = 0; i < end - k; i += 4) {
    ahead_one(&lines);
    iacc u = I8_LOAD(pu + i * I8_BLOCK);
    iacc f = I8_LOAD(pf + i * I8_BLOCK);
    I8_BLOCK_DOT(0, a0, b0);
    if (C > 1) I8_BLOCK_DOT(K1, a1, b1);
    if (C > 2) I8_BLOCK_DOT(K2, a2, b2);
    if (C > 3) I8_BLOCK_DOT(K3, a3, b3);
    if (C > 4) I8_BLOCK_DOT(K4, a4, b4);
    if (C > 5) I8_BLOCK_DOT(K5, a5, b5);
    if (C > 6) I8_BLOCK_DOT(K6, a6, b6);
    if (C > 7) I8_BLOCK_DOT(K7, a7, b7);
  }
#undef I8_BLOCK_DOT
  *ahead = lines;
  sums[0] = a0, sums[1] = b0;
  if (C > 1) sums[2] = a1, sums[3] = b1;
  if (C > 2) sums[4] = a2, sums[5] = b2;
  if (C > 3) sums[6] = a3, sums[7] = b3;
  if (C > 4) sums[8] = a4, sums[9] = b4;
  if (C > 5) sums[10] = a5, sums[11] = b5;
  if (C > 6) sums[12] = a6, sums[13] = b6;
  if (C > 7) sums[14] = a7, sums[15] = b7;
}

static __attribute__((noinline)) void i8_block_sums_tile(const uint8_t *PU, const uint8_t *PF, const int8_t *Q, int K,
                                                         int k, int end, ahead_lines *ahead, iacc *sums) {
  i8_block_sums(PU, PF, Q, I8_TILE, K, k, end, ahead, sums);
}

// C (I8_TILE or 1) rows of Q against a packed block: Y[r, c] for the block's R rows r, each row's
// float32 operations linear_i8_rows's.
static inline __attribute__((always_inline)) void linear_i8_tile(const uint8_t *PU, const uint8_t *PF, const int8_t *Q,
                                                                 const float *S, const int32_t *sums, float *Y, int C,
                                                                 int R, int ldy, int K, int G, vf xs, vi zs,
                                                                 ahead_lines *ahead) {
  int groups = K / G;
  vf t[I8_TILE];
  iacc dots[2 * I8_TILE];
  for (int c = 0; c < C; c++) t[c] = splat(0);
  for (int g = 0; g < groups; g++) {
    if (C == I8_TILE)
      i8_block_sums_tile(PU, PF, Q, K, g * G, (g + 1) * G, ahead, dots);
    else
      i8_block_sums(PU, PF, Q, 1, K, g * G, (g + 1) * G, ahead, dots);
    for (int c = 0; c < C; c++) {
      double sum = sums[(long)c * groups + g];
      vd whole = __builtin_convertvector((vi)dots[2 * c], vd), parts = __builtin_convertvector((vi)dots[2 * c + 1], vd);
      vd value = I8_VALUE(whole, parts, __builtin_convertvector(zs, vd), sum);  // a row per lane
      t[c] += S[(long)c * groups + g] * __builtin_convertvector(value, vf);
    }
  }
  for (int c = 0; c < C; c++) {
    vf y = xs * t[c];
    for (int r = 0; r < R; r++) Y[(long)r * ldy + c] = y[r];
  }
}

// A packed block of R rows (parts PU, PF; scales xs and zero points zs of its rows) against N rows
// of Q.
static void linear_i8_block(const uint8_t *PU, const uint8_t *PF, const int8_t *Q, const float *S, const int32_t *sums,
                            float *Y, int R, int N, int ldy, int K, int G, const float *xs, const uint8_t *zs) {
  int groups = K / G;
  vf scales = splat(0);
  vi zero_points = scales < 0;
  for (int r = 0; r < R; r++) scales[r] = xs[r], zero_points[r] = zs[r];
  int n = 0;
  for (; n + I8_TILE <= N; n += I8_TILE) {
    ahead_lines next = rows_ahead(Q, n + I8_TILE, n + 2 * I8_TILE, N, K);
    linear_i8_tile(PU, PF, Q + (long)n * K, S + (long)n * groups, sums + (long)n * groups, Y + n, I8_TILE, R, ldy, K, G,
                   scales, zero_points, &next);
  }
  for (; n < N; n++) {
    ahead_lines none = rows_ahead(Q, 0, 0, N, K);
    linear_i8_tile(PU, PF, Q + (long)n * K, S + (long)n * groups, sums + (long)n * groups, Y + n, 1, R, ldy, K, G,
                   scales, zero_points, &none);
  }
}
#endif

#if defined(__aarch64__) && defined(__ARM_FEATURE_MATMUL_INT8) && !defined(__wasm__)
// i8mm: blocks of I8_BLOCK rows of X against I8_TILE rows of Q with smmla (vmmlaq_s32), which
// multiplies a 2x8 matrix of bytes by another's transpose into the 2x2 int32 sums of 8 products
// each: 32 products an instruction where sdot makes 16, and no sum across a vector's lanes. So the
// block's rows go in pairs, packed 8 columns at a time (P[k / 8][r / 2][r % 2][k % 8]), and Q's
// rows in pairs, two 8-byte loads each. Each row's result is linear_i8_rows's, operation for
// operation: the same integer sums, then the same float32 operations, one row and Q row per lane.
#define I8_BLOCK 8
#define I8_TILE 4
#define I8_BLOCK_FROM 6  // as AVX2's blocks of 8 (kernels.py's I8_BLOCKS sizes the scratch for both)
typedef double vd4 __attribute__((vector_size(32)));

// R (<= I8_BLOCK) rows of a part (row stride K, K % 4 == 0) packed, zeros after them. Where K % 8
// is 4, the last 4 columns are a half chunk after the whole ones, P[K / 8][r][0..4): the block
// takes exactly I8_BLOCK * K bytes.
static void pack_block(const uint8_t *part, int R, int K, uint8_t *P) {
  int whole = K - K % 8;
  for (int k = 0; k < K; k += 4)
    for (int r = 0; r < I8_BLOCK; r++) {
      uint8_t *to = k < whole ? P + (long)(k - k % 8) * I8_BLOCK + 16 * (r / 2) + 8 * (r % 2) + k % 8
                              : P + (long)whole * I8_BLOCK + 4 * r;
      if (r < R)
        __builtin_memcpy(to, part + (long)r * K + k, 4);
      else
        __builtin_memset(to, 0, 4);
    }
}

// The block's pairs of rows (parts u, f) at one chunk: a half chunk's 4 columns go in each row's
// lower half, zeros in its upper.
static inline __attribute__((always_inline)) void i8mm_load(const uint8_t *P, int half, int8x16_t *x) {
  for (int p = 0; p < I8_BLOCK / 2; p++) {
    if (half) {
      int32x2_t rows = vreinterpret_s32_s8(vld1_s8((const int8_t *)P + 8 * p));
      x[p] = vreinterpretq_s8_s32(vzip1q_s32(vcombine_s32(rows, rows), vdupq_n_s32(0)));
    } else {
      x[p] = vld1q_s8((const int8_t *)P + 16 * p);
    }
  }
}

// Columns [k, k + 4) of two rows of Q as a pair for smmla, in the lower (upper = 0) or upper half
// of each row's 8 bytes, zeros in the other: where a group starts or ends inside a chunk.
static inline int8x16_t i8mm_quarter(const int8_t *a, const int8_t *b, int k, int upper) {
  int32_t wa, wb;
  __builtin_memcpy(&wa, a + k, 4);
  __builtin_memcpy(&wb, b + k, 4);
  int32x4_t w = upper ? (int32x4_t){0, wa, 0, wb} : (int32x4_t){wa, 0, wb, 0};
  return vreinterpretq_s8_s32(w);
}

// 4 pairs of the block's rows by 2 pairs of Q's: a[4 p + 2 j] (part u), a[4 p + 2 j + 1] (part f).
static inline __attribute__((always_inline)) void i8mm_step(int32x4_t *a, const int8x16_t *xu, const int8x16_t *xf,
                                                            int8x16_t w0, int8x16_t w1) {
  for (int p = 0; p < I8_BLOCK / 2; p++) {
    a[4 * p] = vmmlaq_s32(a[4 * p], xu[p], w0);
    a[4 * p + 1] = vmmlaq_s32(a[4 * p + 1], xf[p], w0);
    a[4 * p + 2] = vmmlaq_s32(a[4 * p + 2], xu[p], w1);
    a[4 * p + 3] = vmmlaq_s32(a[4 * p + 3], xf[p], w1);
  }
}

// The integer sums of columns [k, end) (a group: multiples of 4) of a packed block (parts PU, PF)
// against rows q[0..4) of Q, into a as i8mm_step adds them; lane l of a[4 p + 2 j + part] is row
// 2 p + l / 2 of the block by row 2 j + l % 2 of the tile. Nothing else is live here (as in the
// AVX-512 block: the tile's float sums beside 16 accumulators would not fit the registers).
static __attribute__((noinline)) void i8mm_sums(const uint8_t *PU, const uint8_t *PF, const int8_t *const *q, int K,
                                                int k, int end, int32x4_t *a) {
  int whole = K - K % 8;
  int8x16_t xu[I8_BLOCK / 2], xf[I8_BLOCK / 2];
  for (int i = 0; i < 4 * I8_BLOCK / 2; i++) a[i] = vdupq_n_s32(0);
  if (k % 8) {  // the group starts in a chunk's upper half
    long at = (long)(k - 4) * I8_BLOCK;
    i8mm_load(PU + at, 0, xu);
    i8mm_load(PF + at, 0, xf);
    i8mm_step(a, xu, xf, i8mm_quarter(q[0], q[1], k, 1), i8mm_quarter(q[2], q[3], k, 1));
    k += 4;
  }
  for (; k + 8 <= end; k += 8) {
    long at = (long)k * I8_BLOCK;
    i8mm_load(PU + at, 0, xu);
    i8mm_load(PF + at, 0, xf);
    i8mm_step(a, xu, xf, vcombine_s8(vld1_s8(q[0] + k), vld1_s8(q[1] + k)),
              vcombine_s8(vld1_s8(q[2] + k), vld1_s8(q[3] + k)));
  }
  if (k < end) {  // the group ends in a chunk's lower half, or in the half chunk
    long at = (long)k * I8_BLOCK;
    i8mm_load(PU + at, k >= whole, xu);
    i8mm_load(PF + at, k >= whole, xf);
    i8mm_step(a, xu, xf, i8mm_quarter(q[0], q[1], k, 0), i8mm_quarter(q[2], q[3], k, 0));
  }
}

// A packed block of R rows (parts PU, PF; scales xs and zero points zs of its rows) against N rows
// of Q, I8_TILE at a time (the last tile's missing rows repeat its last row, and are not written).
static void linear_i8_block(const uint8_t *PU, const uint8_t *PF, const int8_t *Q, const float *S, const int32_t *sums,
                            float *Y, int R, int N, int ldy, int K, int G, const float *xs, const uint8_t *zs) {
  int groups = K / G;
  int32x4_t zero_points[I8_BLOCK / 2];  // lanes: the pair's first row twice, then its second twice
  for (int p = 0; p < I8_BLOCK / 2; p++) {
    int z0 = 2 * p < R ? zs[2 * p] : 0, z1 = 2 * p + 1 < R ? zs[2 * p + 1] : 0;
    zero_points[p] = (int32x4_t){z0, z0, z1, z1};
  }
  for (int n = 0; n < N; n += I8_TILE) {
    int C = N - n < I8_TILE ? N - n : I8_TILE, rows[I8_TILE];
    const int8_t *q[I8_TILE];
    for (int c = 0; c < I8_TILE; c++) {
      rows[c] = n + (c < C ? c : C - 1);
      q[c] = Q + (long)rows[c] * K;
    }
    float32x4_t t[2 * I8_BLOCK / 2];
    for (int i = 0; i < I8_BLOCK; i++) t[i] = vdupq_n_f32(0);
    for (int g = 0; g < groups; g++) {
      int32x4_t a[4 * I8_BLOCK / 2];
      i8mm_sums(PU, PF, q, K, g * G, (g + 1) * G, a);
      for (int j = 0; j < 2; j++) {
        int32_t s0 = sums[(long)rows[2 * j] * groups + g], s1 = sums[(long)rows[2 * j + 1] * groups + g];
        float w0 = S[(long)rows[2 * j] * groups + g], w1 = S[(long)rows[2 * j + 1] * groups + g];
        vd4 sum = {s0, s1, s0, s1};
        float32x4_t scale = {w0, w1, w0, w1};
        for (int p = 0; p < I8_BLOCK / 2; p++) {
          vd4 whole = __builtin_convertvector(a[4 * p + 2 * j], vd4), parts = __builtin_convertvector(a[4 * p + 2 * j + 1], vd4);
          vd4 value = I8_VALUE(whole, parts, __builtin_convertvector(zero_points[p], vd4), sum);
          t[2 * p + j] += scale * __builtin_convertvector(value, float32x4_t);  // a pair of rows per lane
        }
      }
    }
    for (int p = 0; p < I8_BLOCK / 2; p++)
      for (int l = 0; l < 4; l++)
        for (int j = 0; j < 2; j++) {
          int r = 2 * p + l / 2, c = 2 * j + l % 2;
          if (r < R && c < C) Y[(long)r * ldy + n + c] = xs[r] * t[2 * p + j][l];
        }
  }
}
#endif

// Rows of Q per pass over every row of X: 128 KB of weights, which stay in the core's L2 cache while
// X's blocks of rows go by, so that a product of many rows (a text prompt) reads Q from memory once,
// not once per block of rows, and every row is quantized once.
#define I8_PANEL_BYTES (128 * 1024)
// Rows of X per unit of pk_i8_rows: a block of AVX-512's, two of AVX2's and aarch64's.
#define I8_UNIT 16

// The scratch, the caller's: uint8 [i8_scratch(M, K)]: every row's part u, then every row's part f,
// their zero points, then (4-byte aligned) their float32 scales, divided by 126 (V's unit, above),
// then (from a 64-byte boundary) the rows packed in blocks and the widening room of two threads.
static inline float *i8_scales(uint8_t *scratch, int M, int K) {
  return (float *)(scratch + ((2 * (long)M * K + M + 3) & ~3L));
}

static inline int i8_panel_rows(int K) {
  int panel = I8_PANEL_BYTES / K;
  return panel < 4 ? 4 : panel - panel % 4;
}

#if defined(I8_BLOCK)
// Rows [0, i8_blocked) go by blocks, the last one partial where I8_BLOCK_FROM rows or more are left:
// on english's 24 flow-LM matrices, one thread, AVX-512, a block costs what 6 rows cost on
// linear_i8_rows. By block, 40 rows take 27-32 ms where 8 rows at a time on the dot-product form
// took 64, 16 rows 10-13 where they took 29; AVX2, 4096x1024: 40 rows 3.3-3.7 ms where they took
// 4.4-4.8. Each block is packed as its part u, then its part f (AVX2's: its values a).
static inline int i8_blocked(int M, int K, int G) {
  if (K % 4 || G % 4) return 0;
  return M % I8_BLOCK >= I8_BLOCK_FROM ? M : M - M % I8_BLOCK;
}

static inline uint8_t *i8_packed(uint8_t *scratch, int M, int K) {
  return (uint8_t *)(((uintptr_t)(i8_scales(scratch, M, K) + M) + 63) & ~(uintptr_t)63);
}
#endif

// pk_linear_i8 in parts that two threads can share (core/_kernels.c takes them one at a time from
// both): pk_i8_rows quantizes (and packs) unit u of X's rows, pk_i8_panel multiplies every row by
// panel p of Q's rows into Y, with the widening room of `thread` (0 or 1). Each part writes only its
// own rows of the scratch or columns of Y, and pk_i8_panel needs every unit made; each returns how
// many units or panels the product has, and does nothing where u or p is not one of them.
EXPORT(pk_i8_rows)
int pk_i8_rows(const float *X, int M, int K, int G, uint8_t *scratch, int u) {
  int units = (M + I8_UNIT - 1) / I8_UNIT;
  if (u < 0 || u >= units) return units;
  FLUSH_DENORMALS();
  long parts = (long)M * K;
  uint8_t *U = scratch, *F = scratch + parts, *zeros = scratch + 2 * parts;
  float *scales = i8_scales(scratch, M, K);
  int from = u * I8_UNIT, to = M - from < I8_UNIT ? M : from + I8_UNIT;
  for (int m = from; m < to; m++)
    scales[m] = quantize_row(X + (long)m * K, U + (long)m * K, F + (long)m * K, zeros + m, K) / 126.0f;
#if defined(I8_BLOCK)
  int blocked = i8_blocked(M, K, G);
  uint8_t *packed = i8_packed(scratch, M, K);
  long block_bytes = (long)I8_BLOCK * K;
  for (int m = from; m < to && m < blocked; m += I8_BLOCK) {
    uint8_t *p = packed + 2 * (m / I8_BLOCK) * block_bytes;
    int rows = blocked - m < I8_BLOCK ? blocked - m : I8_BLOCK;
#if defined(I8_WIDE)
    pack_wide(U + (long)m * K, F + (long)m * K, zeros + m, rows, K, (int16_t *)p);
#else
    pack_block(U + (long)m * K, rows, K, p);
    pack_block(F + (long)m * K, rows, K, p + block_bytes);
#endif
  }
#else
  (void)G;
#endif
  RESTORE_DENORMALS();
  return units;
}

EXPORT(pk_i8_panel)
int pk_i8_panel(const int8_t *Q, const float *S, const int32_t *sums, const float *bias, float *Y, int M, int N, int K,
                int G, uint8_t *scratch, int p, int thread) {
  int rows_per_panel = i8_panel_rows(K), panels = (N + rows_per_panel - 1) / rows_per_panel;
  if (p < 0 || p >= panels) return panels;
  FLUSH_DENORMALS();
  long parts = (long)M * K;
  const uint8_t *U = scratch, *F = scratch + parts, *zeros = scratch + 2 * parts;
  const float *scales = i8_scales(scratch, M, K);
  int groups = K / G, n = p * rows_per_panel, count = N - n < rows_per_panel ? N - n : rows_per_panel;
  const int8_t *q = Q + (long)n * K;
  const float *s = S + (long)n * groups;
  const int32_t *sum = sums + (long)n * groups;
  int m = 0;
#if defined(I8_BLOCK)
  int blocked = i8_blocked(M, K, G);
  const uint8_t *packed = i8_packed(scratch, M, K);
#if defined(I8_WIDE)
  if (blocked) {
    // The widening rooms come after the blocks, the last one's rows of zeros included.
    long packed_rows = (blocked + I8_BLOCK - 1) / I8_BLOCK * I8_BLOCK;
    int16_t *widened = (int16_t *)(packed + 2 * packed_rows * K) + (long)thread * I8_TILE * K;
    linear_wide((const int16_t *)packed, blocked, q, s, Y + n, count, N, K, G, scales, widened);
  }
  m = blocked;
#else
  long block_bytes = (long)I8_BLOCK * K;
  for (; m < blocked; m += I8_BLOCK) {
    const uint8_t *b = packed + 2 * (m / I8_BLOCK) * block_bytes;
    int rows = blocked - m < I8_BLOCK ? blocked - m : I8_BLOCK;
    linear_i8_block(b, b + block_bytes, q, s, sum, Y + (long)m * N + n, rows, count, N, K, G, scales + m, zeros + m);
  }
#endif
#endif
#if !defined(I8_WIDE)
  (void)thread;
#endif
  for (; m < M; m += 4) {
    const uint8_t *u = U + (long)m * K, *f = F + (long)m * K, *z = zeros + m;
    const float *x = scales + m;
    float *y = Y + (long)m * N + n;
    switch (M - m < 4 ? M - m : 4) {
      case 1:
#if defined(I8_VECTOR)
        linear_i8_vector(u, f, q, s, sum, y, count, K, G, x[0], z[0]);
#else
        linear_i8_rows(u, f, q, s, sum, y, 1, count, N, K, G, x[0], 0, 0, 0, z[0], 0, 0, 0);
#endif
        break;
      case 2: linear_i8_rows(u, f, q, s, sum, y, 2, count, N, K, G, x[0], x[1], 0, 0, z[0], z[1], 0, 0); break;
      case 3: linear_i8_rows(u, f, q, s, sum, y, 3, count, N, K, G, x[0], x[1], x[2], 0, z[0], z[1], z[2], 0); break;
      default:
        linear_i8_rows(u, f, q, s, sum, y, 4, count, N, K, G, x[0], x[1], x[2], x[3], z[0], z[1], z[2], z[3]);
        break;
    }
  }
  if (bias)
    for (int r = 0; r < M; r++) add_bias(Y + (long)r * N + n, bias + n, 1, count);
  RESTORE_DENORMALS();
  return panels;
}

EXPORT(pk_linear_i8)
void pk_linear_i8(const float *X, const int8_t *Q, const float *S, const int32_t *sums, const float *bias, float *Y,
                  int M, int N, int K, int G, uint8_t *scratch) {
  for (int u = 0, units = pk_i8_rows(X, M, K, G, scratch, -1); u < units; u++) pk_i8_rows(X, M, K, G, scratch, u);
  for (int p = 0, panels = pk_i8_panel(Q, S, sums, bias, Y, M, N, K, G, scratch, -1, 0); p < panels; p++)
    pk_i8_panel(Q, S, sums, bias, Y, M, N, K, G, scratch, p, 0);
}

// sums[n, g] = the sum of group g (G columns) of row n of Q [N, K]: computed once per matrix.
EXPORT(pk_i8_sums)
void pk_i8_sums(const int8_t *Q, int32_t *sums, int N, int K, int G) {
  for (int n = 0; n < N; n++)
    for (int g = 0; g < K / G; g++) {
      const int8_t *q = Q + (long)n * K + (long)g * G;
      int32_t s = 0;
      for (int k = 0; k < G; k++) s += q[k];
      sums[(long)n * (K / G) + g] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// Convolution over time, channels first: Y[M, N] = sum over c < C, j < T of
// W[M, C, T][m, c, j] * X[c * ldx + n + j * dilation], + bias[m]. X rows hold the left context
// (ldx >= N + (T - 1) * dilation). With T = 1 this is the plain product W[M, C] @ X[C, N].
//
// Output columns are computed in tiles of `rows` weight rows by `vecs` vectors: rows * vecs
// accumulators, the vecs vectors of X read once per tap for all the rows, and one weight splat.
// With 16 vector registers (V8's XMM registers on x86-64 for WebAssembly) the tile is 2 rows by 4
// vectors: 13 live vectors, none spilled. 4 by 4, 21 vectors, spilled accumulators to the stack on
// every tap: 0.7-0.85x the speed in Chromium (and fusing its multiply-adds gained at most 1.1x),
// 0.7-0.8x natively with AVX2. Natively with AVX2 (GCC, 16 YMM registers) 4 rows by 3 vectors
// fills them exactly, unspilled, with 12 chains and 7 loads for 12 multiply-adds where 2 by 4 had
// 6 for 8: the Mimi decoder's convolutions over 480 and 1920 steps 0.54-0.57x the time (k = 3) and
// 0.74-0.75x (k = 1), 52 billion multiply-adds a second on this Zen 4; and 6 rows by 2 vectors (its
// first layers' 16 steps) 0.8-0.9x. With AVX-512's 32 registers 4 by 4 fits, and needs fewer
// loads per multiply-add (GCC: 1.2-1.35x faster than 2 by 4). The columns left go CONV_PAIR_ROWS
// rows by 2 vectors and 8 by 1, and rows left over one at a time.
#if defined(__AVX512F__)
#define CONV_ROWS 4
#define CONV_VECS 4
#define CONV_PAIR_ROWS 4
#elif defined(__AVX2__)
#define CONV_ROWS 4
#define CONV_VECS 3
#define CONV_PAIR_ROWS 6
#else
#define CONV_ROWS 2
#define CONV_VECS 4
#define CONV_PAIR_ROWS 4
#endif

#if defined(__wasm__)
#define CONV_AHEAD 0
#else
#define CONV_AHEAD 1
#endif

// splat(*p): in WebAssembly one v128.load32_splat (a scalar load and splat cost more, with the +0
// of splat() kept as a scalar add).
static inline vf splat_load(const float *p) {
#if defined(__wasm__)
  return (vf)wasm_v128_load32_splat(p);
#else
  return splat(*p);
#endif
}

// rows and vecs are constants where inlined (rows * vecs <= 16, vecs <= 4): the loops over them
// unroll and the accumulators live in registers.
static inline __attribute__((always_inline)) void conv_tile(const float *W, const float *X, float *Y, int C, int T,
                                                           int N, int ldx, int dilation, int m, int n, int rows,
                                                           int vecs, const char *ahead) {
  int ct = C * T;
  const float *w = W + (long)m * ct;
  vf acc[8][4];
  for (int r = 0; r < rows; r++)
    for (int v = 0; v < vecs; v++) acc[r][v] = (vf){0};
  // The taps (c, j) in two nested loops. The inner one runs over the channels where the kernel is
  // short (an inner loop of 2 or 3 taps: 1.05-1.2x slower in Chromium), else over the taps, which
  // reads each weight row in order (channels inner at T = 7: 1.1x slower).
  int channels_inner = T <= 3;
  int outer = channels_inner ? T : C, inner = channels_inner ? C : T;
  long x_outer = channels_inner ? dilation : ldx, x_inner = channels_inner ? ldx : dilation;
  int w_outer = channels_inner ? 1 : T, w_inner = channels_inner ? T : 1;
  for (int o = 0; o < outer; o++) {
    const float *x = X + n + o * x_outer, *wo = w + o * w_outer;
    for (int k = 0; k < inner; k++, x += x_inner, wo += w_inner) {
      if (ahead) {
        __builtin_prefetch(ahead);
        ahead += rows * 4;
      }
      vf u[4];
      for (int v = 0; v < vecs; v++) u[v] = LOAD(x + v * LANES);
      for (int r = 0; r < rows; r++) {
        vf s = splat_load(wo + (long)r * ct);
        for (int v = 0; v < vecs; v++) acc[r][v] = MADD(acc[r][v], u[v], s);
      }
    }
  }
  for (int r = 0; r < rows; r++)
    for (int v = 0; v < vecs; v++) STORE(Y + (long)(m + r) * N + n + v * LANES, acc[r][v]);
}

// All M rows of `vecs` vectors of columns at n, `rows` at a time, then one by one.
static inline __attribute__((always_inline)) void conv_cols(const float *W, const float *X, float *Y, int M, int C,
                                                           int T, int N, int ldx, int dilation, int n, int rows,
                                                           int vecs) {
  int m = 0;
  for (; m + rows <= M; m += rows) {
    // The next tile's weights on their way from memory, spread over this one's: a tile's weights
    // are read once a call where the columns are few, as in the decoder's 16-step convolutions (one
    // thread, this Zen 4, weights from memory: 1536x512x2 0.78x the time on AVX2, 0.9x on AVX-512;
    // 512x512x7 0.92x and 1.0x). WebAssembly has no prefetch.
    const char *ahead = CONV_AHEAD && n == 0 && m + 2 * rows <= M ? (const char *)(W + (long)(m + rows) * C * T) : 0;
    conv_tile(W, X, Y, C, T, N, ldx, dilation, m, n, rows, vecs, ahead);
  }
  for (; m < M; m++) conv_tile(W, X, Y, C, T, N, ldx, dilation, m, n, 1, vecs, 0);
}

EXPORT(pk_conv_f32)
void pk_conv_f32(const float *W, const float *X, const float *bias, float *Y, int M, int C, int T, int N, int ldx,
                 int dilation) {
  FLUSH_DENORMALS();
  int n = 0;
  for (; n + CONV_VECS * LANES <= N; n += CONV_VECS * LANES)
    conv_cols(W, X, Y, M, C, T, N, ldx, dilation, n, CONV_ROWS, CONV_VECS);
  for (; n + 2 * LANES <= N; n += 2 * LANES) conv_cols(W, X, Y, M, C, T, N, ldx, dilation, n, CONV_PAIR_ROWS, 2);
  for (; n + LANES <= N; n += LANES) conv_cols(W, X, Y, M, C, T, N, ldx, dilation, n, 8, 1);
  for (; n < N; n++) {
    for (int m = 0; m < M; m++) {
      const float *w = W + (long)m * C * T;
      float s = 0;
      for (int c = 0; c < C; c++)
        for (int j = 0; j < T; j++) s += w[c * T + j] * X[(long)c * ldx + n + j * dilation];
      Y[(long)m * N + n] = s;
    }
  }
  if (bias)
    for (int m = 0; m < M; m++) {
      float *y = Y + (long)m * N;
      vf b = splat(bias[m]);
      int i = 0;
      for (; i + LANES <= N; i += LANES) STORE(y + i, LOAD(y + i) + b);
      for (; i < N; i++) y[i] += bias[m];
    }
  RESTORE_DENORMALS();
}

// ---------------------------------------------------------------------------------------------
// Activations. exp(x) as 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2) / 2, e^r by the
// classic Cephes polynomial (within 2 ulp of the correctly rounded float).

static inline vf vexp(vf x) {
  x = blend(x < -87.3f, splat(-87.3f), x);  // below, e^x is no normal float (and e^x - 1 is -1 anyway)
  x = blend(x > 88.3f, splat(88.3f), x);
  vf shifter = splat(12582912.0f);      // 1.5 * 2^23: adding it rounds to an integer
  vf n = (x * 1.44269504088896341f + shifter) - shifter;
  vf r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 in two parts, for an exact product
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  vi bits = (__builtin_convertvector(n, vi) + 127) << 23;  // 2^n
  return p * (vf)bits;
}

static inline float sexp(float x) {
  vf v = vexp(splat(x));
  return v[0];
}

// ELU: max(x, e^min(x, 0) - 1), as ops.elu in NumPy.
EXPORT(pk_elu)
void pk_elu(const float *X, float *Y, int n) {
  FLUSH_DENORMALS();
  int i = 0;
  for (; i + LANES <= n; i += LANES) {
    vf x = LOAD(X + i);
    vf e = vexp(blend(x < 0, x, splat(0))) - 1.0f;
    STORE(Y + i, blend(x > e, x, e));
  }
  for (; i < n; i++) {
    float x = X[i], e = sexp(x < 0 ? x : 0) - 1.0f;
    Y[i] = x > e ? x : e;
  }
  RESTORE_DENORMALS();
}

// GELU with the tanh approximation: 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)),
// u = sqrt(2 / pi) (x + 0.044715 x^3).
EXPORT(pk_gelu_tanh)
void pk_gelu_tanh(const float *X, float *Y, int n) {
  FLUSH_DENORMALS();
  const float c = -2.0f * 0.7978845608028654f;
  int i = 0;
  for (; i + LANES <= n; i += LANES) {
    vf x = LOAD(X + i);
    STORE(Y + i, x / (1.0f + vexp(c * (x + 0.044715f * x * x * x))));
  }
  for (; i < n; i++) {
    float x = X[i];
    Y[i] = x / (1.0f + sexp(c * (x + 0.044715f * x * x * x)));
  }
  RESTORE_DENORMALS();
}

// ---------------------------------------------------------------------------------------------
// Normalisation and attention.

// LayerNorm over the last axis with the biased variance: each of `rows` rows of `cols` values,
// (x - mean) / sqrt(var + eps) * weight + bias (weight and bias may be 0: none).
EXPORT(pk_layer_norm)
void pk_layer_norm(const float *X, const float *weight, const float *bias, float *Y, int rows, int cols, float eps) {
  FLUSH_DENORMALS();
  int cv = cols - cols % LANES;
  for (int r = 0; r < rows; r++) {
    const float *x = X + (long)r * cols;
    float *y = Y + (long)r * cols;
    vf acc = {0};
    for (int i = 0; i < cv; i += LANES) acc += LOAD(x + i);
    float sum = hsum(acc);
    for (int i = cv; i < cols; i++) sum += x[i];
    float mean = sum / (float)cols;
    vf m = splat(mean), sq = {0};
    for (int i = 0; i < cv; i += LANES) {
      vf c = LOAD(x + i) - m;
      sq += c * c;
    }
    float squares = hsum(sq);
    for (int i = cv; i < cols; i++) squares += (x[i] - mean) * (x[i] - mean);
    float root = __builtin_sqrtf(squares / (float)cols + eps);
    vf s = splat(root);
    for (int i = 0; i < cv; i += LANES) {
      vf v = (LOAD(x + i) - m) / s;
      if (weight) v = v * LOAD(weight + i) + LOAD(bias + i);
      STORE(y + i, v);
    }
    for (int i = cv; i < cols; i++) {
      float v = (x[i] - mean) / root;
      y[i] = weight ? v * weight[i] + bias[i] : v;
    }
  }
  RESTORE_DENORMALS();
}

// The keys query t sees are [keys_from, keys_to): 0 <= lead + t - j, and < context where context > 0.
static inline int keys_from(int t, int lead, int context) {
  return context > 0 && lead + t - context + 1 > 0 ? lead + t - context + 1 : 0;
}

static inline int keys_to(int t, int lead, int L) { return lead + t + 1 < L ? lead + t + 1 : L; }

// The weighted sum of L value rows (v, D floats each, from row lo) into o: o = sum of p[j * step] v[j].
static inline void weighted_rows(const float *v, const float *p, int step, int lo, int hi, int D, float *o) {
  int dv = D - D % LANES, j = lo;
  for (int i = 0; i < D; i++) o[i] = 0;
  for (; j + 4 <= hi; j += 4) {  // four values at a time into the output row
    const float *v0 = v + (long)j * D, *v1 = v0 + D, *v2 = v1 + D, *v3 = v2 + D;
    float w0 = p[(long)j * step], w1 = p[(long)(j + 1) * step], w2 = p[(long)(j + 2) * step], w3 = p[(long)(j + 3) * step];
    vf p0 = splat(w0), p1 = splat(w1), p2 = splat(w2), p3 = splat(w3);
    for (int i = 0; i < dv; i += LANES)
      STORE(o + i, LOAD(o + i) + ((p0 * LOAD(v0 + i) + p1 * LOAD(v1 + i)) + (p2 * LOAD(v2 + i) + p3 * LOAD(v3 + i))));
    for (int i = dv; i < D; i++) o[i] += (w0 * v0[i] + w1 * v1[i]) + (w2 * v2[i] + w3 * v3[i]);
  }
  for (; j < hi; j++) {
    const float *v0 = v + (long)j * D;
    float w0 = p[(long)j * step];
    vf p0 = splat(w0);
    for (int i = 0; i < dv; i += LANES) STORE(o + i, LOAD(o + i) + p0 * LOAD(v0 + i));
    for (int i = dv; i < D; i++) o[i] += w0 * v0[i];
  }
}

// Key head g's queries (T of each of its `group` query heads) LANES at a time, a query per lane:
// their scaled values transposed (qt[d], a lane each), each key's scores for all of them in D
// multiply-adds with the key's values broadcast, and the softmax across keys a lane at a time (no
// sum across a vector's lanes, where a query alone took a dot product and a sum across lanes per
// key). The lanes' scores, key by key (s[j], [L] vectors), stay in the scratch for the weighted
// sums of the values. Query t of head h sees the keys [lo, hi) as in pk_attention.
static void attention_lanes(const float *Q, const float *k, const float *v, float *out, float *scratch, int T, int H,
                            int group, int g, int D, int L, int lead, int context, float scale) {
  // The scratch: each lane's first and last + 1 key (int32), the queries transposed, the scores
  // (lanes written through memory: a vector's lane at a variable index would put the vector on
  // WebAssembly's stack, which the module may not have).
  int32_t *bounds = (int32_t *)scratch;
  float *columns = scratch + 2 * LANES;
  vf *qt = (vf *)columns, *s = qt + D;
  for (int first = 0; first < T * group; first += LANES) {
    int n = T * group - first < LANES ? T * group - first : LANES;
    int from = L, to = 0;
    for (int l = 0; l < LANES; l++) {
      int t = (first + l) / group, bottom = 0, top = 0;
      if (l < n) {
        top = keys_to(t, lead, L);
        bottom = keys_from(t, lead, context);
        top = top > bottom ? top : bottom;
        from = bottom < from ? bottom : from;
        to = top > to ? top : to;
      }
      bounds[l] = bottom, bounds[LANES + l] = top;
    }
    vi lo = *(const vi *)bounds, hi = *(const vi *)(bounds + LANES);
    for (int l = 0; l < LANES; l++) {
      int i = first + l, h = g * group + i % group;
      const float *q = Q + ((long)(i / group) * H + h) * D;
      for (int d = 0; d < D; d++) columns[(long)d * LANES + l] = l < n ? q[d] * scale : 0;
    }
    vf top = splat(-3.402823466e38f), total = splat(0);
    int j = from;
    for (; j + 4 <= to; j += 4) {  // four keys at a time: eight independent multiply-add chains
      const float *k0 = k + (long)j * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
      vf a0 = splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      int d = 0;
      for (; d + 2 <= D; d += 2) {
        vf c = qt[d], e = qt[d + 1];
        a0 += splat(k0[d]) * c, b0 += splat(k0[d + 1]) * e;
        a1 += splat(k1[d]) * c, b1 += splat(k1[d + 1]) * e;
        a2 += splat(k2[d]) * c, b2 += splat(k2[d + 1]) * e;
        a3 += splat(k3[d]) * c, b3 += splat(k3[d + 1]) * e;
      }
      if (d < D) {
        vf c = qt[d];
        a0 += splat(k0[d]) * c, a1 += splat(k1[d]) * c, a2 += splat(k2[d]) * c, a3 += splat(k3[d]) * c;
      }
#define ATTENTION_SCORE(i, sum)                                      \
  do {                                                               \
    vi at_ = (vi){0} + (j + (i)), seen_ = (at_ >= lo) & (at_ < hi);  \
    vf score_ = blend(seen_, sum, splat(-3.402823466e38f));          \
    s[j + (i)] = score_;                                             \
    top = blend(score_ > top, score_, top);                          \
  } while (0)
      ATTENTION_SCORE(0, a0 + b0);
      ATTENTION_SCORE(1, a1 + b1);
      ATTENTION_SCORE(2, a2 + b2);
      ATTENTION_SCORE(3, a3 + b3);
    }
    for (; j < to; j++) {
      const float *key = k + (long)j * D;
      vf a0 = splat(0), b0 = a0;
      int d = 0;
      for (; d + 2 <= D; d += 2) {
        a0 += splat(key[d]) * qt[d];
        b0 += splat(key[d + 1]) * qt[d + 1];
      }
      if (d < D) a0 += splat(key[d]) * qt[d];
      ATTENTION_SCORE(0, a0 + b0);
    }
#undef ATTENTION_SCORE
    for (int j = from; j < to; j++) {
      vi at = (vi){0} + j, seen = (at >= lo) & (at < hi);
      vf e = blend(seen, vexp(s[j] - top), splat(0));
      s[j] = e;
      total += e;
    }
    vf none = splat(0);
    vf divisor = blend(total > none, total, splat(1));
    for (int j = from; j < to; j++) s[j] = s[j] / divisor;
    for (int l = 0; l < n; l++) {
      int i = first + l, h = g * group + i % group;
      weighted_rows(v, (const float *)s + l, LANES, bounds[l], bounds[LANES + l], D, out + ((long)(i / group) * H + h) * D);
    }
  }
}

// Causal attention of T queries (Q, out: [T, H, D]) over L keys and values ([H_kv, L, D] each,
// a key head every `kv_stride` floats; query head h reads key head h / (H / H_kv)). Query t sees
// the keys j with 0 <= lead + t - j (< context, when context > 0); `lead` is how far the first
// query is past the first key. Softmax in float32 as NumPy computes it: scores scaled, their
// maximum subtracted, exponentials divided by their sum, then the weighted sum of the values.
// Where a key head has ATTENTION_LANES queries or more (a prompt's, a decoder frame's), they go a
// vector's lanes at a time (attention_lanes), the scale applied to the queries first. scratch: the
// caller's float32 [(D + L + 2) * 16] (kernels.py's attention_scratch: 16 lanes at most).
#define ATTENTION_LANES 4
EXPORT(pk_attention)
void pk_attention(const float *Q, const float *K, const float *V, float *out, float *scores, int T, int H, int Hkv,
                  int D, int L, int kv_stride, int lead, int context, float scale) {
  FLUSH_DENORMALS();
  int group = H / Hkv;
  if (T * group >= ATTENTION_LANES) {
    for (int g = 0; g < Hkv; g++)
      attention_lanes(Q, K + (long)g * kv_stride, V + (long)g * kv_stride, out, scores, T, H, group, g, D, L, lead,
                      context, scale);
    RESTORE_DENORMALS();
    return;
  }
  for (int t = 0; t < T; t++) {
    int hi = keys_to(t, lead, L), lo = keys_from(t, lead, context);
    for (int h = 0; h < H; h++) {
      const float *q = Q + ((long)t * H + h) * D;
      const float *k = K + (long)(h / group) * kv_stride;
      const float *v = V + (long)(h / group) * kv_stride;
      float *o = out + ((long)t * H + h) * D;
      for (int i = 0; i < D; i++) o[i] = 0;
      if (hi <= lo) continue;
      float top = -3.402823466e38f;
      for (int j = lo; j < hi; j++) {
        float s = dot(q, k + (long)j * D, D) * scale;
        scores[j] = s;
        top = s > top ? s : top;
      }
      vf m = splat(top), total = {0};
      int j = lo;
      for (; j + LANES <= hi; j += LANES) {
        vf e = vexp(LOAD(scores + j) - m);
        STORE(scores + j, e);
        total += e;
      }
      float sum = hsum(total);
      for (; j < hi; j++) {
        float e = sexp(scores[j] - top);
        scores[j] = e;
        sum += e;
      }
      for (j = lo; j < hi; j++) scores[j] /= sum;
      weighted_rows(v, scores, 1, lo, hi, D, o);
    }
  }
  RESTORE_DENORMALS();
}
