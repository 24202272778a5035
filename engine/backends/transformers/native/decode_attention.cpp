// Decode attention over Conch's slot KV store (engine/backends/transformers/kv_store.py), bf16.
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

// One (row, kv head). buf holds R * len scores then R * D query and R * D accumulator floats.
void attend(const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t len, int64_t R, int64_t D,
            float scale, c10::BFloat16* out, float* buf) {
  float* scores = buf;
  float* qf = buf + R * len;
  float* acc = qf + R * D;
  for (int64_t i = 0; i < R * D; ++i) {
    qf[i] = bf16(q[i]) * scale;
    acc[i] = 0.f;
  }
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
  for (int64_t c = 0; c < len; ++c) {
    const uint16_t* vc = v + c * D;
    for (int64_t r = 0; r < R; ++r) {
      const float p = scores[r * len + c];
      float* ar = acc + r * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) ar[d] += p * bf16(vc[d]);
    }
  }
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention, "decode attention over the slot KV store (bf16)");
}
