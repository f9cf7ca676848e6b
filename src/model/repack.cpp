#include "model/repack.h"

#include <cstdlib>
#include <cstring>

#include "model/model.h"
#include "ops/quant_repack.h"

namespace kamera {

size_t repack_for_decode(Model& m) {
  const char* env = std::getenv("KAMERA_REPACK");
  if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
  size_t bytes = 0;
  auto repack = [&](Weight& w) {
    if (w.empty() || w.is_f32() || w.layout() != WeightLayout::Rows) return;
    if (w.view().numerics == Numerics::Ggml) return;  // ggml's order reads the file's rows
    const WeightLayout l = quant::x16_layout_of(w.type());
    if (quant::x16_fits(w.view()) && quant::decode_has_x16(l)) {
      w = Weight::repacked(w, l);
    } else if (!w.owned() && std::getenv("KAMERA_REPACK_COPY") != nullptr) {
      w = Weight::repacked(w, WeightLayout::Rows);
    } else {
      return;
    }
    bytes += w.bytes();
  };
  for (LayerWeights& L : m.layers)
    for (Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) repack(*w);
  repack(m.output.empty() ? m.tok_embd : m.output);
  return bytes;
}

}  // namespace kamera
