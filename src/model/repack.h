// Weights repacked at load into the layout the decode kernels stream (ops/quant_repack.h).
#pragma once

#include <cstddef>

namespace kamera {

struct Model;

// Repacks every Q8_0 matrix a token multiplies (the layers' dense products and the output head,
// the embedding when it is the tied head) into the Q8_0x16 layout, when this CPU's decode path
// has a kernel for it; the copies replace the mapped pages (model/weight.h). Call after the
// fingerprint: it hashes the file's bytes. Opt-in (KAMERA_REPACK=1) until a known discrepancy
// is found: every repacked matrix matches the file's layout (tests), yet on the 0.5b qwen2 Q8_0
// file the logits of 1 to 4 token forwards differ by up to 0.07 (of 4.5) from the default.
// Returns the bytes repacked.
size_t repack_for_decode(Model& m);

}  // namespace kamera
