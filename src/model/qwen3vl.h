// Qwen3-VL's text decoder (GGUF architectures qwen3vl, qwen3vlmoe), as llama.cpp reads and runs
// it (checked at unslothai/llama.cpp d32676d, src/models/qwen3vl*.cpp) and as Hugging Face's
// modeling_qwen3_vl.py defines it:
//
//   layers     qwen3's (qwen3vl) or qwen3moe's (qwen3vlmoe): per-head q/k RMSNorm before the
//              rope, no biases (model/qwen3.h); tensors and keys as those architectures
//   rope       M-RoPE with interleaved sections ({arch}.rope.dimension_sections = [t, h, w, 0],
//              [24, 20, 20, 0] in the released models): pair i reads the token's h when
//              i % 3 == 1 and i < 3 h, its w when i % 3 == 2 and i < 3 w, else its t
//              (ops/rope.h). Text tokens have t = h = w, so they rotate as 1-D RoPE.
//   deepstack  {arch}.n_deepstack_layers = N: an image's embedding row is 1 + N slices of
//              embedding_length values (the tower's merger output, then one slice per deepstack
//              tower layer: vision/qwen_vision.h). Slice 0 enters the decoder; after decoder
//              layer k (k < N) slice k + 1 is added to that row's hidden state. Text tokens
//              add nothing (llama.cpp pads their embedding with zeros).
//
// The injection is part of the row's content, so a cached image chunk's canonical KV carries it,
// and its keys are still the normed, unrotated ones: relocation stays exact.
//
// Where llama.cpp departs from Hugging Face: ggml's interleaved rope (GGML_ROPE_TYPE_IMROPE)
// lets a pair that is none of t's, h's or w's read a 4th position component, which llama.cpp sets
// to 0 for text and images; Hugging Face gives such pairs t. With the released sections
// [24, 20, 20] over 64 pairs, pairs 61 and 62 (the two lowest frequencies, theta^(-122/128) =
// 4.1e-7 rad per position at theta 5e6) turn by t in kamera and Hugging Face and not at all in
// llama.cpp. kamera follows Hugging Face; the tiny preset's sections [6, 5, 5] over 16 pairs
// have no such pair, so llama.cpp's logits are a reference for it (tests/data/qwen3vl).
//
// Refused: {arch}.deepstack_mapping (Granite-4 Vision's per-layer mapping; llama.cpp's qwen3vl
// does not read it either).
#pragma once

#include "core/status.h"
#include "model/config.h"

namespace kamera {

class GgufFile;

// n_deepstack_layers into c.n_deepstack (after the layer count is read).
Status read_qwen3vl_hparams(const GgufFile& f, ModelConfig& c);

}  // namespace kamera
