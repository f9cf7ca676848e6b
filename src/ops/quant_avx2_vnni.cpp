// The avx2 path with AVX-VNNI (see quant_x86.inc): the same kernels, the byte dot products through
// VEX vpdpbusd on ymm (exact int32 sums, no int16 step) instead of maddubs and madd. Compiled with
// its own -m flags (src/CMakeLists.txt) and only called when the CPU has them.
#define KQ_NS avx2_vnni
#define KQ_NAME "avx2_vnni"
#define KQ_LEVEL IsaLevel::Avx2
#define KQ_VNNI 0
#define KQ_AVX_VNNI 1
#include "ops/quant_x86.inc"

namespace kamera::quant {
const QuantKernels& avx2_vnni_kernels() {
  return avx2_vnni::kernels();
}
}  // namespace kamera::quant
