// y = x @ W^T for W held in a GGUF's quantized blocks, repacked once at load into 16-column panels of the same
// bits (panel_blocks.h: no dequantized copy of W).
//
// pack(blocks, qtype, K, into=None, ids=None): blocks (rows, row_bytes) uint8, W's rows as the file stores them
//   (ggml_blocks.h); qtype: ggml's type number (Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14)
//   -> packed (ceil(N / 16), K / QK * panel block bytes) uint8 (packed_shape), written into `into` where given (a
//   tensor the caller placed: the loader's huge-page arena); row r of W the file's row ids[r] where given (N of
//   them; else N = rows). pack_each([(blocks, qtype, K, into, ids)], release_sources, next): the same for many
//   matrices, one after another on the calling thread; threads given the same jobs and `next` share them
//   (gguf_packing.py: its thread, then the loader's once it waits).
// matmul(x, packed, qtype, K, N): x (M, K) bf16 or float32 -> (M, N) in x's dtype. Two products, chosen by x's
//   dtype (matmul_path names one: 'float32', 'vnni', 'amx'):
//   int8 (bf16 x, on a CPU with AVX512-VNNI): x's rows rounded to int8 per 32 values (256 against K-quants),
//     as llama.cpp rounds activations; each group's dot exact in int32, then scaled in float32 group by group,
//     or for Q4_K / Q5_K block by block after exact integer sums over the block's groups (quant_panels.h). VNNI
//     streams each panel's groups through registers, up to 8 rows at a time (quant_stream.h); where the CPU has
//     AMX-INT8, whole tiles of 16 rows share a decoded Panel by AMX and the rest stream by VNNI: the same bits
//     every way, so the row count never changes a row.
//   float32 (float32 x, or no VNNI): each value a * q + b in float32, dotted with each row of x in 16 column
//     lanes, in value order; exact to the file's values.
// matmul_parts(x, [packed...], [qtype...], K, [N...]): x @ [W_0 | W_1 | ...]^T, the matrices' panels in one
//   parallel pass, each matrix's columns the bits its own matmul gives them (q | k | v of types that differ).
// Both are batch-invariant: a row's result depends on that row and W only.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ggml_blocks.h"
#include "panel_blocks.h"
#include "quant_panels.h"
#include "quant_stream.h"

namespace {

using panel_blocks::kPanel;
using quant_panels::Panel;

int64_t panels_of(int64_t N) { return (N + kPanel - 1) / kPanel; }

// ---- float32: a panel's values a * q + b, dotted with each row of x ----

// M rows of x against a decoded panel: its first `cols` columns of y's rows
void float_panel(const Panel& p, const float* x, int64_t M, const quant_panels::Out& y, int cols) {
  const int64_t K = p.K, words = p.G / 4;
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (int64_t m = 0; m < M; ++m) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t g = 0; g < K / p.G; ++g) {
      const __m512 a = _mm512_loadu_ps(p.a.data() + g * kPanel), b = _mm512_loadu_ps(p.b.data() + g * kPanel);
      for (int64_t kk = g * words; kk < (g + 1) * words; ++kk) {
        const __m512i w = _mm512_loadu_si512(p.words.data() + kk * kPanel);
        for (int j = 0; j < 4; ++j) {
          const __m512 q = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, 8 * j), byte));
          acc = _mm512_fmadd_ps(_mm512_fmadd_ps(a, q, b), _mm512_set1_ps(x[m * K + 4 * kk + j]), acc);
        }
      }
    }
    y.store(m, (__mmask16)((1u << cols) - 1), acc);
  }
}

// Panels [lo, hi) of a matrix of N rows: y's columns 16 lo ..
template <class F>
void float_panels(F f, const uint8_t* packed, int64_t lo, int64_t hi, const float* x, int64_t M, int64_t K,
                  const quant_panels::Out& y, int64_t N) {
  Panel panel(K, F::G);
  const int64_t stride = K / F::qk * F::bytes;
  for (int64_t p = lo; p < hi; ++p) {
    panel.fill(f, packed + p * stride);
    float_panel(panel, x, M, y.from(p * kPanel), (int)std::min<int64_t>(kPanel, N - p * kPanel));
  }
}

#ifdef __AVX512VNNI__
// ---- int8: x rounded per 32 values (256 against K-quants) ----

template <class F>
void int8_panels(F f, const uint8_t* packed, int64_t lo, int64_t hi, const quant_panels::Int8Rows& x, int64_t M,
                 const quant_panels::Out& y, int64_t N, bool amx) {
  const int64_t K = x.K, stride = K / F::qk * F::bytes;
  Panel panel(amx ? K : 0, F::G);   // VNNI alone: streamed, no Panel
#ifdef CONCH_AMX_INT8
  if (amx) quant_panels::configure_int8(F::G);
#endif
  for (int64_t p = lo; p < hi; ++p) {
    const int cols = (int)std::min<int64_t>(kPanel, N - p * kPanel);
    int64_t r0 = 0;
#ifdef CONCH_AMX_INT8
    if (amx) {
      panel.fill(f, packed + p * stride);
      for (; r0 + quant_panels::kTileRows <= M; r0 += quant_panels::kTileRows)
        quant_panels::amx_rows(f, panel, packed + p * stride, x, r0, y.from(p * kPanel), cols);
    }
#endif
    // the panel this one's first pass brings into L2 (quant_stream.h): the next at 2+ rows; at one row, whose pass
    // is short, the one after (the next one's lines were asked for too late to gain)
    const int64_t ahead = M > 1 ? 1 : 2;
    const uint8_t* next = p + ahead < hi ? packed + (p + ahead) * stride : nullptr;
    quant_stream::all_rows(f, packed + p * stride, x, r0, M, y.from(p * kPanel), cols, next);
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

// A type's sizes (its Format's): values a block holds, a block's bytes in the file and in a panel
struct Sizes {
  int64_t qk, file_bytes, panel_bytes;
};

Sizes sizes_of(int64_t qtype) {
  Sizes s{};
  const bool known = panel_blocks::with_format(qtype, [&](auto f) {
    using F = decltype(f);
    s = {F::qk, F::file_bytes, F::bytes};
  });
  TORCH_CHECK(known, "quant_matmul: ggml type ", qtype, " is not supported");
  return s;
}

// ids as int64, each a row of W's N, or a refusal naming the first that is not
torch::Tensor checked_ids(const torch::Tensor& ids, int64_t N) {
  const torch::Tensor index = ids.to(torch::kLong).contiguous();
  const int64_t* id = index.data_ptr<int64_t>();
  for (int64_t r = 0; r < index.numel(); ++r)
    TORCH_CHECK(id[r] >= 0 && id[r] < N, "quant_matmul: row ", id[r], " of ", N);
  return index;
}

void check_packed(const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N) {
  const Sizes t = sizes_of(qtype);
  TORCH_CHECK(K % t.qk == 0, "quant_matmul: K must be a multiple of ", t.qk);
  TORCH_CHECK(packed.dtype() == torch::kUInt8 && packed.dim() == 2 && packed.is_contiguous() &&
                  packed.size(0) == panels_of(N) && packed.size(1) == K / t.qk * t.panel_bytes,
              "quant_matmul: packed must be (ceil(N / 16), K / QK * panel block bytes) uint8, as pack makes it");
}

// The packed form's shape for W (N, K) of a type: (ceil(N / 16), K / QK * panel block bytes)
std::vector<int64_t> packed_shape(int64_t qtype, int64_t K, int64_t N) {
  const Sizes t = sizes_of(qtype);
  return {panels_of(N), K / t.qk * t.panel_bytes};
}

// `into`: where given, the packed form is written there (packed_shape's, uint8, contiguous) and returned
torch::Tensor placed(std::optional<torch::Tensor> into, int64_t qtype, int64_t K, int64_t N) {
  if (!into.has_value()) return torch::empty(packed_shape(qtype, K, N), torch::kUInt8);
  check_packed(*into, qtype, K, N);
  return *into;
}

// One matrix to pack: W's rows as the file stores them (row r of the packed form: the file's row ids[r], or r
// where ids is null), N rows of row_bytes, into `out` (packed_shape's bytes)
struct PackJob {
  const uint8_t* w;
  int64_t qtype, K, N, row_bytes;
  const int64_t* ids;
  uint8_t* out;
};

// The panels [lo, hi) of a job
void pack_panels(const PackJob& j, int64_t lo, int64_t hi) {
  panel_blocks::with_format(j.qtype, [&](auto f) {
    using F = decltype(f);
    std::vector<uint8_t> q(kPanel * F::qk);
    const uint8_t* col[kPanel];
    for (int64_t p = lo; p < hi; ++p)
      for (int64_t i = 0; i < j.K / F::qk; ++i) {
        for (int c = 0; c < kPanel; ++c) {
          const int64_t r = p * kPanel + c;
          col[c] = r < j.N ? j.w + (j.ids ? j.ids[r] : r) * j.row_bytes + i * F::file_bytes : nullptr;
        }
        F::pack(col, q.data(), j.out + (p * (j.K / F::qk) + i) * F::bytes);
      }
  });
}

// A job from pack's arguments; `index` keeps the checked ids alive while the job runs
PackJob pack_job(const torch::Tensor& blocks, int64_t qtype, int64_t K, const torch::Tensor& out,
                 const std::optional<torch::Tensor>& ids, torch::Tensor& index) {
  const Sizes t = sizes_of(qtype);
  TORCH_CHECK(K % t.qk == 0 && blocks.dtype() == torch::kUInt8 && blocks.dim() == 2 && blocks.is_contiguous() &&
                  blocks.size(1) == K / t.qk * t.file_bytes,
              "quant_matmul: blocks must be contiguous (N, K / QK * block bytes) uint8, K a multiple of ", t.qk);
  const int64_t rows = blocks.size(0), N = ids.has_value() ? ids->numel() : rows;
  if (ids.has_value()) index = checked_ids(*ids, rows);
  check_packed(out, qtype, K, N);
  return {blocks.data_ptr<uint8_t>(), qtype, K, N, blocks.size(1),
          ids.has_value() ? index.data_ptr<int64_t>() : nullptr, out.data_ptr<uint8_t>()};
}

torch::Tensor pack(const torch::Tensor& blocks, int64_t qtype, int64_t K, std::optional<torch::Tensor> into,
                   std::optional<torch::Tensor> ids) {
  torch::Tensor index;
  const torch::Tensor rows = blocks.contiguous();
  const torch::Tensor out = placed(into, qtype, K, ids.has_value() ? ids->numel() : rows.size(0));
  const PackJob job = pack_job(rows, qtype, K, out, ids, index);
  pybind11::gil_scoped_release unlocked;
  at::parallel_for(0, panels_of(job.N), 1, [&](int64_t lo, int64_t hi) { pack_panels(job, lo, hi); });
  return out;
}

// Many matrices packed one after another on the calling thread alone (no OpenMP team: a loader's thread packs
// while its main thread reads the tokenizer), the GIL released throughout. Each job: (blocks, qtype, K, into,
// ids); where release_sources, each job's blocks, a view of a memory-mapped file, are dropped from resident
// memory once packed (MADV_DONTNEED: read from the file again if touched). `next` (one int64, zero at first):
// callers on several threads given the same jobs and `next` share them, each taking the next job none has taken.
void pack_each(const std::vector<std::tuple<torch::Tensor, int64_t, int64_t, torch::Tensor,
                                            std::optional<torch::Tensor>>>& jobs, bool release_sources,
               torch::Tensor next) {
  TORCH_CHECK(next.dtype() == torch::kLong && next.numel() == 1, "quant_matmul: next must be one int64");
  std::vector<PackJob> work;
  std::vector<torch::Tensor> indexes(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& [blocks, qtype, K, into, ids] = jobs[i];
    work.push_back(pack_job(blocks, qtype, K, into, ids, indexes[i]));
  }
  int64_t* taken = next.data_ptr<int64_t>();
  pybind11::gil_scoped_release unlocked;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int64_t i; (i = __atomic_fetch_add(taken, 1, __ATOMIC_RELAXED)) < (int64_t)work.size();) {
    const PackJob& j = work[i];
    pack_panels(j, 0, panels_of(j.N));
    if (!release_sources) continue;
    const uintptr_t start = (uintptr_t)j.w / page * page, end = (uintptr_t)j.w + j.row_bytes * j.N;
    madvise((void*)start, end - start, MADV_DONTNEED);
  }
}

// packed's rows `ids` (W[ids]), packed
torch::Tensor rows(const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N, const torch::Tensor& ids,
                   std::optional<torch::Tensor> into) {
  check_packed(packed, qtype, K, N);
  const torch::Tensor index = checked_ids(ids, N);
  const int64_t R = index.numel(), P = panels_of(R);
  const int64_t* id = index.data_ptr<int64_t>();
  torch::Tensor out = placed(into, qtype, K, R);
  const uint8_t* w = packed.data_ptr<uint8_t>();
  uint8_t* o = out.data_ptr<uint8_t>();
  panel_blocks::with_format(qtype, [&](auto f) {
    using F = decltype(f);
    const int64_t blocks = K / F::qk;
    at::parallel_for(0, P, 1, [&](int64_t lo, int64_t hi) {
      const uint8_t* src[kPanel];
      int from[kPanel];
      for (int64_t p = lo; p < hi; ++p)
        for (int64_t i = 0; i < blocks; ++i) {
          for (int c = 0; c < kPanel; ++c) {
            const int64_t r = p * kPanel + c;
            src[c] = r < R ? w + (id[r] / kPanel * blocks + i) * F::bytes : nullptr;
            from[c] = r < R ? (int)(id[r] % kPanel) : 0;
          }
          F::gather(src, from, o + (p * blocks + i) * F::bytes);
        }
    });
  });
  return out;
}

// One matrix of a product: its packed panels, its type and rows, and where its columns start in y
struct Part {
  const uint8_t* w;
  int64_t qtype, N, col, first;   // first: its first panel in the product's numbering of all parts' panels
};

// x's int8 rows for each (group, block) the parts' types read (K-quants: 256-value blocks; Q6_K: groups of 16),
// made before the parallel pass (add), read in it (of)
struct Activations {
  std::vector<std::unique_ptr<quant_panels::Int8Rows>> rows;

  template <class F, class T>
  void add(F, const T* x, int64_t M, int64_t K) {
    if (find(F::G, F::activations) == nullptr)
      rows.push_back(std::make_unique<quant_panels::Int8Rows>(x, M, K, F::G, F::activations));
  }
  template <class F>
  const quant_panels::Int8Rows& of(F) const { return *find(F::G, F::activations); }

  const quant_panels::Int8Rows* find(int64_t G, int64_t A) const {
    for (const auto& r : rows)
      if (r->G == G && r->A == A) return r.get();
    return nullptr;
  }
};

// y = x @ [W_0 | W_1 | ...]^T: the parts' panels shared out in one parallel pass, each part's columns written
// beside the others' (the same bits as a product per part)
torch::Tensor product(const torch::Tensor& x, std::vector<Part> parts, int64_t K, Path path) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K, "quant_matmul: x must be (M, K)");
  const int64_t M = x.size(0);
  int64_t N = 0, panels = 0;
  for (Part& part : parts) {
    part.col = N, part.first = panels;
    N += part.N, panels += panels_of(part.N);
  }
  // bf16 x is read as it is and y written in bf16 by the int8 product; the float32 product reads float32
  const bool int8 = kInt8 && path != Path::kFloat32, bf16 = x.scalar_type() == torch::kBFloat16;
  const torch::Tensor xc = int8 && bf16 ? x.contiguous() : x.to(torch::kFloat32).contiguous();
  auto out = torch::empty({M, N}, bf16 ? torch::kBFloat16 : torch::kFloat32);
  const quant_panels::Out y{bf16 ? nullptr : out.data_ptr<float>(),
                            bf16 ? out.data_ptr<c10::BFloat16>() : nullptr, N};
  {
    pybind11::gil_scoped_release unlocked;
    Activations xq;
    if (int8)
      for (const Part& part : parts)
        panel_blocks::with_format(part.qtype, [&](auto f) {
          if (bf16) return xq.add(f, xc.data_ptr<c10::BFloat16>(), M, K);
          xq.add(f, xc.data_ptr<float>(), M, K);
        });
    const bool amx = path == Path::kAmx && M >= quant_panels::kTileRows;
    at::parallel_for(0, panels, 1, [&](int64_t lo, int64_t hi) {
      for (const Part& part : parts) {
        const int64_t plo = std::max(lo, part.first) - part.first;
        const int64_t phi = std::min(hi, part.first + panels_of(part.N)) - part.first;
        if (plo >= phi) continue;
        panel_blocks::with_format(part.qtype, [&](auto f) {
#ifdef __AVX512VNNI__
          if (path != Path::kFloat32) {
            return int8_panels(f, part.w, plo, phi, xq.of(f), M, y.from(part.col), part.N, amx);
          }
#endif
          float_panels(f, part.w, plo, phi, xc.data_ptr<float>(), M, K, y.from(part.col), part.N);
        });
      }
    });
  }
  return bf16 || x.scalar_type() == torch::kFloat32 ? out : out.to(x.scalar_type());
}

Part part_of(const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N) {
  check_packed(packed, qtype, K, N);
  return {packed.data_ptr<uint8_t>(), qtype, N, 0, 0};
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N) {
  return product(x, {part_of(packed, qtype, K, N)}, K, fastest(x));
}

torch::Tensor matmul_path(const torch::Tensor& x, const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N,
                          const std::string& path) {
  return product(x, {part_of(packed, qtype, K, N)}, K, named(path));
}

torch::Tensor matmul_parts(const torch::Tensor& x, const std::vector<torch::Tensor>& packed,
                           const std::vector<int64_t>& qtypes, int64_t K, const std::vector<int64_t>& Ns) {
  TORCH_CHECK(!packed.empty() && packed.size() == qtypes.size() && packed.size() == Ns.size(),
              "quant_matmul: one qtype and one N for each packed matrix");
  std::vector<Part> parts;
  for (size_t i = 0; i < packed.size(); ++i) parts.push_back(part_of(packed[i], qtypes[i], K, Ns[i]));
  return product(x, parts, K, fastest(x));
}

bool supported(int64_t qtype) { return panel_blocks::with_format(qtype, [](auto) {}); }

// Rows `ids` of W, (len(ids), K) float32: each value a * q + b
torch::Tensor dequantize_rows(const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N,
                              const torch::Tensor& ids) {
  check_packed(packed, qtype, K, N);
  const torch::Tensor index = checked_ids(ids, N);
  const int64_t R = index.numel();
  const int64_t* id = index.data_ptr<int64_t>();
  auto out = torch::empty({R, K}, torch::kFloat32);
  const uint8_t* w = packed.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  panel_blocks::with_format(qtype, [&](auto f) {
    using F = decltype(f);
    at::parallel_for(0, R, 16, [&](int64_t lo, int64_t hi) {
      alignas(64) uint8_t q[F::words * 64];
      alignas(64) float a[kPanel], b[kPanel];
      for (int64_t r = lo; r < hi; ++r) {
        const int c = (int)(id[r] % kPanel);
        const uint8_t* panel = w + id[r] / kPanel * (K / F::qk * F::bytes);
        for (int64_t g = 0; g < K / F::G; ++g) {
          const uint8_t* blk = panel + g / F::groups * F::bytes;
          __m512i wv[F::words];
          F::words_of(blk, (int)(g % F::groups), wv);
          for (int kk = 0; kk < F::words; ++kk) _mm512_store_si512(q + 64 * kk, wv[kk]);
          __m512 av, bv;
          F::scales_of(blk, (int)(g % F::groups), av, bv);
          _mm512_store_ps(a, av);
          _mm512_store_ps(b, bv);
          for (int v = 0; v < F::G; ++v) y[r * K + g * F::G + v] = a[c] * q[64 * (v / 4) + 4 * c + v % 4] + b[c];
        }
      }
    });
  });
  return out;
}

torch::Tensor dequantize(const torch::Tensor& packed, int64_t qtype, int64_t K, int64_t N) {
  return dequantize_rows(packed, qtype, K, N, torch::arange(N, torch::kLong));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("supported", &supported, "whether this ggml type has a kernel");
  m.def("int8_available", [] { return kInt8; }, "whether the int8 (AVX512-VNNI) product was built");
  m.def("amx_available", &amx_usable, "whether the int8 product's AMX tiles run here");
  m.def("packed_shape", &packed_shape, "the packed form's shape for W (N, K) of a ggml type", py::arg("qtype"),
        py::arg("K"), py::arg("N"));
  m.def("pack", &pack, "blocks (rows, row bytes) as the file stores them -> packed (ceil(N / 16), panel bytes), "
        "written into `into` where given; row r the file's row ids[r] where ids are given (N of them)", py::arg("blocks"),
        py::arg("qtype"), py::arg("K"), py::arg("into") = py::none(), py::arg("ids") = py::none());
  m.def("pack_each", &pack_each, "[(blocks, qtype, K, into, ids)] packed one after another on this thread alone, "
        "the GIL released; each job's source pages released after where release_sources; threads given the same "
        "jobs and `next` (one int64, zero at first) share them", py::arg("jobs"), py::arg("release_sources"),
        py::arg("next"));
  m.def("rows", &rows, "packed, ids -> W[ids] packed (into `into` where given)", py::arg("packed"), py::arg("qtype"),
        py::arg("K"), py::arg("N"), py::arg("ids"), py::arg("into") = py::none());
  m.def("dequantize", &dequantize, "packed -> W (N, K) float32 (the values a * q + b)", py::arg("packed"),
        py::arg("qtype"), py::arg("K"), py::arg("N"));
  m.def("dequantize_rows", &dequantize_rows, "packed, ids -> W[ids] (len(ids), K) float32", py::arg("packed"),
        py::arg("qtype"), py::arg("K"), py::arg("N"), py::arg("ids"));
  m.def("matmul", &matmul, "x (M, K) @ W^T for W packed -> (M, N) in x's dtype: int8 for bf16 x", py::arg("x"),
        py::arg("packed"), py::arg("qtype"), py::arg("K"), py::arg("N"));
  m.def("matmul_parts", &matmul_parts, "x @ [W_0 | W_1 | ...]^T for packed matrices of one K -> (M, sum N)",
        py::arg("x"), py::arg("packed"), py::arg("qtypes"), py::arg("K"), py::arg("Ns"));
  m.def("matmul_path", &matmul_path, "matmul with its product named: 'float32', 'vnni' or 'amx'", py::arg("x"),
        py::arg("packed"), py::arg("qtype"), py::arg("K"), py::arg("N"), py::arg("path"));
}
