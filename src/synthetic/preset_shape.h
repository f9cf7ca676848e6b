// The shape every make-model preset sets, in one call (synthetic/*_shapes.cpp): the residual width,
// layers, query and KV heads, head width, feed-forward width, vocabulary and context.
#pragma once

#include "model/config.h"

namespace kamera {

struct PresetShape {
  int dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
};

inline void set_shape(ModelConfig& c, const PresetShape& s) {
  c.dim = s.dim;
  c.n_layers = s.layers;
  c.n_heads = s.heads;
  c.n_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.ffn_dim = s.ffn;
  c.n_vocab = s.vocab;
  c.ctx_len = s.ctx;
}

}  // namespace kamera
