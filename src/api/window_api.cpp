// The agent window: admit, evict, recall, reorder, clean view / recondition, refresh, fork,
// query, and its slots (include/kamera.h).
#include <limits>

#include "api/handles.h"

using namespace kamera;
using namespace kamera::api;

namespace {

static_assert(KAMERA_REORDER_TRANSFER == int(ReorderMode::Transfer) &&
                  KAMERA_REORDER_EXACT == int(ReorderMode::Exact) &&
                  KAMERA_REORDER_ORBIT == int(ReorderMode::Orbit) &&
                  KAMERA_REORDER_BLIND == int(ReorderMode::Blind),
              "kamera_reorder_mode must keep ReorderMode's order");

Result<WindowPolicy> window_policy(const kamera_window_policy& p) {
  if (p.rank != KAMERA_FULL_RANK && p.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "patch rank {} must be >= 1 or full", p.rank);
  if (p.patch_dtype != KAMERA_DTYPE_F32 && p.patch_dtype != KAMERA_DTYPE_BF16)
    return make_error(ErrorCode::InvalidArgument, "unknown patch dtype {}", int(p.patch_dtype));
  if (p.orbit_orderings < 1)
    return make_error(ErrorCode::InvalidArgument, "orbit_orderings {} must be >= 1",
                      p.orbit_orderings);
  WindowPolicy w;
  w.rank = p.rank;
  w.deep_half = p.deep_half != 0;
  w.form_on_miss = p.form_on_miss != 0;
  w.patch_byte_budget = p.patch_byte_budget >= std::numeric_limits<size_t>::max()
                            ? SIZE_MAX
                            : size_t(p.patch_byte_budget);
  w.patch_dtype = p.patch_dtype == KAMERA_DTYPE_BF16 ? DType::BF16 : DType::F32;
  w.orbit_orderings = p.orbit_orderings;
  return w;
}

// Runs a Window operation on a checked window and records its error under the function's name.
template <class Op>
kamera_status window_op(const char* fn, kamera_window* w, Op&& op) {
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, w);
    const Status st = op(*w->window);
    return st.ok() ? KAMERA_OK : set_error(with_context(st.error(), fn));
  });
}

kamera_status admit(const char* fn, kamera_window* w, const kamera_chunk* chunk, bool front) {
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, w);
    KAMERA_API_REQUIRE(fn, chunk);
    if (auto st = check_chunk_model(fn, chunk, w->box->ctx->model()); st != KAMERA_OK) return st;
    const Status st =
        front ? w->window->admit_front(chunk->content) : w->window->admit_back(chunk->content);
    return st.ok() ? KAMERA_OK : set_error(with_context(st.error(), fn));
  });
}

}  // namespace

extern "C" {

kamera_window_policy kamera_window_default_policy(void) {
  kamera_window_policy p{};
  p.rank = 32;
  p.deep_half = 0;
  p.form_on_miss = 1;
  p.patch_byte_budget = UINT64_MAX;
  p.patch_dtype = KAMERA_DTYPE_F32;
  p.orbit_orderings = 24;
  return p;
}

kamera_status kamera_window_new(kamera_context* ctx, const kamera_window_policy* policy,
                                kamera_window** out) {
  clear_out(out);
  return guarded("kamera_window_new", [&] {
    KAMERA_API_REQUIRE("kamera_window_new", ctx);
    KAMERA_API_REQUIRE("kamera_window_new", out);
    auto pol = window_policy(policy ? *policy : kamera_window_default_policy());
    if (!pol.ok()) return set_error(with_context(pol.error(), "kamera_window_new"));
    auto w = Window::create(*ctx->box->ctx, *pol);
    if (!w.ok()) return set_error(with_context(w.error(), "kamera_window_new"));
    *out = new kamera_window{ctx->box, std::move(w.value())};
    return KAMERA_OK;
  });
}

void kamera_window_free(kamera_window* window) {
  delete window;
}

kamera_status kamera_window_set_policy(kamera_window* window, const kamera_window_policy* policy) {
  return guarded("kamera_window_set_policy", [&] {
    KAMERA_API_REQUIRE("kamera_window_set_policy", window);
    KAMERA_API_REQUIRE("kamera_window_set_policy", policy);
    auto pol = window_policy(*policy);
    if (!pol.ok()) return set_error(with_context(pol.error(), "kamera_window_set_policy"));
    window->window->set_policy(*pol);
    return KAMERA_OK;
  });
}

kamera_status kamera_window_admit_back(kamera_window* window, const kamera_chunk* chunk) {
  return admit("kamera_window_admit_back", window, chunk, false);
}

kamera_status kamera_window_admit_front(kamera_window* window, const kamera_chunk* chunk) {
  return admit("kamera_window_admit_front", window, chunk, true);
}

kamera_status kamera_window_evict(kamera_window* window, int32_t slot) {
  return window_op("kamera_window_evict", window, [&](Window& w) { return w.evict(slot); });
}

kamera_status kamera_window_recall(kamera_window* window, const char* chunk_id, int32_t at,
                                   kamera_recall_mode mode) {
  return window_op("kamera_window_recall", window, [&](Window& w) -> Status {
    if (!chunk_id) return make_error(ErrorCode::InvalidArgument, "argument 'chunk_id' is null");
    const auto id = ChunkId::from_hex(chunk_id);
    if (!id)
      return make_error(ErrorCode::InvalidArgument, "'{}' is not a chunk id (32 hex digits)",
                        chunk_id);
    if (mode != KAMERA_RECALL_FRESH && mode != KAMERA_RECALL_STALE && mode != KAMERA_RECALL_BLIND)
      return make_error(ErrorCode::InvalidArgument, "unknown recall mode {}", int(mode));
    const RecallMode m = mode == KAMERA_RECALL_FRESH   ? RecallMode::Fresh
                         : mode == KAMERA_RECALL_STALE ? RecallMode::Stale
                                                       : RecallMode::Blind;
    return w.recall(*id, at, m);
  });
}

kamera_status kamera_window_reorder(kamera_window* window, const int32_t* order, int32_t n,
                                    kamera_reorder_mode mode) {
  return window_op("kamera_window_reorder", window, [&](Window& w) -> Status {
    if (n < 0 || (n > 0 && !order))
      return make_error(ErrorCode::InvalidArgument, "{} indices at a null pointer", n);
    if (mode < KAMERA_REORDER_TRANSFER || mode > KAMERA_REORDER_BLIND)
      return make_error(ErrorCode::InvalidArgument, "unknown reorder mode {}", int(mode));
    const std::vector<int> ord(order, order + n);
    return w.reorder(ord, static_cast<ReorderMode>(mode));
  });
}

kamera_status kamera_window_clean_view(kamera_window* window, int32_t slot) {
  return window_op("kamera_window_clean_view", window,
                   [&](Window& w) { return w.clean_view(slot); });
}

kamera_status kamera_window_recondition(kamera_window* window, int32_t slot) {
  return window_op("kamera_window_recondition", window,
                   [&](Window& w) { return w.recondition(slot); });
}

kamera_status kamera_window_refresh(kamera_window* window, int32_t slot) {
  return window_op("kamera_window_refresh", window, [&](Window& w) { return w.refresh(slot); });
}

kamera_status kamera_window_stale_slots(const kamera_window* window, int32_t* slots,
                                        int32_t capacity, int32_t* n) {
  static const char* fn = "kamera_window_stale_slots";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, window);
    KAMERA_API_REQUIRE(fn, n);
    if (capacity < 0 || (!slots && capacity > 0))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: capacity {} at a null pointer", fn, capacity);
    const std::vector<int> stale = window->window->stale_slots();
    *n = int32_t(stale.size());
    if (!slots) return KAMERA_OK;
    if (int64_t(stale.size()) > capacity)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} stale slots, the buffer holds {}", fn,
                  stale.size(), capacity);
    std::copy(stale.begin(), stale.end(), slots);
    return KAMERA_OK;
  });
}

kamera_status kamera_window_fork(const kamera_window* window, kamera_window** out) {
  clear_out(out);
  return guarded("kamera_window_fork", [&] {
    KAMERA_API_REQUIRE("kamera_window_fork", window);
    KAMERA_API_REQUIRE("kamera_window_fork", out);
    auto f = window->window->fork();
    if (!f.ok()) return set_error(with_context(f.error(), "kamera_window_fork"));
    *out = new kamera_window{window->box, std::move(f.value())};
    return KAMERA_OK;
  });
}

kamera_status kamera_window_query(kamera_window* window, const kamera_chunk* query,
                                  kamera_logits_mode mode, kamera_logits** out) {
  clear_out(out);
  static const char* fn = "kamera_window_query";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, window);
    KAMERA_API_REQUIRE(fn, query);
    KAMERA_API_REQUIRE(fn, out);
    if (mode != KAMERA_LOGITS_LAST && mode != KAMERA_LOGITS_ALL)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: logits mode must be LAST or ALL", fn);
    const Model& m = window->box->ctx->model();
    if (auto st = check_chunk_model(fn, query, m); st != KAMERA_OK) return st;
    auto r = window->window->query(query->content,
                                   mode == KAMERA_LOGITS_ALL ? LogitsMode::All : LogitsMode::Last);
    if (!r.ok()) return set_error(with_context(r.error(), fn));
    auto h = std::make_unique<kamera_logits>();
    h->box = window->box;
    h->n_vocab = m.cfg.n_vocab;
    h->rows = int32_t(r->size() / size_t(h->n_vocab));
    h->data = std::move(r.value());
    *out = h.release();
    return KAMERA_OK;
  });
}

int32_t kamera_window_n_slots(const kamera_window* window) {
  return window ? int32_t(window->window->slots().size()) : 0;
}

int32_t kamera_window_next_position(const kamera_window* window) {
  return window ? window->window->next_position() : 0;
}

kamera_status kamera_window_get_slot(const kamera_window* window, int32_t slot,
                                     kamera_window_slot* out) {
  return guarded("kamera_window_get_slot", [&] {
    KAMERA_API_REQUIRE("kamera_window_get_slot", window);
    KAMERA_API_REQUIRE("kamera_window_get_slot", out);
    const auto& slots = window->window->slots();
    if (slot < 0 || slot >= int32_t(slots.size()))
      return fail(KAMERA_ERR_NOT_FOUND, "kamera_window_get_slot: no slot {} (the window has {})",
                  slot, slots.size());
    const WindowSlot& s = slots[size_t(slot)];
    *out = kamera_window_slot{};
    write_hex(s.id, out->id);
    out->first_token = window->window->token_index(slot);
    out->n_tokens = s.n_tokens();
    out->extent = s.extent();
    out->position = s.position;
    out->patched = s.patch != nullptr;
    out->conditioned = s.conditioned;
    out->orbit = s.orbit;
    out->clean = s.clean;
    return KAMERA_OK;
  });
}

kamera_status kamera_window_check(const kamera_window* window) {
  return guarded("kamera_window_check", [&] {
    KAMERA_API_REQUIRE("kamera_window_check", window);
    const Status st = window->window->check_invariants();
    return st.ok() ? KAMERA_OK : set_error(with_context(st.error(), "kamera_window_check"));
  });
}

}  // extern "C"
