// y = x @ W^T for W held in a GGUF's quantized blocks, read in place (no dequantized copy of W).
//
// matmul(x, blocks, qtype, K): x (M, K) bf16 or float32, contiguous; blocks (N, row_bytes) uint8: row n of W
//   as the file stores it (K / QK blocks of ggml's layout, ggml_blocks.h); qtype: ggml's type number (Q4_0 2,
//   Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14) -> (M, N) in x's dtype.
// Two products, chosen by x's dtype:
//   int8 (bf16 x, on a CPU with AVX512-VNNI): each row of x is quantized to int8 per 32 values (scale = the
//     block's largest |x| / 127, rounded to nearest even), as llama.cpp quantizes activations; a group's
//     integer dot q . xq (VNNI, 4 products per int32 lane) is scaled by a * xscale in float32, and the
//     groups' b terms are added as b * xscale * sum(xq).
//   float32 (float32 x, or no VNNI): each weight row is dequantized once into float32 (a * q + b) and dotted
//     with every row of x.
// Both keep, for each row of x, 16 float32 lanes over the whole of K, reduced in one fixed order at the end: a
// row's result depends on that row and W only, never on M or the rows beside it (batch-invariant).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ggml_blocks.h"

namespace {

using ggml_blocks::Type;

// One weight row unpacked (ggml_blocks.h), reused by a thread for every column it computes
struct RowScratch {
  std::vector<uint8_t> q;
  std::vector<float> a, b;
  explicit RowScratch(int64_t K) : q(K + 64), a(K / 16 + 16), b(K / 16 + 16) {}
  void unpack(const Type& t, const uint8_t* row, int64_t K) {
    ggml_blocks::unpack_row(t, row, K, q.data(), a.data(), b.data());
  }
};

// Weight rows are read kAhead columns ahead of their product: the prefetcher alone left the bus idle while a
// row's product ran (only its unpacking reads memory)
constexpr int64_t kAhead = 8;

inline void prefetch(const uint8_t* p, int64_t bytes) {
  for (int64_t at = 0; at < bytes; at += 64) _mm_prefetch((const char*)(p + at), _MM_HINT_T0);
}

// sum of b[g] * s[g] over G groups, 16 lanes then one fixed reduction
inline float group_terms(const float* b, const float* s, int64_t G) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; g += 16) {
    const __mmask16 m = G - g >= 16 ? 0xFFFF : (__mmask16)((1u << (G - g)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, b + g), _mm512_maskz_loadu_ps(m, s + g), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// ---- float32: W's row dequantized, dotted with each row of x ----

void float_columns(const Type& t, const uint8_t* w, int64_t row_bytes, int64_t lo, int64_t hi, const float* x,
                   int64_t M, int64_t K, float* y, int64_t N) {
  RowScratch row(K);
  std::vector<float> wf(K);
  for (int64_t n = lo; n < hi; ++n) {
    row.unpack(t, w + n * row_bytes, K);
    for (int64_t v = 0; v < K; v += 16) {
      const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(row.q.data() + v))));
      _mm512_storeu_ps(wf.data() + v, _mm512_fmadd_ps(_mm512_set1_ps(row.a[v / 16]), q, _mm512_set1_ps(row.b[v / 16])));
    }
    for (int64_t m = 0; m < M; ++m) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t v = 0; v < K; v += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(wf.data() + v), _mm512_loadu_ps(x + m * K + v), acc);
      y[m * N + n] = _mm512_reduce_add_ps(acc);
    }
  }
}

#ifdef __AVX512VNNI__
// ---- int8: x quantized per 32 values, VNNI integer dots ----

// x's rows as int8: q (M, K); scale (M, K / 4): each 32-value block's scale once per 4 values (one per int32
// lane of a VNNI product); sums (M, K / 16): scale * the sum of q over each 16 values (the b terms' factor)
struct Int8Rows {
  std::vector<int8_t> q;
  std::vector<float> scale, sums;
  int64_t K;
  Int8Rows(const float* x, int64_t M, int64_t K);
};

void quantize_block(const float* x, int8_t* q, float* scale, float* sums) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
  const float d = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
  const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(inv)));
  const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(inv)));
  _mm_storeu_si128((__m128i*)q, _mm512_cvtsepi32_epi8(qlo));
  _mm_storeu_si128((__m128i*)(q + 16), _mm512_cvtsepi32_epi8(qhi));
  for (int i = 0; i < 8; ++i) scale[i] = d;
  sums[0] = d * _mm512_reduce_add_epi32(qlo);
  sums[1] = d * _mm512_reduce_add_epi32(qhi);
}

Int8Rows::Int8Rows(const float* x, int64_t M, int64_t K) : q(M * K), scale(M * K / 4), sums(M * K / 16), K(K) {
  at::parallel_for(0, M, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t m = lo; m < hi; ++m)
      for (int64_t v = 0; v < K; v += 32)
        quantize_block(x + m * K + v, q.data() + m * K + v, scale.data() + (m * K + v) / 4,
                       sums.data() + (m * K + v) / 16);
  });
}

// One step of R rows: 64 values (`bytes` all set), or a last 32 (the low half); acc[r] += (q . xq) * a * xscale
template <int R>
inline void int8_step(const RowScratch& w, const Int8Rows& x, int64_t r0, int64_t K, int64_t v, __mmask64 bytes,
                      __mmask16 lanes, __m512* acc) {
  const __m512i lanes_of_group = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i wq = _mm512_maskz_loadu_epi8(bytes, w.q.data() + v);
  const __m512 a = _mm512_permutexvar_ps(lanes_of_group, _mm512_castps128_ps512(_mm_loadu_ps(w.a.data() + v / 16)));
  for (int r = 0; r < R; ++r) {
    const int64_t at = (r0 + r) * K + v;
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, _mm512_maskz_loadu_epi8(bytes, x.q.data() + at));
    const __m512 s = _mm512_mul_ps(a, _mm512_maskz_loadu_ps(lanes, x.scale.data() + at / 4));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s, acc[r]);
  }
}

// R rows of x against one unpacked weight row: each row's 16 lanes over K (64 values a step; a last step of 32).
// The sums stay in registers (a local array) until the end: summed through `out` they went through the stack
// at every step, a store-to-load chain that took 3x the step's arithmetic.
template <int R>
void int8_tile(const RowScratch& w, const Int8Rows& x, int64_t r0, int64_t K, __m512* out) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t v = 0;
  for (; v + 64 <= K; v += 64) int8_step<R>(w, x, r0, K, v, ~0ull, 0xFFFF, acc);
  if (v < K) int8_step<R>(w, x, r0, K, v, 0xFFFFFFFFull, 0x00FF, acc);
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

constexpr int kTile = 8;   // rows of x sharing each loaded weight step

void int8_rows(const RowScratch& w, const Int8Rows& x, int64_t r0, int rows, int64_t K, __m512* acc) {
  switch (rows) {
    case 1: return int8_tile<1>(w, x, r0, K, acc);
    case 2: return int8_tile<2>(w, x, r0, K, acc);
    case 3: return int8_tile<3>(w, x, r0, K, acc);
    case 4: return int8_tile<4>(w, x, r0, K, acc);
    case 5: return int8_tile<5>(w, x, r0, K, acc);
    case 6: return int8_tile<6>(w, x, r0, K, acc);
    case 7: return int8_tile<7>(w, x, r0, K, acc);
    default: return int8_tile<kTile>(w, x, r0, K, acc);
  }
}

void int8_columns(const Type& t, const uint8_t* w, int64_t row_bytes, int64_t lo, int64_t hi, const Int8Rows& x,
                  int64_t M, int64_t K, float* y, int64_t N) {
  RowScratch row(K);
  __m512 acc[kTile];
  for (int64_t n = lo; n < hi; ++n) {
    if (n + kAhead < hi) prefetch(w + (n + kAhead) * row_bytes, row_bytes);
    row.unpack(t, w + n * row_bytes, K);
    for (int64_t r0 = 0; r0 < M; r0 += kTile) {
      const int rows = (int)std::min<int64_t>(kTile, M - r0);
      int8_rows(row, x, r0, rows, K, acc);
      for (int r = 0; r < rows; ++r)
        y[(r0 + r) * N + n] =
            _mm512_reduce_add_ps(acc[r]) + group_terms(row.b.data(), x.sums.data() + (r0 + r) * K / 16, K / 16);
    }
  }
}
constexpr bool kInt8 = true;
#else
constexpr bool kInt8 = false;
#endif

Type checked(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  Type t;
  TORCH_CHECK(ggml_blocks::lookup(qtype, &t), "quant_matmul: ggml type ", qtype, " is not supported");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && K % t.qk == 0, "quant_matmul: x must be (M, K), K a multiple of ",
              t.qk);
  TORCH_CHECK(blocks.dtype() == torch::kUInt8 && blocks.dim() == 2 && blocks.size(1) == K / t.qk * t.bytes,
              "quant_matmul: blocks must be (N, K / QK * block bytes) uint8");
  return t;
}

torch::Tensor product(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K, bool int8) {
  const Type t = checked(x, blocks, qtype, K);
  const int64_t M = x.size(0), N = blocks.size(0), row_bytes = blocks.size(1);
  const torch::Tensor xf = x.to(torch::kFloat32).contiguous();
  auto out = torch::empty({M, N}, torch::kFloat32);
  const uint8_t* w = blocks.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  {
    pybind11::gil_scoped_release unlocked;
#ifdef __AVX512VNNI__
    if (int8) {
      const Int8Rows xq(xf.data_ptr<float>(), M, K);
      at::parallel_for(0, N, 8, [&](int64_t lo, int64_t hi) { int8_columns(t, w, row_bytes, lo, hi, xq, M, K, y, N); });
    } else
#endif
      at::parallel_for(0, N, 8, [&](int64_t lo, int64_t hi) {
        float_columns(t, w, row_bytes, lo, hi, xf.data_ptr<float>(), M, K, y, N);
      });
  }
  return x.scalar_type() == torch::kFloat32 ? out : out.to(x.scalar_type());
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  return product(x, blocks, qtype, K, kInt8 && x.scalar_type() != torch::kFloat32);
}

torch::Tensor matmul_path(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K,
                          const std::string& path) {
  TORCH_CHECK(path == "float32" || (path == "int8" && kInt8), "quant_matmul: no ", path, " product here");
  return product(x, blocks, qtype, K, path == "int8");
}

bool supported(int64_t qtype) {
  Type t;
  return ggml_blocks::lookup(qtype, &t);
}

torch::Tensor dequantize(const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  Type t;
  TORCH_CHECK(ggml_blocks::lookup(qtype, &t), "quant_matmul: ggml type ", qtype, " is not supported");
  const int64_t N = blocks.size(0);
  auto out = torch::empty({N, K}, torch::kFloat32);
  const uint8_t* w = blocks.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t lo, int64_t hi) {
    RowScratch row(K);
    for (int64_t n = lo; n < hi; ++n) {
      row.unpack(t, w + n * blocks.size(1), K);
      for (int64_t v = 0; v < K; ++v) y[n * K + v] = row.a[v / 16] * row.q[v] + row.b[v / 16];
    }
  });
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("supported", &supported, "whether this ggml type has a kernel");
  m.def("int8_available", [] { return kInt8; }, "whether the int8 (AVX512-VNNI) product was built");
  m.def("dequantize", &dequantize, "blocks (N, row bytes) -> W (N, K) float32 (the values a * q + b)");
  m.def("matmul", &matmul, "x (M, K) @ W^T for W in ggml blocks -> (M, N) in x's dtype: int8 for bf16 x",
        py::arg("x"), py::arg("blocks"), py::arg("qtype"), py::arg("K"));
  m.def("matmul_path", &matmul_path, "matmul with its product named: 'int8' or 'float32'", py::arg("x"),
        py::arg("blocks"), py::arg("qtype"), py::arg("K"), py::arg("path"));
}
