// The avx512 path of the quantized weight kernels (see quant_x86.inc), compiled with its own -m
// flags (src/CMakeLists.txt) and only called when the CPU has them.
#define KQ_NS avx512
#define KQ_NAME "avx512"
#define KQ_LEVEL IsaLevel::Avx512
#define KQ_VNNI 0
#include "ops/quant_x86.inc"

namespace kamera::quant {
const QuantKernels& avx512_kernels() {
  return avx512::kernels();
}
}  // namespace kamera::quant
