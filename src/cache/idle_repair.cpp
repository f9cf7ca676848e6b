#include "cache/idle_repair.h"

#include <vector>

namespace kamera {

namespace {

uint64_t repair_mix(uint64_t h, uint64_t v) {  // FNV-1a over the value's bytes
  for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

// A prompt's key: its tokens and its segments' ids (an image's rows are placeholders in ids).
uint64_t repair_key(const PromptPlan& p) {
  uint64_t h = 14695981039346656037ull;
  for (int32_t t : p.ids) h = repair_mix(h, uint64_t(uint32_t(t)));
  for (const PromptSegment& s : p.segments) h = repair_mix(repair_mix(h, s.id.hi), s.id.lo);
  return repair_mix(h, 1);  // refreshes and orbits never share a key
}

uint64_t repair_key(const ChunkId& id, std::span<const ChunkId> set) {
  uint64_t h = repair_mix(repair_mix(14695981039346656037ull, id.hi), id.lo);
  for (const ChunkId& c : set) h = repair_mix(repair_mix(h, c.hi), c.lo);
  return repair_mix(h, 2);
}

}  // namespace

bool IdleRepairQueue::queue_refresh(const PromptPlan& plan) {
  const uint64_t k = repair_key(plan);
  if (refresh_.size() >= max_refresh_ || !queued_.insert(k).second) return false;
  refresh_.push_back({k, plan});
  return true;
}

bool IdleRepairQueue::queue_orbit(const ChunkId& id, std::vector<ChunkId> set) {
  const uint64_t k = repair_key(id, set);
  if (orbits_.size() >= max_orbits_ || !queued_.insert(k).second) return false;
  orbits_.push_back({k, Orbit{id, std::move(set)}});
  return true;
}

std::optional<PromptPlan> IdleRepairQueue::next_refresh() {
  if (refresh_.empty()) return std::nullopt;
  auto [k, plan] = std::move(refresh_.front());
  refresh_.pop_front();
  queued_.erase(k);
  return std::move(plan);
}

std::optional<IdleRepairQueue::Orbit> IdleRepairQueue::next_orbit() {
  if (orbits_.empty()) return std::nullopt;
  auto [k, o] = std::move(orbits_.front());
  orbits_.pop_front();
  queued_.erase(k);
  return std::move(o);
}

Result<SeqId> mean_rows(KvPool& pool, std::span<const SeqId> members) {
  if (members.size() < 2)
    return make_error(ErrorCode::InvalidArgument, "mean_rows: {} members", members.size());
  const int n = pool.n_tokens(members[0]);
  for (SeqId m : members) {
    if (pool.n_tokens(m) != n)
      return make_error(ErrorCode::InvalidArgument, "mean_rows: members of {} and {} tokens", n,
                        pool.n_tokens(m));
    if (pool.bounded_window() && pool.n_window_rows(m) != n)
      return make_error(ErrorCode::InvalidArgument, "mean_rows: a member lacks window rows");
  }
  const std::span<const Pos> pos = pool.positions(members[0]);
  const std::vector<Pos> positions(pos.begin(), pos.end());
  const SeqId out = pool.create_sequence();
  if (auto at = pool.append(out, positions); !at.ok()) {
    pool.free_sequence(out);
    return at.error();
  }
  const KvLayout& layout = pool.layout();
  const double scale = 1.0 / double(members.size());
  std::vector<float> row, mean;
  std::vector<double> sum;
  for (int l = 0; l < layout.n_layers; ++l)
    for (size_t c = 0; c < layout.channels.size(); ++c) {
      const size_t width = size_t(layout.channels[c].width);
      row.resize(width), mean.resize(width), sum.resize(width);
      for (int t = 0; t < n; ++t) {
        std::fill(sum.begin(), sum.end(), 0.0);
        for (SeqId m : members) {
          pool.read_row(m, l, int(c), t, row.data());
          for (size_t i = 0; i < width; ++i) sum[i] += double(row[i]);
        }
        for (size_t i = 0; i < width; ++i) mean[i] = float(sum[i] * scale);
        pool.write_row(out, l, int(c), t, mean.data());
      }
    }
  return out;
}

}  // namespace kamera
