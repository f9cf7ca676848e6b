// The avx2 path of the quantized weight kernels (see quant_x86.inc), compiled with its own -m
// flags (src/CMakeLists.txt) and only called when the CPU has them.
#define KQ_NS avx2
#define KQ_NAME "avx2"
#define KQ_LEVEL IsaLevel::Avx2
#define KQ_VNNI 0
#include "ops/quant_x86.inc"

namespace kamera::quant {
const QuantKernels& avx2_kernels() {
  return avx2::kernels();
}
}  // namespace kamera::quant
