// The avx512_vnni path of the quantized weight kernels (see quant_x86.inc), compiled with its own
// -m flags (src/CMakeLists.txt) and only called when the CPU has them.
#define KQ_NS avx512_vnni
#define KQ_NAME "avx512_vnni"
#define KQ_LEVEL IsaLevel::Avx512Vnni
#define KQ_VNNI 1
#include "ops/quant_x86.inc"

namespace kamera::quant {
const QuantKernels& avx512_vnni_kernels() {
  return avx512_vnni::kernels();
}
}  // namespace kamera::quant
