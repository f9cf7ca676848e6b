// The AMX tile configurations of the amx path's kernels (ops/quant_amx.cpp: bf16 GEMM over weight
// panels; ops/quant_amx_x16.cpp: int8 products over repacked groups). A configuration is loaded
// per thread and stays loaded; use_tiles loads one only when the thread holds another, so kernels
// of different shapes can alternate on a thread. Plain data here: no AMX instruction.
#pragma once

#include <cstdint>

namespace kamera::quant {

// Palette 1: per tile register its rows and bytes per row.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

namespace amx {
// Makes c the calling thread's tile configuration (c must outlive its use: a static). Call only
// where the CPU and the OS allow AMX (cpu_features().amx_tile).
void use_tiles(const AmxTileConfig& c);
}  // namespace amx

}  // namespace kamera::quant
