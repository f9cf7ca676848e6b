// Weights repacked at load into the layout the decode kernels stream (ops/quant_repack.h).
#pragma once

#include <cstddef>

namespace kamera {

struct Model;

// Repacks every Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS matrix a token
// multiplies (the layers' dense products and the output head, the embedding when it is the tied
// head) into its x16 layout, when this CPU's decode path has a kernel for it; the copies replace
// the mapped pages (model/weight.h). Call after the fingerprint: it hashes the file's bytes. On by
// default; KAMERA_REPACK=0 keeps the file's layout. Each repacked product equals the file layout's
// to float rounding (its sums run in another order); a forward's later q8_0 activation
// quantizations can turn such a last-bit difference into a whole quantization step, so logits of
// the two layouts differ by about the activations' own quantization error, not by float rounding;
// the naive-forward and llama.cpp Q8_0 checks (test_qwen3.cpp, test_llama_logits.cpp) hold with it.
// Matrices marked Numerics::Ggml (Model::set_numerics) stay in the file's layout. F16 and BF16
// matrices are copied in the file's row layout (KAMERA_REPACK_COPY=0 keeps them mapped; =1 copies
// every other type too). Every copy lives in one block on huge pages (Weight::block), the mapped
// pages released as they are copied. Returns the bytes of the block.

size_t repack_for_decode(Model& m);

}  // namespace kamera
