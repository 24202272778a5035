// Causal attention of one prefill chunk over Conch's slot KV store (engine/backends/conch/kv/slot_store.py),
// bf16, head_dim 64 or 128, AVX512-BF16.
//
// q (n, H, D): the chunk's queries, tokens at positions start..start+n-1 (any token stride, heads contiguous).
// k, v (slots, G, capacity, D): one layer of the store; the chunk's own K/V are already written, so its slot
// holds columns 0..start+n-1. out (n, H, D) contiguous, written in place. Query head h reads kv head h / R,
// R = H / G (repeat_kv's grouping).
//
// Why: SDPA's CPU flash kernel reaches ~75 GFLOP/s on these shapes, half of a long prefill. This one packs each
// kv head's keys and values once per call into the pair-interleaved layout the bf16 dot-product instruction
// reads (K: [block][d pair][64 keys][2], V: [block][key pair][D][2]) and runs flash attention over blocks of
// 64 keys: S = Q K^T and O += P V as register tiles of dot products, an online softmax in float32 between.
//
// Blocked store (`blocked`): the store's (slot, kv head) regions already hold their keys and values in that
// layout (SlotKVStore's blocked layout, written by fused_ops.cpp's rope_store), so nothing is packed: the
// kernel reads a region in place. Keys and values past a row's position inside its last block are whatever
// the region holds there (zeros, or an earlier occupant's finite values): their probabilities are exactly 0.
//
// Exactness: every query row walks the same key blocks (absolute multiples of 64, from column 0) in the same
// order whatever the chunk it sits in; a block past a row's position leaves it bit for bit unchanged
// (probabilities exactly 0, correction exactly 1). So a prompt's rows come out the same whether it is
// prefilled whole, in chunks, or after a cached head; and a chunk's result never depends on the batch.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace {

constexpr int64_t kKeys = 64;       // keys per block: four 16-lane score vectors
constexpr int64_t kTokens = 16;     // query tokens per task at most (x R query rows)

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
constexpr bool kBuilt = true;

inline __m512bh pair(const uint16_t* p) {            // two bf16 broadcast to every lane
  int32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return (__m512bh)_mm512_set1_epi32(bits);
}

// 2^t for t <= 0 (to ~1e-7 relative): 2^n * p(f), n = round(t), f in [-0.5, 0.5], Taylor to degree 6.
// p(0) == 1 exactly, so a correction of 2^0 leaves a row unchanged.
inline __m512 exp2_ps(__m512 t) {
  t = _mm512_max_ps(t, _mm512_set1_ps(-126.f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.540353e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
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

// Online softmax of one row's block scores s[0..63]: keys past `valid` are masked. Updates the row's running
// max and sum, writes its bf16 probabilities and the correction for its accumulated output.
inline void softmax_block(const float* s, int64_t valid, float log2e_scale, float& top, float& sum,
                          uint16_t* p, float& corr) {
  if (valid <= 0) {                                      // the whole block is past this row: a no-op
    std::memset(p, 0, kKeys * sizeof(uint16_t));
    corr = 1.f;
    return;
  }
  __mmask16 mask[4];
  __m512 sv[4];
  __m512 hi = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int j = 0; j < 4; ++j) {
    const int64_t lanes = std::clamp<int64_t>(valid - 16 * j, 0, 16);
    mask[j] = static_cast<__mmask16>(lanes == 16 ? 0xFFFF : (1u << lanes) - 1);
    sv[j] = _mm512_loadu_ps(s + 16 * j);
    hi = _mm512_mask_max_ps(hi, mask[j], hi, sv[j]);
  }
  const float fresh = std::max(top, _mm512_reduce_max_ps(hi));
  corr = top == -std::numeric_limits<float>::infinity() ? 0.f
         : _mm512_cvtss_f32(exp2_ps(_mm512_set1_ps((top - fresh) * log2e_scale)));
  const __m512 shift = _mm512_set1_ps(fresh), c = _mm512_set1_ps(log2e_scale);
  __m512 total = _mm512_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    sv[j] = _mm512_maskz_mov_ps(mask[j], exp2_ps(_mm512_mul_ps(_mm512_sub_ps(sv[j], shift), c)));
    total = _mm512_add_ps(total, sv[j]);
  }
  sum = sum * corr + _mm512_reduce_add_ps(total);
  top = fresh;
  _mm512_storeu_si512(p, (__m512i)_mm512_cvtne2ps_pbh(sv[1], sv[0]));
  _mm512_storeu_si512(p + 32, (__m512i)_mm512_cvtne2ps_pbh(sv[3], sv[2]));
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
    const int64_t t = t0 + m / R;
    rows[m] = q + t * q_stride + (g * R + m % R) * D;
    position[m] = start + t;
  }
  for (int64_t m = M; m < M + RS; ++m) rows[m] = rows[M - 1];
  std::vector<float> s((M + RS) * kKeys), o((M + RV) * D, 0.f), corr(M + RV, 1.f);
  std::vector<float> top(M, -std::numeric_limits<float>::infinity()), sum(M, 0.f);
  std::vector<uint16_t> p((M + RV) * kKeys, 0);
  const float log2e_scale = scale * 1.4426950408889634f;
  const int64_t blocks = position[M - 1] / kKeys + 1;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kKeys;
    int64_t dead = 0;                                    // rows 0..dead-1 sit before this block (positions rise)
    while (position[dead] < first) ++dead;               // the last row's position is in it, so dead < M
    const uint16_t* kb = kp + b * kKeys * D;
    for (int64_t m = dead; m < M; m += RS) scores<RS, D>(rows.data() + m, kb, s.data() + m * kKeys);
    for (int64_t m = dead; m < M; ++m)
      softmax_block(s.data() + m * kKeys, position[m] - first + 1, log2e_scale, top[m], sum[m],
                    p.data() + m * kKeys, corr[m]);
    for (int64_t m = dead; m < M; m += RV)
      values<RV, D>(p.data() + m * kKeys, vp + b * kKeys * D, corr.data() + m, o.data() + m * D);
  }
  for (int64_t m = 0; m < M; ++m) {
    const int64_t t = t0 + m / R;
    c10::BFloat16* dst = out + t * H * D + (g * R + m % R) * D;
    const float inv = 1.f / sum[m];
    for (int64_t d = 0; d < D; ++d) dst[d] = c10::BFloat16(o[m * D + d] * inv);
  }
}
#else
constexpr bool kBuilt = false;
template <int D>
void attend_block(const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const uint16_t*,
                  const uint16_t*, float, c10::BFloat16*, int64_t) {}
#endif

// Keys from..end-1 of one (slot, kv head), rows of D, into [block][D/2][64][2], one key at a time.
void pack_keys_scalar(const uint16_t* k, int64_t from, int64_t end, int64_t D, uint16_t* kp) {
  for (int64_t c = from; c < end; ++c) {
    uint16_t* dst = kp + (c / kKeys) * kKeys * D + (c % kKeys) * 2;
    for (int64_t p = 0; p < D / 2; ++p) std::memcpy(dst + p * 2 * kKeys, k + c * D + 2 * p, 2 * sizeof(uint16_t));
  }
}

// Keys 0..end-1 into [block][D/2][64][2]; keys past end are zero. Sixteen keys at a time: one gather of
// their d pair p is one 16-lane row of the packed block.
void pack_keys(const uint16_t* k, int64_t end, int64_t D, uint16_t* kp) {
  const int64_t blocks = (end + kKeys - 1) / kKeys;
  std::memset(kp + (blocks - 1) * kKeys * D, 0, kKeys * D * sizeof(uint16_t));     // the last block's padding
  int64_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int>(D / 2)));
  for (; c + 16 <= end; c += 16) {
    const int* base = reinterpret_cast<const int*>(k + c * D);
    uint16_t* dst = kp + (c / kKeys) * kKeys * D + (c % kKeys) * 2;
    for (int64_t p = 0; p < D / 2; ++p)
      _mm512_storeu_si512(dst + p * 2 * kKeys, _mm512_i32gather_epi32(rows, base + p, 4));
  }
#endif
  pack_keys_scalar(k, c, end, D, kp);
}

// Values 0..end-1 into [block][32 key pairs][D][2]; keys past end are zero (never garbage: 0 x NaN is NaN).
// Two value rows at a time, interleaved 32 columns per instruction pair.
void pack_values(const uint16_t* v, int64_t end, int64_t D, uint16_t* vp) {
  const int64_t blocks = (end + kKeys - 1) / kKeys;
  std::memset(vp + (blocks - 1) * kKeys * D, 0, kKeys * D * sizeof(uint16_t));
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  alignas(64) int16_t lo[32], hi[32];                    // (row c, row c + 1) pairs of columns 0-15 | 16-31
  for (int i = 0; i < 16; ++i) {
    lo[2 * i] = static_cast<int16_t>(i), lo[2 * i + 1] = static_cast<int16_t>(32 + i);
    hi[2 * i] = static_cast<int16_t>(16 + i), hi[2 * i + 1] = static_cast<int16_t>(48 + i);
  }
  const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
  for (int64_t c = 0; c < end; c += 2) {
    uint16_t* dst = vp + (c / kKeys) * kKeys * D + ((c % kKeys) / 2) * 2 * D;
    for (int64_t g = 0; g < D / 32; ++g) {
      const __m512i a = _mm512_loadu_si512(v + c * D + 32 * g);
      const __m512i b = c + 1 < end ? _mm512_loadu_si512(v + (c + 1) * D + 32 * g) : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + 64 * g, _mm512_permutex2var_epi16(a, ilo, b));
      _mm512_storeu_si512(dst + 64 * g + 32, _mm512_permutex2var_epi16(a, ihi, b));
    }
  }
#else
  for (int64_t c = 0; c < end; ++c) {
    uint16_t* dst = vp + (c / kKeys) * kKeys * D + ((c % kKeys) / 2) * 2 * D + (c % 2);
    for (int64_t d = 0; d < D; ++d) dst[2 * d] = v[c * D + d];
  }
#endif
}

}  // namespace

bool available() { return kBuilt; }

void prefill_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t slot,
                       int64_t start, double scale, torch::Tensor& out, bool blocked) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 4 && v.sizes() == k.sizes() && out.sizes() == q.sizes(),
              "q and out (n, H, D), k and v (S, G, C, D)");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && k.scalar_type() == at::kBFloat16 &&
              v.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16, "bf16 only");
  TORCH_CHECK(q.stride(2) == 1 && q.stride(1) == q.size(2), "q's heads must be contiguous");
  TORCH_CHECK(k.is_contiguous() && v.is_contiguous() && out.is_contiguous(), "contiguous store and out");
  const int64_t n = q.size(0), H = q.size(1), D = q.size(2), G = k.size(1), C = k.size(2);
  TORCH_CHECK(D == 64 || D == 128, "head_dim 64 or 128");
  TORCH_CHECK(k.size(3) == D && H % G == 0, "q and the store disagree on D or the head grouping");
  TORCH_CHECK(slot >= 0 && slot < k.size(0) && start >= 0 && n >= 1 && start + n <= C, "slot or span out of range");
  TORCH_CHECK(!blocked || C % kKeys == 0, "a blocked store's capacity is a multiple of 64");
  const int64_t R = H / G, end = start + n, blocks = (end + kKeys - 1) / kKeys;
  const auto* kd = reinterpret_cast<const uint16_t*>(k.data_ptr<at::BFloat16>());
  const auto* vd = reinterpret_cast<const uint16_t*>(v.data_ptr<at::BFloat16>());
  // blocked: the store's (slot, kv head) regions are already in the packed layout, read in place (stride C D)
  const int64_t packed = blocked ? C * D : blocks * kKeys * D;             // per kv head
  std::unique_ptr<uint16_t[]> kbuf, vbuf;
  const uint16_t* kp = kd + slot * G * C * D;
  const uint16_t* vp = vd + slot * G * C * D;
  if (!blocked) {
    // uninitialized: packing writes every element (keys past `end` as zeros), so no memset of ~1 MB a call
    kbuf.reset(new uint16_t[G * packed]);
    vbuf.reset(new uint16_t[G * packed]);
    at::parallel_for(0, 2 * G, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t g = i / 2, base = (slot * G + g) * C * D;
        if (i % 2 == 0) pack_keys(kd + base, end, D, kbuf.get() + g * packed);
        else pack_values(vd + base, end, D, vbuf.get() + g * packed);
      }
    });
    kp = kbuf.get();
    vp = vbuf.get();
  }
  const auto* qd = reinterpret_cast<const uint16_t*>(q.data_ptr<at::BFloat16>());
  auto* od = reinterpret_cast<c10::BFloat16*>(out.data_ptr<at::BFloat16>());
  // a short chunk is split in two halves, so both threads work on it (a row's result does not depend on its task)
  const int64_t per_task = std::min(kTokens, (n + 1) / 2);
  const int64_t tasks = (n + per_task - 1) / per_task;
  const float s = static_cast<float>(scale);
  // task order pairs cheap (early) and dear (late) token blocks, so the threads' contiguous ranges cost alike
  at::parallel_for(0, G * tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t g = i % G, j = i / G;
      const int64_t block = j % 2 == 0 ? j / 2 : tasks - 1 - j / 2;
      const int64_t t0 = block * per_task, tokens = std::min(per_task, n - t0);
      const uint16_t* kg = kp + g * packed;
      const uint16_t* vg = vp + g * packed;
      if (D == 64) attend_block<64>(qd, q.stride(0), t0, tokens, g, R, start, kg, vg, s, od, H);
      else attend_block<128>(qd, q.stride(0), t0, tokens, g, R, start, kg, vg, s, od, H);
    }
  });
}

// Rows of one token each (decode rows), batched: row n is the token at position positions[n] of slot slots[n],
// over that slot's columns 0..positions[n] (its own K/V already written). q and out (N, H, D) as above. Each
// (row, kv head) packs its slot's keys and values and runs the very arithmetic prefill_attention runs for that
// token in a chunk: a token's attention output is the same whatever span, step or batch computes it.
void attention_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const torch::Tensor& slots, const torch::Tensor& positions, double scale, torch::Tensor& out,
                    bool blocked) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 4 && v.sizes() == k.sizes() && out.sizes() == q.sizes(),
              "q and out (N, H, D), k and v (S, G, C, D)");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && k.scalar_type() == at::kBFloat16 &&
              v.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16, "bf16 only");
  TORCH_CHECK(q.stride(2) == 1 && q.stride(1) == q.size(2), "q's heads must be contiguous");
  TORCH_CHECK(k.is_contiguous() && v.is_contiguous() && out.is_contiguous(), "contiguous store and out");
  const int64_t N = q.size(0), H = q.size(1), D = q.size(2), G = k.size(1), C = k.size(2);
  TORCH_CHECK(D == 64 || D == 128, "head_dim 64 or 128");
  TORCH_CHECK(k.size(3) == D && H % G == 0, "q and the store disagree on D or the head grouping");
  TORCH_CHECK(slots.scalar_type() == at::kLong && positions.scalar_type() == at::kLong &&
              slots.numel() == N && positions.numel() == N, "slots and positions: (N,) int64");
  auto slot_c = slots.contiguous();
  auto pos_c = positions.contiguous();
  const int64_t* sp = slot_c.data_ptr<int64_t>();
  const int64_t* pp = pos_c.data_ptr<int64_t>();
  int64_t longest = 1;
  for (int64_t n = 0; n < N; ++n) {
    TORCH_CHECK(sp[n] >= 0 && sp[n] < k.size(0) && pp[n] >= 0 && pp[n] < C, "a row's slot or position is out of range");
    longest = std::max(longest, pp[n] + 1);
  }
  const int64_t R = H / G, packed = (longest + kKeys - 1) / kKeys * kKeys * D;
  const auto* qd = reinterpret_cast<const uint16_t*>(q.data_ptr<at::BFloat16>());
  const auto* kd = reinterpret_cast<const uint16_t*>(k.data_ptr<at::BFloat16>());
  const auto* vd = reinterpret_cast<const uint16_t*>(v.data_ptr<at::BFloat16>());
  auto* od = reinterpret_cast<c10::BFloat16*>(out.data_ptr<at::BFloat16>());
  const float s = static_cast<float>(scale);
  TORCH_CHECK(!blocked || C % kKeys == 0, "a blocked store's capacity is a multiple of 64");
  at::parallel_for(0, N * G, 1, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<uint16_t[]> kbuf(blocked ? nullptr : new uint16_t[packed]);
    std::unique_ptr<uint16_t[]> vbuf(blocked ? nullptr : new uint16_t[packed]);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t n = i / G, g = i % G, end = pp[n] + 1, base = (sp[n] * G + g) * C * D;
      const uint16_t* kp = kd + base;                    // blocked: read in place
      const uint16_t* vp = vd + base;
      if (!blocked) {
        pack_keys(kd + base, end, D, kbuf.get());
        pack_values(vd + base, end, D, vbuf.get());
        kp = kbuf.get();
        vp = vbuf.get();
      }
      const uint16_t* qn = qd + n * q.stride(0);
      if (D == 64) attend_block<64>(qn, 0, 0, 1, g, R, pp[n], kp, vp, s, od + n * H * D, H);
      else attend_block<128>(qn, 0, 0, 1, g, R, pp[n], kp, vp, s, od + n * H * D, H);
    }
  });
}

// The kernel runs without the GIL (they touch no Python object): the server's event loop and its worker
// threads keep serving requests while a step computes.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("available", &available, "whether this build has the AVX512-BF16 path");
  m.def("prefill_attention", &prefill_attention, "causal attention of a prefill chunk over the slot KV store (bf16)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("slot"), py::arg("start"), py::arg("scale"), py::arg("out"),
        py::arg("blocked") = false, py::call_guard<py::gil_scoped_release>());
  m.def("attention_rows", &attention_rows, "one-token rows over their slots, prefill_attention's arithmetic (bf16)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("slots"), py::arg("positions"), py::arg("scale"),
        py::arg("out"), py::arg("blocked") = false, py::call_guard<py::gil_scoped_release>());
}
