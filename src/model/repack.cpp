#include "model/repack.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "model/model.h"
#include "ops/quant_repack.h"

namespace kamera {

namespace {

bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, value) == 0;
}

// The layout w is copied into at load, or nothing (stays where it is).
std::optional<WeightLayout> target_layout(const Weight& w) {
  if (w.empty() || w.is_f32() || w.layout() != WeightLayout::Rows) return std::nullopt;
  if (w.view().numerics == Numerics::Ggml) return std::nullopt;  // ggml's order: the file's rows
  const WeightLayout l = quant::x16_layout_of(w.type());
  if (quant::x16_fits(w.view()) && quant::decode_has_x16(l)) return l;
  // F16 and BF16 rows are copied into the block as they are (the same bytes: resident memory
  // does not grow), onto huge pages: on the AMX host's VM their decode read 21-22 GB/s from the
  // file mapping's pages and 23-24 from the block (docs/BENCHMARKS.md, issue 51). Other types
  // with KAMERA_REPACK_COPY=1; KAMERA_REPACK_COPY=0 keeps every type's rows mapped.
  const bool half = w.type() == GgmlType::F16 || w.type() == GgmlType::BF16;
  const bool copy =
      std::getenv("KAMERA_REPACK_COPY") != nullptr ? !env_is("KAMERA_REPACK_COPY", "0") : half;
  if (!w.owned() && copy) return WeightLayout::Rows;
  return std::nullopt;
}

}  // namespace

size_t repack_for_decode(Model& m) {
  if (env_is("KAMERA_REPACK", "0")) return 0;
  struct Job {
    Weight* w;
    WeightLayout layout;
    size_t at;
  };
  std::vector<Job> jobs;
  size_t total = 0;
  auto plan = [&](Weight& w) {
    const auto l = target_layout(w);
    if (!l) return;
    jobs.push_back({&w, *l, total});
    total += (Weight::repacked_bytes(w, *l) + 63) / 64 * 64;
  };
  for (LayerWeights& L : m.layers)
    for (Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) plan(*w);
  plan(m.output.empty() ? m.tok_embd : m.output);
  if (jobs.empty()) return 0;
  // One block for every copy: huge pages for the per-layer matrices too, not only the head.
  const std::shared_ptr<void> block = Weight::block(total);
  auto* base = static_cast<uint8_t*>(block.get());
  for (const Job& j : jobs) *j.w = Weight::repacked_into(*j.w, j.layout, block, base + j.at);
  return total;
}

}  // namespace kamera
