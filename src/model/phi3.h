// Phi-3 and Phi-4-mini (GGUF architecture phi3) beyond a GQA decoder, as llama.cpp reads and runs
// them (checked at unslothai/llama.cpp d32676d, src/models/phi3.cpp, llama-model.cpp,
// llama-context.cpp, ggml's rope_ext):
//
//   attention: blk.N.attn_qkv {dim, q + 2 kv}: the q rows, then k, then v (or attn_q/k/v apart);
//     no biases; the NeoX rope on the first rope.dimension_count dims of each head (Phi-4-mini:
//     96 of 128, partial rotary), the rest pass through. Scores 1 / sqrt(head_dim).
//   LongRoPE: global tensors rope_factors_short.weight / rope_factors_long.weight (n_rot / 2
//     each) divide pair i's frequency; llama.cpp takes the long set when the context (n_ctx)
//     exceeds rope.scaling.original_context_length (absent: context_length), else the short set
//     (ops/rope.h, LongRope). rope.scaling.attn_factor multiplies the rotated dims of q and k
//     (ggml's mscale with ext_factor 0), whichever set is used; no rope.scaling.type is written.
//   FFN: blk.N.ffn_up {dim, 2 ffn}: the gate rows, then the up rows (SwiGLU); no ffn_gate.
//   attention.sliding_window: llama.cpp disables Phi's sliding window (full attention), so does
//     kamera.
//
// The fused matrices load as two or three row ranges of the same bytes (views into the mapped
// file, any weight type: a row is whole blocks). The keys kamera caches are a function of the
// token alone (the factors and the magnitude are the same at every position): relocation is a
// rotation by the position delta and stays exact.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/weight.h"

namespace kamera {

struct GgufTensor;
class GgufFile;

// rope.scaling.original_context_length and attn_factor into c.longrope / c.rope (the factor
// tensors are read with the weights).
Status read_phi3_hparams(const GgufFile& f, ModelConfig& c);

// Consecutive row ranges of a 2-D tensor {cols, sum(rows)} as Weights in its type (views of its
// bytes where they are 4-byte aligned, else owned copies); errors name the tensor.
Result<std::vector<Weight>> split_rows(const GgufTensor& t, const std::vector<int64_t>& rows);

}  // namespace kamera
