// Decode attention over Conch's slot KV store (engine/backends/conch/kv/slot_store.py), bf16.
//
// q (N, G, R, D): N decode rows, G kv heads, R = heads / G query heads per kv head, D head_dim.
// k, v (slots, G, capacity, D): one layer of the store. Row n attends to columns 0..lengths[n]-1 of slot
// slots[n]. Returns (N, G, R, D) bf16.
//
// Why: SDPA's CPU kernel reads a decode step's KV at ~5 GB/s here (it packs blocks for GEMMs of 1-3 rows);
// this reads each key and value row once per (row, kv head) for its R queries, in float32, so a step at long
// contexts runs near memory bandwidth. Each (row, kv head) is computed alone, in the same order whatever
// else is in the batch: a row's output does not depend on its batch.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

inline float bf16(uint16_t x) {
  uint32_t bits = static_cast<uint32_t>(x) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
constexpr bool kVector = true;

// 16 bf16 -> 16 float32.
inline __m512 load16(const uint16_t* p) {
  __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

// scores[r * len + c] = q_r . k_c for D == 64: bf16 pair dot-product instructions (float32 sums), per (key, row).
void scores_64(const uint16_t* q, const uint16_t* k, int64_t len, int64_t R, float scale, float* scores) {
  __m512bh qv[8][2];                                   // 64 bf16 = two registers of 32
  for (int64_t r = 0; r < R; ++r) {
    qv[r][0] = (__m512bh)_mm512_loadu_si512(q + r * 64);
    qv[r][1] = (__m512bh)_mm512_loadu_si512(q + r * 64 + 32);
  }
  for (int64_t c = 0; c < len; ++c) {
    const __m512bh k0 = (__m512bh)_mm512_loadu_si512(k + c * 64);
    const __m512bh k1 = (__m512bh)_mm512_loadu_si512(k + c * 64 + 32);
    for (int64_t r = 0; r < R; ++r) {
      const __m512 dot = _mm512_dpbf16_ps(_mm512_dpbf16_ps(_mm512_setzero_ps(), qv[r][0], k0), qv[r][1], k1);
      scores[r * len + c] = scale * _mm512_reduce_add_ps(dot);
    }
  }
}

// acc_r += sum_c p[r, c] v_c for D == 64: each value row converted once for the R rows.
void values_64(const float* p, const uint16_t* v, int64_t len, int64_t R, float* acc) {
  __m512 a[8][4];
  for (int64_t r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) a[r][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < len; ++c) {
    const __m512 v0 = load16(v + c * 64), v1 = load16(v + c * 64 + 16), v2 = load16(v + c * 64 + 32),
                 v3 = load16(v + c * 64 + 48);
    for (int64_t r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(p[r * len + c]);
      a[r][0] = _mm512_fmadd_ps(w, v0, a[r][0]);
      a[r][1] = _mm512_fmadd_ps(w, v1, a[r][1]);
      a[r][2] = _mm512_fmadd_ps(w, v2, a[r][2]);
      a[r][3] = _mm512_fmadd_ps(w, v3, a[r][3]);
    }
  }
  for (int64_t r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + r * 64 + 16 * j, a[r][j]);
}
#else
constexpr bool kVector = false;
void scores_64(const uint16_t*, const uint16_t*, int64_t, int64_t, float, float*) {}
void values_64(const float*, const uint16_t*, int64_t, int64_t, float*) {}
#endif

// Any D, any R: plain loops the compiler vectorizes.
void scores_any(const uint16_t* q, const uint16_t* k, int64_t len, int64_t R, int64_t D, float scale,
                float* scores, float* qf) {
  for (int64_t i = 0; i < R * D; ++i) qf[i] = bf16(q[i]) * scale;
  for (int64_t c = 0; c < len; ++c) {
    const uint16_t* kc = k + c * D;
    for (int64_t r = 0; r < R; ++r) {
      const float* qr = qf + r * D;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t d = 0; d < D; ++d) s += qr[d] * bf16(kc[d]);
      scores[r * len + c] = s;
    }
  }
}

void values_any(const float* p, const uint16_t* v, int64_t len, int64_t R, int64_t D, float* acc) {
  for (int64_t i = 0; i < R * D; ++i) acc[i] = 0.f;
  for (int64_t c = 0; c < len; ++c) {
    const uint16_t* vc = v + c * D;
    for (int64_t r = 0; r < R; ++r) {
      const float w = p[r * len + c];
      float* ar = acc + r * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) ar[d] += w * bf16(vc[d]);
    }
  }
}

void softmax_rows(float* scores, int64_t len, int64_t R) {
  for (int64_t r = 0; r < R; ++r) {
    float* sr = scores + r * len;
    float top = sr[0];
    for (int64_t c = 1; c < len; ++c) top = std::max(top, sr[c]);
    float sum = 0.f;
    for (int64_t c = 0; c < len; ++c) {
      sr[c] = std::exp(sr[c] - top);
      sum += sr[c];
    }
    const float inv = 1.f / sum;
    for (int64_t c = 0; c < len; ++c) sr[c] *= inv;
  }
}

// One (row, kv head). buf holds R * len scores then R * D query and R * D accumulator floats.
void attend(const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t len, int64_t R, int64_t D,
            float scale, c10::BFloat16* out, float* buf) {
  float* scores = buf;
  float* qf = buf + R * len;
  float* acc = qf + R * D;
  const bool vector = kVector && D == 64 && R <= 8;
  if (vector) scores_64(q, k, len, R, scale, scores);
  else scores_any(q, k, len, R, D, scale, scores, qf);
  softmax_rows(scores, len, R);
  if (vector) values_64(scores, v, len, R, acc);
  else values_any(scores, v, len, R, D, acc);
  for (int64_t i = 0; i < R * D; ++i) out[i] = c10::BFloat16(acc[i]);
}

}  // namespace

torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& slots, const torch::Tensor& lengths, double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes(), "q (N, G, R, D), k and v (S, G, C, D)");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && k.scalar_type() == at::kBFloat16 &&
              v.scalar_type() == at::kBFloat16, "bf16 only");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(q.size(1) == k.size(1) && q.size(3) == k.size(3), "q and the store disagree on G or D");
  TORCH_CHECK(slots.scalar_type() == at::kLong && lengths.scalar_type() == at::kLong &&
              slots.numel() == q.size(0) && lengths.numel() == q.size(0), "slots and lengths: (N,) int64");
  const int64_t N = q.size(0), G = q.size(1), R = q.size(2), D = q.size(3);
  const int64_t S = k.size(0), C = k.size(2);
  auto slot_c = slots.contiguous();
  auto len_c = lengths.contiguous();
  const int64_t* sp = slot_c.data_ptr<int64_t>();
  const int64_t* lp = len_c.data_ptr<int64_t>();
  int64_t longest = 1;
  for (int64_t n = 0; n < N; ++n) {
    TORCH_CHECK(sp[n] >= 0 && sp[n] < S && lp[n] >= 1 && lp[n] <= C, "a row's slot or length is out of range");
    longest = std::max(longest, lp[n]);
  }
  auto out = torch::empty_like(q);
  const auto* qp = reinterpret_cast<const uint16_t*>(q.data_ptr<at::BFloat16>());
  const auto* kp = reinterpret_cast<const uint16_t*>(k.data_ptr<at::BFloat16>());
  const auto* vp = reinterpret_cast<const uint16_t*>(v.data_ptr<at::BFloat16>());
  auto* op = reinterpret_cast<c10::BFloat16*>(out.data_ptr<at::BFloat16>());
  const float s = static_cast<float>(scale);
  at::parallel_for(0, N * G, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(R * longest + 2 * R * D);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / G, g = i % G;
      const int64_t base = (sp[n] * G + g) * C * D;
      attend(qp + i * R * D, kp + base, vp + base, lp[n], R, D, s, op + i * R * D, buf.data());
    }
  });
  return out;
}

// The kernel runs without the GIL (they touch no Python object): the server's event loop and its worker
// threads keep serving requests while a step computes.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention, "decode attention over the slot KV store (bf16)",
        py::call_guard<py::gil_scoped_release>());
}
