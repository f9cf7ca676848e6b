#include "model/repack.h"

#include <cstdlib>
#include <cstring>

#include "model/model.h"
#include "ops/quant_repack.h"

namespace kamera {

size_t repack_for_decode(Model& m) {
  const char* env = std::getenv("KAMERA_REPACK");
  if ((env != nullptr && std::strcmp(env, "0") == 0) || !quant::decode_has_q8_0x16()) return 0;
  size_t bytes = 0;
  auto repack = [&](Weight& w) {
    if (w.empty() || !quant::q8_0x16_fits(w.view())) return;
    w = Weight::repacked(w, WeightLayout::Q8_0x16);
    bytes += w.bytes();
  };
  for (LayerWeights& L : m.layers)
    for (Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) repack(*w);
  repack(m.output.empty() ? m.tok_embd : m.output);
  return bytes;
}

}  // namespace kamera
