// The quantized-weight kernel paths compiled in that this CPU can run, scalar first.
#pragma once

#include <vector>

#include "ops/quant_kernels.h"

inline std::vector<const kamera::quant::QuantKernels*> supported_quant_paths() {
  int n = 0;
  const kamera::quant::QuantKernels* const* all = kamera::quant::all_kernels(&n);
  std::vector<const kamera::quant::QuantKernels*> out;
  for (int i = 0; i < n; ++i)
    if (kamera::quant::cpu_supports(*all[i])) out.push_back(all[i]);
  return out;
}
