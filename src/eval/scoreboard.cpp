#include "eval/scoreboard.h"

#include <algorithm>
#include <map>

#include "eval/metrics.h"
#include "model/sampler.h"
#include "reuse/relocate.h"

namespace kamera {

ArmCost& ArmCost::operator+=(const ArmCost& o) {
  recompute_fraction += o.recompute_fraction;
  bytes_fraction += o.bytes_fraction;
  kv_bytes += o.kv_bytes;
  flops += o.flops;
  return *this;
}

void KvError::add(const ChunkKV& served, const ChunkKV& cond) {
  std::vector<float> x, y;
  for (size_t b = 0; b < served.blocks.size(); ++b) {
    const int w = served.blocks[b].cols();
    x.resize(w);
    y.resize(w);
    double num = 0, den = 0;
    for (int i = 0; i < served.n_tokens; ++i) {
      served.blocks[b].get_row(i, x.data());
      cond.blocks[b].get_row(i, y.data());
      for (int j = 0; j < w; ++j) {
        num = std::max(num, double(std::fabs(x[j] - y[j])));
        den = std::max(den, double(std::fabs(y[j])));
        max_ulp = std::max(max_ulp, ulp_distance(x[j], y[j]));
      }
    }
    max_abs = std::max(max_abs, num);
    if (den > 0) max_rel = std::max(max_rel, num / den);
  }
}

int Scoreboard::add_measurement(const MeasurementInfo& m) {
  measurements_.push_back(m);
  return int(measurements_.size()) - 1;
}

std::vector<int> Scoreboard::of_item(int item) const {
  std::vector<int> out;
  for (size_t i = 0; i < measurements_.size(); ++i)
    if (measurements_[i].item == item) out.push_back(int(i));
  return out;
}

ArmRecord& Scoreboard::arm(const ArmKey& key) {
  for (ArmRecord& a : arms_)
    if (a.key == key) return a;
  arms_.push_back(ArmRecord{key, {}, {}, {}, {}, {}, 0, {}});
  return arms_.back();
}

const ArmRecord* Scoreboard::find(const ArmKey& key) const {
  for (const ArmRecord& a : arms_)
    if (a.key == key) return &a;
  return nullptr;
}

void Scoreboard::score(ArmRecord& a, int m, std::span<const float> ref,
                       std::span<const float> logits, int n_vocab) {
  a.measurement.push_back(m);
  a.kl.push_back(mean_kl_rows(ref, logits, n_vocab));
  a.last_argmax.push_back(argmax(logits.subspan(logits.size() - size_t(n_vocab))));
}

namespace {

// Index of each measurement in a record's arrays (-1: not scored there).
std::map<int, size_t> by_measurement(const ArmRecord* a) {
  std::map<int, size_t> out;
  if (a)
    for (size_t i = 0; i < a->measurement.size(); ++i) out[a->measurement[i]] = i;
  return out;
}

}  // namespace

ArmStats summarize(const Scoreboard& board, const ArmRecord& arm, const ArmRecord* eta_base,
                   const ArmRecord* blind, const MeasurementFilter& keep) {
  const auto base_at = by_measurement(eta_base), blind_at = by_measurement(blind);
  std::vector<double> kl, base_kl;
  std::vector<int32_t> ref, blind_am, arm_am;
  ArmStats s;
  int right = 0, with_gold = 0;
  for (size_t i = 0; i < arm.measurement.size(); ++i) {
    const MeasurementInfo& m = board.measurements()[size_t(arm.measurement[i])];
    if (keep && !keep(m)) continue;
    kl.push_back(arm.kl[i]);
    arm_am.push_back(arm.last_argmax[i]);
    ref.push_back(m.ref_argmax);
    if (auto it = base_at.find(arm.measurement[i]); it != base_at.end())
      base_kl.push_back(eta_base->kl[it->second]);
    if (auto it = blind_at.find(arm.measurement[i]); it != blind_at.end())
      blind_am.push_back(blind->last_argmax[it->second]);
    if (m.gold >= 0) {
      ++with_gold;
      right += arm.last_argmax[i] == m.gold;
    }
  }
  s.n = int(kl.size());
  s.kl = mean(kl);
  s.kl_median = median(kl);
  if (eta_base && base_kl.size() == kl.size()) {
    s.eta = eta(kl, base_kl).value_or(NAN);
    s.eta_median = eta_median(kl, base_kl).value_or(NAN);
  }
  if (blind && blind_am.size() == arm_am.size()) {
    for (size_t i = 0; i < ref.size(); ++i) s.flips += ref[i] != blind_am[i];
    s.flip_recover = flip_recover(ref, blind_am, arm_am).value_or(NAN);
  }
  s.argmax_agree = argmax_agree(ref, arm_am);
  if (with_gold) s.accuracy = double(right) / with_gold;
  return s;
}

}  // namespace kamera
