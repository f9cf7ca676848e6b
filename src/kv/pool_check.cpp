// KvPool's invariant check and statistics (kv/pool.h), over both page spaces.
#include <unordered_map>
#include <vector>

#include "kv/pool.h"
#include "kv/pool_impl.h"

namespace kamera {

// One page space: the free list, every sequence's slots in it (range, uniqueness, fill, page
// use), refcounts, leaks and slots shared across sequences. `window`: the window slots (-1
// skipped).
Status KvPool::Impl::check_space(bool window) const {
  const kv_detail::PageSpace& sp = window ? win : main;
  const char* what = window ? "window page" : "page";
  const int pt = sp.page_tokens;
  const size_t n_slots = static_cast<size_t>(sp.n_pages) * pt;
  std::vector<char> is_free(size_t(sp.n_pages), 0);
  for (int32_t p : sp.free_list) {
    if (p < 0 || p >= sp.n_pages)
      return make_error(ErrorCode::Internal, "free list holds {} {} out of range", what, p);
    if (is_free[p])
      return make_error(ErrorCode::Internal, "{} {} is twice in the free list", what, p);
    is_free[p] = 1;
    if (sp.refcount[p] != 0 || sp.fill[p] != 0)
      return make_error(ErrorCode::Internal, "free {} {} has refcount {} fill {}", what, p,
                        sp.refcount[p], sp.fill[p]);
  }
  std::vector<int32_t> refs(size_t(sp.n_pages), 0), slot_users(n_slots, 0);
  std::vector<int32_t> seq_mark(n_slots, -1);  // last sequence (dense index) that used a slot
  std::unordered_map<int32_t, int32_t> use;
  int32_t dense = 0;
  for (const auto& [id, s] : seqs) {
    const std::vector<int32_t>& slots = window ? s.wslots : s.slots;
    if (window && slots.size() != s.slots.size())
      return make_error(ErrorCode::Internal, "sequence {}: {} window slots for {} tokens", id,
                        slots.size(), s.slots.size());
    use.clear();
    for (size_t i = 0; i < slots.size(); ++i) {
      const int32_t slot = slots[i];
      if (window && slot == -1) continue;
      if (slot < 0 || static_cast<size_t>(slot) >= n_slots)
        return make_error(ErrorCode::Internal, "sequence {} token {}: {} slot {} out of range", id,
                          i, what, slot);
      if (seq_mark[slot] == dense)
        return make_error(ErrorCode::Internal, "sequence {}: {} slot {} appears twice (token {})",
                          id, what, slot, i);
      seq_mark[slot] = dense;
      ++slot_users[slot];
      const int32_t p = sp.page_of(slot);
      if (is_free[p])
        return make_error(ErrorCode::Internal, "sequence {} token {}: {} {} is free", id, i, what,
                          p);
      if (sp.offset_of(slot) >= sp.fill[p])
        return make_error(ErrorCode::Internal,
                          "sequence {} token {}: offset {} >= fill {} of {} {}", id, i,
                          sp.offset_of(slot), sp.fill[p], what, p);
      ++use[p];
    }
    if (use != (window ? s.wpage_use : s.page_use))
      return make_error(ErrorCode::Internal, "sequence {}: {} use map is stale", id, what);
    for (const auto& [p, count] : use) ++refs[p];
    ++dense;
  }
  for (int p = 0; p < sp.n_pages; ++p) {
    if (refs[p] != sp.refcount[p])
      return make_error(ErrorCode::Internal, "{} {}: refcount {} but {} sequences reference it",
                        what, p, sp.refcount[p], refs[p]);
    if (sp.fill[p] < 0 || sp.fill[p] > pt)
      return make_error(ErrorCode::Internal, "{} {}: fill {}", what, p, sp.fill[p]);
    if (sp.refcount[p] == 0 && !is_free[p])
      return make_error(ErrorCode::Internal, "{} {} leaked (refcount 0)", what, p);
  }
  for (size_t slot = 0; slot < n_slots; ++slot) {
    const int32_t rc = sp.refcount[sp.page_of(static_cast<int32_t>(slot))];
    if (slot_users[slot] >= 2 && rc < 2)
      return make_error(ErrorCode::Internal, "{} slot {} shared by {} sequences, refcount {}", what,
                        slot, slot_users[slot], rc);
  }
  return Status::Ok();
}

int KvPool::page_refcount(int page) const {
  KAMERA_ASSERT(page >= 0 && page < impl_->n_pages);
  return impl_->main.refcount[page];
}

Status KvPool::check_invariants() const {
  const Impl& m = *impl_;
  int64_t tokens = 0;
  for (const auto& [id, s] : m.seqs) {
    if (s.positions.size() != s.slots.size())
      return make_error(ErrorCode::Internal, "sequence {}: {} positions for {} slots", id,
                        s.positions.size(), s.slots.size());
    if (!m.bounded && !s.wslots.empty())
      return make_error(ErrorCode::Internal, "sequence {}: window slots in an unbounded pool", id);
    if (id < 0 || id >= m.next_id)
      return make_error(ErrorCode::Internal, "sequence id {} never handed out", id);
    tokens += static_cast<int64_t>(s.slots.size());
  }
  if (tokens != m.total_tokens)
    return make_error(ErrorCode::Internal, "token count {} but sequences hold {}", m.total_tokens,
                      tokens);
  KAMERA_TRY(m.check_space(false));
  if (m.bounded) KAMERA_TRY(m.check_space(true));
  return Status::Ok();
}

KvPool::Stats KvPool::stats() const {
  const Impl& m = *impl_;
  Stats st;
  st.pages_total = m.n_pages;
  st.pages_used = m.n_pages - m.main.n_free();
  st.sequences = static_cast<int>(m.seqs.size());
  st.tokens = m.total_tokens;
  st.cow_copies = m.cow_copies;
  st.window_pages_total = m.win.n_pages;
  st.window_pages_used = m.win.n_pages - m.win.n_free();
  return st;
}

}  // namespace kamera
