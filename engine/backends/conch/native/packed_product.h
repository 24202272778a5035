// The Python face both packed bf16 matmuls share (narrow_matmul.cpp, tile_matmul.cpp): matmul()'s checks of x,
// the packed copy and the bias, the GIL policy, and the module's four functions. Each kernel brings its own
// `fits`, `pack` (its layout) and `run` (its arithmetic).
//
// A product of up to kLockedRows rows keeps the GIL: it takes 10-300 us, and a release would let in a thread the
// engine thread then waits out. Larger ones (prefill chunks, big batches) release it, as torch's ops do.
#pragma once
#include <torch/extension.h>

#include <cstdint>
#include <optional>

namespace packed_product {

constexpr int64_t kLockedRows = 16;

using Fits = bool (*)(int64_t out_features, int64_t in_features);
using Run = void (*)(const at::BFloat16* x, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t M,
                     int64_t K, int64_t N);

// x (M, K) bf16 contiguous @ packed (N, K)^T + bias -> (M, N / out_per) bf16, after the checks every kernel makes
// (out_per 2: a GLU's run, two product columns to an output).
inline torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed,
                            const c10::optional<torch::Tensor>& bias, Fits fits, Run run, int64_t out_per = 1) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kBFloat16, "x: contiguous (rows, in) bf16");
  TORCH_CHECK(packed.dim() == 2 && packed.is_contiguous() && packed.scalar_type() == at::kBFloat16 &&
              packed.size(1) == x.size(1) && fits(packed.size(0), packed.size(1)), "packed: pack()'s (out, in)");
  const int64_t M = x.size(0), K = x.size(1), N = packed.size(0);
  const float* bp = nullptr;
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == N && bias->is_contiguous() &&
                bias->scalar_type() == at::kFloat, "bias: (out,) float32");
    bp = bias->data_ptr<float>();
  }
  auto y = torch::empty({M, N / out_per}, x.options());
  if (M == 0) return y;
  std::optional<py::gil_scoped_release> unlocked;
  if (M > kLockedRows) unlocked.emplace();     // a prefill's product: ms long, the server's threads run meanwhile
  run(x.data_ptr<at::BFloat16>(), packed.data_ptr<at::BFloat16>(), bp, y.data_ptr<at::BFloat16>(), M, K, N);
  return y;
}

// available / fits / pack / matmul, as both modules expose them.
inline void bind(py::module_& m, bool (*available)(), Fits fits, torch::Tensor (*pack)(const torch::Tensor&),
                 torch::Tensor (*product)(const torch::Tensor&, const torch::Tensor&,
                                          const c10::optional<torch::Tensor>&),
                 const char* available_doc, const char* pack_doc) {
  m.def("available", available, available_doc);
  m.def("fits", fits, "whether an (out, in) matrix can be packed");
  m.def("pack", pack, pack_doc);
  m.def("matmul", product, "x (rows, in) @ W^T + bias -> (rows, out) bf16", py::arg("x"), py::arg("packed"),
        py::arg("bias") = py::none());
}

// pack_glu / matmul_glu, where a kernel fuses an MLP's gate_up product with its SiLU-gated product.
inline void bind_glu(py::module_& m, torch::Tensor (*pack_glu)(const torch::Tensor&),
                     torch::Tensor (*product_glu)(const torch::Tensor&, const torch::Tensor&)) {
  m.def("pack_glu", pack_glu, "gate_up W (2 I, in) -> the copy matmul_glu reads");
  m.def("matmul_glu", product_glu, "x (rows, in) -> silu(x gate^T) * (x up^T), (rows, I) bf16", py::arg("x"),
        py::arg("packed"));
}

}  // namespace packed_product
