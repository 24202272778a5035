// AMX tile state for the kernels that multiply with TMUL (tile_matmul.cpp, tile_attention.cpp): the process's
// permission to use it, and the one tile configuration both use (8 tiles of 16 rows x 64 bytes: a C tile holds
// 16 x 16 float32, an A tile 16 rows x 32 bf16, a B tile 16 bf16 pairs x 16 columns).
#pragma once

#include <cstdint>

namespace amx_tiles {
// What a kernel says when it cannot use AMX here.
constexpr const char* kMissing = "no AMX here (not built with it, or the kernel refused the tile state)";
}  // namespace amx_tiles

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CONCH_AMX 1

namespace amx_tiles {

// Linux hands AMX's tile data state to a process that asks (kernel >= 5.16); the grant is process-wide.
inline bool permitted() {
  constexpr int kReqPerm = 0x1023, kXtileData = 18;     // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  static const bool granted = syscall(SYS_arch_prctl, kReqPerm, kXtileData) == 0;
  return granted;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Every tile 16 rows x 64 bytes; a thread configures before its first tile instruction and releases after.
inline void configure() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  _tile_loadconfig(&c);
}

}  // namespace amx_tiles
#endif
