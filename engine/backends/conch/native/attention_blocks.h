// What the two prefill-attention kernels share (prefill_attention.cpp: AVX512-BF16 registers;
// tile_attention.cpp: AMX tiles): the blocked key/value layout and its packing, the online softmax of a block, the
// argument checks, the task split of a chunk and of decode rows, and the Python bindings. Each kernel brings
// `attend<D>`, the arithmetic of one task (up to kTokens query tokens of one kv head against key blocks
// 0..last), and `begin`/`end` around a thread's tasks.
//
// A Kernel is a struct with:
//   static bool available();                  whether this build and process can run it
//   static constexpr const char* kMissing;    the error when it cannot
//   static void begin(); static void end();   around one thread's run of tasks
//   static constexpr attend64, attend128: its attend<D> for D = 64, 128, as function pointers taking
//     (q, q_stride, t0, tokens, g, R, start, kp, vp, scale, out, H)
// Each `attend` is one compiled copy (noinline) called by both entries, so a row's bits never depend on which
// entry computed it.
//
// Layout: q (n, H, D): tokens at positions start..start+n-1 (any token stride, heads contiguous); query head h
// reads kv head h / R, R = H / G. k, v (slots, G, capacity, D): one layer of the store. Packed (and the blocked
// store's regions): K [block][D/2][64 keys][2], V [block][32 key pairs][D][2] -- the pair-interleaved layout both
// the bf16 dot-product instruction and an AMX B tile read.
//
// Exactness (both kernels): every query row walks the same key blocks (absolute multiples of 64, from column 0)
// in the same order whatever the chunk it sits in; a block past a row's position leaves it bit for bit unchanged
// (probabilities exactly 0, correction exactly 1). So a prompt's rows come out the same whether it is prefilled
// whole, in chunks, or after a cached head; and a chunk's result never depends on the batch.
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "vector_exp.h"

namespace attention_blocks {

constexpr int64_t kKeys = 64;       // keys per block: four 16-lane score vectors
constexpr int64_t kTokens = 16;     // query tokens per task at most (x R query rows)

#ifdef CONCH_AVX512_BF16
using vector_exp::exp2_ps;

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

#endif

// Keys from..end-1 of one (slot, kv head), rows of D, into [block][D/2][64][2], one key at a time.
inline void pack_keys_scalar(const uint16_t* k, int64_t from, int64_t end, int64_t D, uint16_t* kp) {
  for (int64_t c = from; c < end; ++c) {
    uint16_t* dst = kp + (c / kKeys) * kKeys * D + (c % kKeys) * 2;
    for (int64_t p = 0; p < D / 2; ++p) std::memcpy(dst + p * 2 * kKeys, k + c * D + 2 * p, 2 * sizeof(uint16_t));
  }
}

// Keys 0..end-1 into [block][D/2][64][2]; keys past end are zero. Sixteen keys at a time: one gather of
// their d pair p is one 16-lane row of the packed block.
inline void pack_keys(const uint16_t* k, int64_t end, int64_t D, uint16_t* kp) {
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
inline void pack_values(const uint16_t* v, int64_t end, int64_t D, uint16_t* vp) {
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

// The checks both entries make of the query rows, the store and the output (the span or rows: each entry's own).
inline void check_store(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& out, bool blocked) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 4 && v.sizes() == k.sizes() && out.sizes() == q.sizes(),
              "q and out (rows, H, D), k and v (S, G, C, D)");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && k.scalar_type() == at::kBFloat16 &&
              v.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16, "bf16 only");
  TORCH_CHECK(q.stride(2) == 1 && q.stride(1) == q.size(2), "q's heads must be contiguous");
  TORCH_CHECK(k.is_contiguous() && v.is_contiguous() && out.is_contiguous(), "contiguous store and out");
  TORCH_CHECK(q.size(2) == 64 || q.size(2) == 128, "head_dim 64 or 128");
  TORCH_CHECK(k.size(3) == q.size(2) && q.size(1) % k.size(1) == 0,
              "q and the store disagree on D or the head grouping");
  TORCH_CHECK(!blocked || k.size(2) % kKeys == 0, "a blocked store's capacity is a multiple of 64");
}

// A task's query row m (its token t0 + m / R, its head g R + m % R) in a (tokens, H, D) tensor whose tokens lie
// `stride` elements apart: the offset of its D values.
inline int64_t row_offset(int64_t m, int64_t t0, int64_t stride, int64_t g, int64_t R, int64_t D) {
  return (t0 + m / R) * stride + (g * R + m % R) * D;
}

// The first of a task's rows whose position is in key block `first` / kKeys or later (rows before it have no key
// there; positions rise, and the last row's is in the block).
inline int64_t first_live(const int64_t* position, int64_t first) {
  int64_t m = 0;
  while (position[m] < first) ++m;
  return m;
}

// out's rows of a task = its M float32 output rows o (row stride D) / their softmax sums, rounded to bf16.
inline void write_rows(const float* o, const float* sum, int64_t M, int64_t t0, int64_t g, int64_t R, int64_t H,
                       int64_t D, c10::BFloat16* out) {
  for (int64_t m = 0; m < M; ++m) {
    c10::BFloat16* dst = out + row_offset(m, t0, H * D, g, R, D);
    const float inv = 1.f / sum[m];
    for (int64_t d = 0; d < D; ++d) dst[d] = c10::BFloat16(o[m * D + d] * inv);
  }
}

template <class Kernel>
void prefill_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t slot,
                       int64_t start, double scale, torch::Tensor& out, bool blocked) {
  TORCH_CHECK(Kernel::available(), Kernel::kMissing);
  check_store(q, k, v, out, blocked);
  const int64_t n = q.size(0), H = q.size(1), D = q.size(2), G = k.size(1), C = k.size(2);
  TORCH_CHECK(slot >= 0 && slot < k.size(0) && start >= 0 && n >= 1 && start + n <= C, "slot or span out of range");
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
  const auto attend = D == 64 ? Kernel::attend64 : Kernel::attend128;
  // task order pairs cheap (early) and dear (late) token blocks, so the threads' contiguous ranges cost alike
  at::parallel_for(0, G * tasks, 1, [&](int64_t lo, int64_t hi) {
    Kernel::begin();
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t g = i % G, j = i / G;
      const int64_t block = j % 2 == 0 ? j / 2 : tasks - 1 - j / 2;
      const int64_t t0 = block * per_task, tokens = std::min(per_task, n - t0);
      const uint16_t* kg = kp + g * packed;
      const uint16_t* vg = vp + g * packed;
      attend(qd, q.stride(0), t0, tokens, g, R, start, kg, vg, s, od, H);
    }
    Kernel::end();
  });
}

// Rows of one token each (decode rows), batched: row n is the token at position positions[n] of slot slots[n],
// over that slot's columns 0..positions[n] (its own K/V already written). q and out (N, H, D) as above. Each
// (row, kv head) packs its slot's keys and values and runs the very arithmetic prefill_attention runs for that
// token in a chunk: a token's attention output is the same whatever span, step or batch computes it.
template <class Kernel>
void attention_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const torch::Tensor& slots, const torch::Tensor& positions, double scale, torch::Tensor& out,
                    bool blocked) {
  TORCH_CHECK(Kernel::available(), Kernel::kMissing);
  check_store(q, k, v, out, blocked);
  const int64_t N = q.size(0), H = q.size(1), D = q.size(2), G = k.size(1), C = k.size(2);
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
  const auto attend = D == 64 ? Kernel::attend64 : Kernel::attend128;
  at::parallel_for(0, N * G, 1, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<uint16_t[]> kbuf(blocked ? nullptr : new uint16_t[packed]);
    std::unique_ptr<uint16_t[]> vbuf(blocked ? nullptr : new uint16_t[packed]);
    Kernel::begin();
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
      attend(qn, 0, 0, 1, g, R, pp[n], kp, vp, s, od + n * H * D, H);
    }
    Kernel::end();
  });
}

// Both entries run without the GIL (they touch no Python object): the server's event loop and its worker
// threads keep serving requests while a step computes.
template <class Kernel>
void bind(py::module_& m) {
  m.def("available", &Kernel::available, "whether this build and process can run this kernel");
  m.def("prefill_attention", &prefill_attention<Kernel>, "causal attention of a prefill chunk over the slot KV store (bf16)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("slot"), py::arg("start"), py::arg("scale"), py::arg("out"),
        py::arg("blocked") = false, py::call_guard<py::gil_scoped_release>());
  m.def("attention_rows", &attention_rows<Kernel>, "one-token rows over their slots, prefill_attention's arithmetic (bf16)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("slots"), py::arg("positions"), py::arg("scale"),
        py::arg("out"), py::arg("blocked") = false, py::call_guard<py::gil_scoped_release>());
}

}  // namespace attention_blocks
