// Causal attention of one prefill chunk over Conch's slot KV store (engine/backends/conch/kv/slot_store.py),
// bf16, head_dim 64 or 128, in AVX512-BF16 registers: the path of a CPU without AMX (tile_attention.cpp is the
// AMX one). The layout, the checks, the task split and the bindings: attention_blocks.h.
//
// Why: SDPA's CPU flash kernel reaches ~75 GFLOP/s on these shapes, half of a long prefill. This one runs flash
// attention over blocks of 64 keys: S = Q K^T and O += P V as register tiles of dot products, an online softmax in
// float32 between.
//
// Blocked store (`blocked`): the store's (slot, kv head) regions already hold their keys and values in the packed
// layout (SlotKVStore's blocked layout, written by fused_ops.cpp's rope_store), so nothing is packed: the kernel
// reads a region in place. Keys and values past a row's position inside its last block are whatever the region
// holds there (zeros, or an earlier occupant's finite values): their probabilities are exactly 0.
#include "attention_blocks.h"

namespace {

using attention_blocks::first_live;
using attention_blocks::kKeys;
using attention_blocks::row_offset;
using attention_blocks::write_rows;

#ifdef CONCH_AVX512_BF16
constexpr bool kBuilt = true;
using attention_blocks::softmax_block;

inline __m512bh pair(const uint16_t* p) {            // two bf16 broadcast to every lane
  int32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return (__m512bh)_mm512_set1_epi32(bits);
}

// s[r][0..63] = q_r . k_j for ROWS query rows and one packed key block ([D/2][64][2]).
template <int ROWS, int D>
void scores(const uint16_t* const* q, const uint16_t* kp, float* s) {
  __m512 acc[ROWS][4];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int p = 0; p < D / 2; ++p) {
    __m512bh kv[4];
    for (int j = 0; j < 4; ++j) kv[j] = (__m512bh)_mm512_loadu_si512(kp + p * 2 * kKeys + 32 * j);
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh qb = pair(q[r] + 2 * p);
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], qb, kv[j]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(s + r * kKeys + 16 * j, acc[r][j]);
}

// o[r] = o[r] * corr[r] + p[r] V for ROWS rows of bf16 probabilities (row stride 64) and one packed value
// block ([32][D][2]).
template <int ROWS, int D>
void values(const uint16_t* p, const uint16_t* vp, const float* corr, float* o) {
  constexpr int NV = D / 16;
  __m512 acc[ROWS][NV];
  for (int r = 0; r < ROWS; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_mul_ps(_mm512_loadu_ps(o + r * D + 16 * j), c);
  }
  for (int kp = 0; kp < kKeys / 2; ++kp) {
    __m512bh vv[NV];
    for (int j = 0; j < NV; ++j) vv[j] = (__m512bh)_mm512_loadu_si512(vp + kp * 2 * D + 32 * j);
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh pb = pair(p + r * kKeys + 2 * kp);
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], pb, vv[j]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o + r * D + 16 * j, acc[r][j]);
}

// One task: up to kTokens query tokens (M = tokens x R rows) of kv head g against packed K/V blocks 0..last.
// noinline: prefill_attention and attention_rows run this one compiled copy (-ffast-math may compile two
// inlined copies to different instruction orders), so a row's bits never depend on which entry computed it.
template <int D>
__attribute__((noinline))
void attend_block(const uint16_t* q, int64_t q_stride, int64_t t0, int64_t tokens, int64_t g, int64_t R,
                  int64_t start, const uint16_t* kp, const uint16_t* vp, float scale, c10::BFloat16* out,
                  int64_t H) {
  constexpr int RS = 4;                                  // rows per score tile
  constexpr int RV = D == 64 ? 4 : 2;                    // rows per value tile (registers: RV x D/16 sums)
  const int64_t M = tokens * R;
  std::vector<const uint16_t*> rows(M + RS);
  std::vector<int64_t> position(M);
  for (int64_t m = 0; m < M; ++m) {
    rows[m] = q + row_offset(m, t0, q_stride, g, R, D);
    position[m] = start + t0 + m / R;
  }
  for (int64_t m = M; m < M + RS; ++m) rows[m] = rows[M - 1];
  std::vector<float> s((M + RS) * kKeys), o((M + RV) * D, 0.f), corr(M + RV, 1.f);
  std::vector<float> top(M, -std::numeric_limits<float>::infinity()), sum(M, 0.f);
  std::vector<uint16_t> p((M + RV) * kKeys, 0);
  const float log2e_scale = scale * 1.4426950408889634f;
  const int64_t blocks = position[M - 1] / kKeys + 1;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kKeys;
    const int64_t dead = first_live(position.data(), first);
    const uint16_t* kb = kp + b * kKeys * D;
    for (int64_t m = dead; m < M; m += RS) scores<RS, D>(rows.data() + m, kb, s.data() + m * kKeys);
    for (int64_t m = dead; m < M; ++m)
      softmax_block(s.data() + m * kKeys, position[m] - first + 1, log2e_scale, top[m], sum[m],
                    p.data() + m * kKeys, corr[m]);
    for (int64_t m = dead; m < M; m += RV)
      values<RV, D>(p.data() + m * kKeys, vp + b * kKeys * D, corr.data() + m, o.data() + m * D);
  }
  write_rows(o.data(), sum.data(), M, t0, g, R, H, D, out);
}
#else
constexpr bool kBuilt = false;
template <int D>
void attend_block(const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const uint16_t*,
                  const uint16_t*, float, c10::BFloat16*, int64_t) {}
#endif

struct Vector {
  static constexpr const char* kMissing = "built without AVX512-BF16";
  static bool available() { return kBuilt; }
  static void begin() {}
  static void end() {}
  static constexpr auto attend64 = &attend_block<64>;
  static constexpr auto attend128 = &attend_block<128>;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { attention_blocks::bind<Vector>(m); }
