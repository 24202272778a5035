// y = x @ W^T for W held in a GGUF's quantized blocks, read in place (no dequantized copy of W).
//
// matmul(x, blocks, qtype, K): x (M, K) bf16 or float32, contiguous; blocks (N, row_bytes) uint8: row n of W
//   as the file stores it (K / QK blocks of ggml's layout, ggml_blocks.h); qtype: ggml's type number (Q4_0 2,
//   Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14) -> (M, N) in x's dtype.
// Two products, chosen by x's dtype (matmul_path names one: 'float32', 'vnni', 'amx'):
//   int8 (bf16 x, on a CPU with AVX512-VNNI): x's rows rounded to int8 per 32 values (256 against K-quants),
//     as llama.cpp rounds activations; each group's dot exact in int32, then scaled in float32 group by group
//     (quant_panels.h).
//     Its dots come from AMX tiles for whole tiles of 16 rows where the CPU has AMX-INT8, from VNNI over
//     16-column panels for the other rows, and for a few rows from VNNI over row lanes (quant_lanes.h): the
//     same bits every way, so the row count never changes a row.
//   float32 (float32 x, or no VNNI): each weight row dequantized once into float32 (a * q + b) and dotted with
//     every row of x in 16 lanes reduced in one fixed order; exact to the file's values.
// Both are batch-invariant: a row's result depends on that row and W only.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ggml_blocks.h"
#include "quant_lanes.h"
#include "quant_panels.h"

namespace {

using ggml_blocks::Type;

// One weight row unpacked (ggml_blocks.h), reused by a thread for every column it computes
struct RowScratch {
  std::vector<uint8_t> q;
  std::vector<float> a, b;
  explicit RowScratch(int64_t K) : q(K + 64), a(K / 16 + 16), b(K / 16 + 16) {}
  void unpack(const Type& t, const uint8_t* row, int64_t K) {
    ggml_blocks::unpack_values(t, row, 0, K, q.data(), a.data(), b.data());
  }
};

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
// ---- int8: x rounded per 32 values, W's panels of 16 columns (quant_panels.h) ----

void int8_panels(const Type& t, const uint8_t* w, int64_t row_bytes, int64_t lo, int64_t hi,
                 const quant_panels::Int8Rows& x, int64_t M, int64_t K, float* y, int64_t N, bool amx) {
  using quant_panels::kPanel;
  quant_panels::Panel panel(M <= quant_lanes::kFewRows ? 0 : K, x.G);   // few rows: no panel, a span
  quant_lanes::Span span;
#ifdef CONCH_AMX_INT8
  if (amx) quant_panels::configure_int8(x.G);
#endif
  for (int64_t p = lo; p < hi; ++p) {
    const int64_t n0 = p * kPanel;
    const int cols = (int)std::min<int64_t>(kPanel, N - n0);
    const int ahead = p + 1 < hi ? (int)std::min<int64_t>(kPanel, N - n0 - kPanel) : 0;
    if (M <= quant_lanes::kFewRows) {
      quant_lanes::few_rows(t, w + n0 * row_bytes, row_bytes, cols, ahead, x, (int)M, span, y + n0, N);
      continue;
    }
    panel.fill(t, w + n0 * row_bytes, row_bytes, cols, ahead);
    quant_panels::rows_panel(panel, x, M, y + n0, N, cols, amx);
  }
#ifdef CONCH_AMX_INT8
  if (amx) _tile_release();
#endif
}
constexpr bool kInt8 = true;
#else
constexpr bool kInt8 = false;
#endif

// The products: float32; int8 with VNNI only; int8 with AMX tiles for whole tiles of 16 rows (VNNI for the rest)
enum class Path { kFloat32, kVnni, kAmx };

bool amx_usable() {
#ifdef CONCH_AMX_INT8
  return amx_tiles::permitted();
#else
  return false;
#endif
}

// The fastest product here for x's dtype: float32 keeps the float32 product (exact to the file)
Path fastest(const torch::Tensor& x) {
  if (!kInt8 || x.scalar_type() == torch::kFloat32) return Path::kFloat32;
  return amx_usable() ? Path::kAmx : Path::kVnni;
}

Path named(const std::string& name) {
  if (name == "float32") return Path::kFloat32;
  TORCH_CHECK((name == "vnni" && kInt8) || (name == "amx" && amx_usable()), "quant_matmul: no ", name,
              " product here");
  return name == "vnni" ? Path::kVnni : Path::kAmx;
}

Type checked(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  Type t;
  TORCH_CHECK(ggml_blocks::lookup(qtype, &t), "quant_matmul: ggml type ", qtype, " is not supported");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && K % t.qk == 0, "quant_matmul: x must be (M, K), K a multiple of ",
              t.qk);
  TORCH_CHECK(blocks.dtype() == torch::kUInt8 && blocks.dim() == 2 && blocks.size(1) == K / t.qk * t.bytes,
              "quant_matmul: blocks must be (N, K / QK * block bytes) uint8");
  return t;
}

torch::Tensor product(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K, Path path) {
  const Type t = checked(x, blocks, qtype, K);
  const int64_t M = x.size(0), N = blocks.size(0), row_bytes = blocks.size(1);
  const torch::Tensor xf = x.to(torch::kFloat32).contiguous();
  auto out = torch::empty({M, N}, torch::kFloat32);
  const uint8_t* w = blocks.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  {
    pybind11::gil_scoped_release unlocked;
#ifdef __AVX512VNNI__
    if (path != Path::kFloat32) {
      const quant_panels::Int8Rows xq(xf.data_ptr<float>(), M, K, quant_panels::group_of(t),
                                      quant_panels::activation_block(t));
      const int64_t panels = (N + quant_panels::kPanel - 1) / quant_panels::kPanel;
      const bool amx = path == Path::kAmx && M >= quant_panels::kTileRows;
      at::parallel_for(0, panels, 1, [&](int64_t lo, int64_t hi) {
        int8_panels(t, w, row_bytes, lo, hi, xq, M, K, y, N, amx);
      });
    } else
#endif
      at::parallel_for(0, N, 8, [&](int64_t lo, int64_t hi) {
        float_columns(t, w, row_bytes, lo, hi, xf.data_ptr<float>(), M, K, y, N);
      });
  }
  return x.scalar_type() == torch::kFloat32 ? out : out.to(x.scalar_type());
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  return product(x, blocks, qtype, K, fastest(x));
}

torch::Tensor matmul_path(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K,
                          const std::string& path) {
  return product(x, blocks, qtype, K, named(path));
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
  m.def("amx_available", &amx_usable, "whether the int8 product's AMX tiles run here");
  m.def("dequantize", &dequantize, "blocks (N, row bytes) -> W (N, K) float32 (the values a * q + b)");
  m.def("matmul", &matmul, "x (M, K) @ W^T for W in ggml blocks -> (M, N) in x's dtype: int8 for bf16 x",
        py::arg("x"), py::arg("blocks"), py::arg("qtype"), py::arg("K"));
  m.def("matmul_path", &matmul_path, "matmul with its product named: 'float32', 'vnni' or 'amx'", py::arg("x"),
        py::arg("blocks"), py::arg("qtype"), py::arg("K"), py::arg("path"));
}
