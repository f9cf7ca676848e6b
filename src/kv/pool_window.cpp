// KvPool's window rows (kv/pool.h, "Window layers"): the rows of sliding-window layers held in
// a page space of their own, given to tokens before they run and given back once no query can
// read them. In a pool that is not bounded every call is a no-op and every token has its rows.
#include <algorithm>

#include "kv/pool.h"
#include "kv/pool_impl.h"

namespace kamera {

int KvPool::drop_window_rows(SeqId seq, int32_t below, int end) {
  Impl& m = *impl_;
  Impl::Sequence& s = m.get(seq);
  if (!m.bounded) return 0;
  end = std::clamp(end, 0, static_cast<int>(s.slots.size()));
  int dropped = 0;
  for (int i = 0; i < end; ++i) {
    int32_t& w = s.wslots[size_t(i)];
    if (w < 0 || !(s.positions[size_t(i)].t < below)) continue;
    m.win.drop_use(s.wpage_use, m.win.page_of(w));
    w = -1;
    ++dropped;
  }
  if (s.wtail >= 0 && !s.wpage_use.count(m.win.page_of(s.wtail))) s.wtail = -1;
  return dropped;
}

Status KvPool::add_window_rows(SeqId seq, int begin, int end) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: add_window_rows of unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (begin < 0 || begin > end || end > n)
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: add_window_rows [{}, {}) outside [0, {}] of sequence {}", begin,
                      end, n, seq);
  if (!m.bounded) return Status::Ok();
  std::vector<int> need;
  for (int i = begin; i < end; ++i)
    if (s->wslots[size_t(i)] < 0) need.push_back(i);
  if (need.empty()) return Status::Ok();
  const int64_t count = static_cast<int64_t>(need.size());
  const int64_t in_tail = std::min(m.win.tail_room(s->wpage_use, s->wtail), count);
  const int64_t fresh = m.win.pages_for(in_tail, count);
  if (fresh > m.win.n_free())
    return make_error(ErrorCode::OutOfMemory,
                      "kv pool full: {} window rows for sequence {} need {} free window pages, {} "
                      "left",
                      count, seq, fresh, m.win.n_free());
  std::vector<int32_t> got(static_cast<size_t>(count));
  m.win.allocate(s->wpage_use, s->wtail, in_tail, count, got.data());
  for (size_t k = 0; k < need.size(); ++k) s->wslots[size_t(need[k])] = got[k];
  s->wtail = got.back();
  return Status::Ok();
}

bool KvPool::has_window_row(SeqId seq, int token) const {
  const Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
  return !m.bounded || s.wslots[size_t(token)] >= 0;
}

int KvPool::missing_window_row(SeqId seq, int32_t from, int end) const {
  const Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  if (!m.bounded) return -1;
  end = std::clamp(end, 0, static_cast<int>(s.slots.size()));
  for (int i = 0; i < end; ++i)
    if (s.wslots[size_t(i)] < 0 && !(s.positions[size_t(i)].t < from)) return i;
  return -1;
}

int KvPool::n_window_rows(SeqId seq) const {
  const Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  if (!m.bounded) return static_cast<int>(s.slots.size());
  return static_cast<int>(
      std::count_if(s.wslots.begin(), s.wslots.end(), [](int32_t w) { return w >= 0; }));
}

}  // namespace kamera
