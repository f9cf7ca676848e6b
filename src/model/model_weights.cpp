// Walks a model's weight matrices under their GGUF tensor names.
#include <fmt/format.h>

#include "model/model.h"

namespace kamera {

void Model::for_each_weight(
    const std::function<void(const std::string&, const Weight&)>& fn) const {
  auto visit = [&](const std::string& name, const Weight& w) {
    if (!w.empty()) fn(name, w);
  };
  visit("token_embd.weight", tok_embd);
  visit("output.weight", output);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    const std::string p = fmt::format("blk.{}.", i);
    visit(p + "attn_q.weight", l.wq);
    visit(p + "attn_k.weight", l.wk);
    visit(p + "attn_v.weight", l.wv);
    visit(p + "attn_q_a.weight", l.wq_a);
    visit(p + "attn_q_b.weight", l.wq_b);
    visit(p + "attn_kv_a_mqa.weight", l.wkv_a);
    visit(p + "attn_kv_b.weight", l.wkv_b);
    visit(p + "attn_output.weight", l.wo);
    visit(p + "ffn_gate.weight", l.w_gate);
    visit(p + "ffn_down.weight", l.w_down);
    visit(p + "ffn_up.weight", l.w_up);
    l.moe.for_each([&](const char* name, const Weight& w) { visit(p + name + ".weight", w); });
  }
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for_each_weight([&](const std::string&, const Weight& w) { n += w.bytes(); });
  return n;
}

void Model::set_numerics(Numerics n) {
  numerics = n;
  // The matrices are this model's own (non-const) members: for_each_weight only visits them.
  for_each_weight([n](const std::string&, const Weight& w) {
    if (w.type() == GgmlType::Q8_0) const_cast<Weight&>(w).set_numerics(n);
  });
}

}  // namespace kamera
