// libFuzzer target: the llama2.c checkpoint parser (v0 and v1) on arbitrary bytes. A parsed
// model must also survive a short forward pass.
#include <cstddef>
#include <cstdint>

#include "model/forward.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = kamera::load_llama2c_bytes(data, size, "fuzz.bin");
  if (!m.ok()) return 0;
  const kamera::Model& model = **m;
  if (int64_t(model.cfg.dim) * model.cfg.n_vocab > (1 << 20)) return 0;  // keep runs fast
  kamera::KvPool::Params p;
  p.layout = model.kv_layout();
  p.page_tokens = 4;
  p.n_pages = 2;
  auto pool = kamera::KvPool::create(p);
  if (!pool.ok()) return 0;
  kamera::Engine engine(model, 1);
  const kamera::SeqId s = (*pool)->create_sequence();
  const int32_t ids[2] = {0, model.cfg.n_vocab - 1};
  const kamera::Pos pos[2] = {kamera::Pos::linear(0), kamera::Pos::linear(1)};
  auto r = engine.forward(**pool, s, kamera::ForwardInput::from_tokens(ids, pos));
  (void)r;
  return 0;
}
