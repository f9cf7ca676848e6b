// kamera.Window (the agent window) over the C API.
#include "binding.h"

namespace kamera_py {

namespace {

struct Window {
  std::unique_ptr<kamera_window, Deleter<kamera_window, kamera_window_free>> h;
  std::shared_ptr<Context> ctx;
};

kamera_dtype dtype_of(const std::string& s) {
  if (s == "f32") return KAMERA_DTYPE_F32;
  if (s == "bf16") return KAMERA_DTYPE_BF16;
  throw py::value_error("patch_dtype must be 'f32' or 'bf16', not '" + s + "'");
}

kamera_window_policy make_policy(py::object rank, bool deep_half, bool form_on_miss,
                                 py::object patch_byte_budget, const std::string& patch_dtype,
                                 int orbit_orderings) {
  kamera_window_policy p = kamera_window_default_policy();
  p.rank = py::isinstance<py::str>(rank) && rank.cast<std::string>() == "full"
               ? KAMERA_FULL_RANK
               : rank.cast<int32_t>();
  p.deep_half = deep_half;
  p.form_on_miss = form_on_miss;
  if (!patch_byte_budget.is_none()) p.patch_byte_budget = patch_byte_budget.cast<uint64_t>();
  p.patch_dtype = dtype_of(patch_dtype);
  p.orbit_orderings = orbit_orderings;
  return p;
}

std::unique_ptr<Window> make_window(const std::shared_ptr<Context>& ctx, py::object rank,
                                    bool deep_half, bool form_on_miss, py::object budget,
                                    const std::string& dtype, int orbit) {
  const kamera_window_policy p = make_policy(rank, deep_half, form_on_miss, budget, dtype, orbit);
  auto w = std::make_unique<Window>();
  kamera_window* raw = nullptr;
  check(kamera_window_new(ctx->h.get(), &p, &raw));
  w->h.reset(raw);
  w->ctx = ctx;
  return w;
}

// Runs a window call without the GIL (they may run forwards).
template <class F>
void nogil(F&& f) {
  kamera_status st;
  {
    py::gil_scoped_release release;
    st = f();
  }
  check(st);
}

kamera_recall_mode recall_mode(const std::string& s) {
  if (s == "fresh") return KAMERA_RECALL_FRESH;
  if (s == "stale") return KAMERA_RECALL_STALE;
  if (s == "blind") return KAMERA_RECALL_BLIND;
  throw py::value_error("recall mode must be 'fresh', 'stale' or 'blind', not '" + s + "'");
}

kamera_reorder_mode reorder_mode(const std::string& s) {
  if (s == "transfer") return KAMERA_REORDER_TRANSFER;
  if (s == "exact") return KAMERA_REORDER_EXACT;
  if (s == "orbit") return KAMERA_REORDER_ORBIT;
  if (s == "blind") return KAMERA_REORDER_BLIND;
  throw py::value_error("reorder mode must be 'transfer', 'exact', 'orbit' or 'blind', not '" + s +
                        "'");
}

py::list slots(const Window& w) {
  py::list out;
  for (int32_t i = 0; i < kamera_window_n_slots(w.h.get()); ++i) {
    kamera_window_slot s;
    check(kamera_window_get_slot(w.h.get(), i, &s));
    out.append(py::dict(py::arg("id") = std::string(s.id), py::arg("first_token") = s.first_token,
                        py::arg("n_tokens") = s.n_tokens, py::arg("extent") = s.extent,
                        py::arg("position") = s.position, py::arg("patched") = bool(s.patched),
                        py::arg("conditioned") = bool(s.conditioned),
                        py::arg("orbit") = bool(s.orbit), py::arg("clean") = bool(s.clean)));
  }
  return out;
}

std::vector<int32_t> stale(const Window& w) {
  int32_t n = 0;
  check(kamera_window_stale_slots(w.h.get(), nullptr, 0, &n));
  std::vector<int32_t> out(static_cast<size_t>(n));
  check(kamera_window_stale_slots(w.h.get(), out.data(), n, &n));
  return out;
}

py::object query(Window& w, py::handle q, const std::string& logits) {
  const auto chunk = as_chunk(w.ctx->model, q);
  const kamera_logits_mode mode = parse_logits_mode(logits);
  kamera_logits* l = nullptr;
  nogil([&] { return kamera_window_query(w.h.get(), chunk->h.get(), mode, &l); });
  return logits_array(l, mode == KAMERA_LOGITS_LAST);
}

using WindowClass = py::class_<Window>;

// Construction, policy, admission and eviction.
void bind_admission(WindowClass& cls) {
  cls.def(py::init(&make_window), py::arg("context"), py::arg("rank") = 32,
          py::arg("deep_half") = false, py::arg("form_on_miss") = true,
          py::arg("patch_byte_budget") = py::none(), py::arg("patch_dtype") = "f32",
          py::arg("orbit_orderings") = 24)
      .def(
          "set_policy",
          [](Window& w, py::object rank, bool deep_half, bool form_on_miss, py::object budget,
             const std::string& dtype, int orbit) {
            const kamera_window_policy p =
                make_policy(rank, deep_half, form_on_miss, budget, dtype, orbit);
            check(kamera_window_set_policy(w.h.get(), &p));
          },
          py::arg("rank") = 32, py::arg("deep_half") = false, py::arg("form_on_miss") = true,
          py::arg("patch_byte_budget") = py::none(), py::arg("patch_dtype") = "f32",
          py::arg("orbit_orderings") = 24)
      .def(
          "admit_back",
          [](Window& w, const std::shared_ptr<Chunk>& chunk) {
            nogil([&] { return kamera_window_admit_back(w.h.get(), chunk->h.get()); });
          },
          py::arg("chunk"), "Admits the chunk after the last slot")
      .def(
          "admit_front",
          [](Window& w, const std::shared_ptr<Chunk>& chunk) {
            nogil([&] { return kamera_window_admit_front(w.h.get(), chunk->h.get()); });
          },
          py::arg("chunk"), "Admits the chunk before the first slot")
      .def(
          "evict", [](Window& w, int slot) { check(kamera_window_evict(w.h.get(), slot)); },
          py::arg("slot"), "Evicts slot `slot` (the chunk stays in the store)")
      .def(
          "evict_front", [](Window& w) { check(kamera_window_evict(w.h.get(), 0)); },
          "Evicts the first slot (the slide)");
}

// Recall, reorder, views, refresh, fork, query and inspection.
void bind_edits(WindowClass& cls) {
  cls.def(
         "recall",
         [](Window& w, py::object chunk, int at, const std::string& mode) {
           const std::string id = py::isinstance<Chunk>(chunk)
                                      ? py::str(chunk.attr("id")).cast<std::string>()
                                      : chunk.cast<std::string>();
           const kamera_recall_mode rm = recall_mode(mode);
           nogil([&] { return kamera_window_recall(w.h.get(), id.c_str(), at, rm); });
         },
         py::arg("chunk"), py::arg("at") = 0, py::arg("mode") = "fresh",
         "Re-admits a cached chunk (a Chunk or its id) before slot `at`")
      .def(
          "reorder",
          [](Window& w, std::vector<int32_t> order, const std::string& mode) {
            const kamera_reorder_mode rm = reorder_mode(mode);
            nogil([&] {
              return kamera_window_reorder(w.h.get(), order.data(), int32_t(order.size()), rm);
            });
          },
          py::arg("order"), py::arg("mode") = "transfer")
      .def(
          "clean_view",
          [](Window& w, int slot) { check(kamera_window_clean_view(w.h.get(), slot)); },
          py::arg("slot"), "Serves the slot without its patch (its canonical alone)")
      .def(
          "recondition",
          [](Window& w, int slot) { check(kamera_window_recondition(w.h.get(), slot)); },
          py::arg("slot"), "Serves the slot with its patch again")
      .def(
          "refresh",
          [](Window& w, int slot) {
            nogil([&] { return kamera_window_refresh(w.h.get(), slot); });
          },
          py::arg("slot"), "Re-forms the patch of a stale slot")
      .def("stale_slots", &stale, "The slots whose patch no longer matches their antecedents")
      .def(
          "fork",
          [](const Window& w) {
            auto f = std::make_unique<Window>();
            kamera_window* raw = nullptr;
            check(kamera_window_fork(w.h.get(), &raw));
            f->h.reset(raw);
            f->ctx = w.ctx;
            return f;
          },
          "A copy-on-write fork of the window")
      .def("query", &query, py::arg("query"), py::arg("logits") = "last",
           "Logits of a query (Chunk or token ids) after the window, on a scratch fork")
      .def(
          "check", [](const Window& w) { check(kamera_window_check(w.h.get())); },
          "Checks the window's invariants (raises kamera.Error when one is broken)")
      .def_property_readonly("slots", &slots)
      .def_property_readonly("next_position",
                             [](const Window& w) { return kamera_window_next_position(w.h.get()); })
      .def("__len__", [](const Window& w) { return kamera_window_n_slots(w.h.get()); });
}

}  // namespace

void bind_window(py::module_& m) {
  WindowClass cls(m, "Window",
                  "The agent window: chunk slots over one pool sequence, edited in place.");
  bind_admission(cls);
  bind_edits(cls);
}

}  // namespace kamera_py
