// kamera.Context (engine, KV pool, chunk store) and kamera.Sequence over the C API.
#include "binding.h"

namespace kamera_py {

namespace {

struct Sequence {
  std::shared_ptr<kamera_seq> h;
  std::shared_ptr<Context> ctx;
};

std::shared_ptr<Context> make_context(const std::shared_ptr<Model>& model, int n_threads,
                                      int64_t kv_tokens, int page_tokens, uint64_t store_bytes,
                                      py::object disk_dir, std::vector<int32_t> anchor,
                                      const std::string& kv_type, bool swa_full) {
  kamera_context_params p = kamera_context_default_params();
  p.swa_full = swa_full ? 1 : 0;
  if (kv_type == "f32")
    p.kv_type = KAMERA_DTYPE_F32;
  else if (kv_type == "f16")
    p.kv_type = KAMERA_DTYPE_F16;
  else if (kv_type == "bf16")
    p.kv_type = KAMERA_DTYPE_BF16;
  else
    throw py::value_error("kv_type must be 'f32', 'f16' or 'bf16', not '" + kv_type + "'");
  p.n_threads = n_threads;
  p.kv_tokens = kv_tokens;
  p.page_tokens = page_tokens;
  p.store_bytes = store_bytes;
  std::string dir;
  if (!disk_dir.is_none()) {
    dir = py::str(disk_dir);
    p.disk_dir = dir.c_str();
  }
  p.anchor = anchor.empty() ? nullptr : anchor.data();
  p.n_anchor = int32_t(anchor.size());
  kamera_context* raw = nullptr;
  check(kamera_context_new(model->h.get(), &p, &raw));
  auto c = std::make_shared<Context>();
  c->h = ContextPtr(raw, kamera_context_free);
  c->model = model;
  return c;
}

kamera_policy parse_policy(const std::string& s) {
  if (s == "blind") return KAMERA_POLICY_BLIND;
  if (s == "patch") return KAMERA_POLICY_PATCH;
  if (s == "reprefill") return KAMERA_POLICY_REPREFILL;
  throw py::value_error("policy must be 'blind', 'patch' or 'reprefill', not '" + s + "'");
}

kamera_dtype parse_dtype(const std::string& s) {
  if (s == "f32") return KAMERA_DTYPE_F32;
  if (s == "bf16") return KAMERA_DTYPE_BF16;
  throw py::value_error("patch_dtype must be 'f32' or 'bf16', not '" + s + "'");
}

int32_t parse_rank(py::object rank) {
  if (py::isinstance<py::str>(rank) && rank.cast<std::string>() == "full") return KAMERA_FULL_RANK;
  return rank.cast<int32_t>();
}

std::shared_ptr<Sequence> assemble(const std::shared_ptr<Context>& ctx, py::list chunks,
                                   const std::string& policy, py::object rank, py::object layers,
                                   bool form_on_miss, bool per_head, bool cap_rank,
                                   const std::string& patch_dtype) {
  std::vector<std::shared_ptr<Chunk>> owned;
  std::vector<const kamera_chunk*> raw;
  for (py::handle c : chunks) {
    owned.push_back(as_chunk(ctx->model, c));
    raw.push_back(owned.back()->h.get());
  }
  kamera_serve_options o = kamera_serve_default_options();
  o.policy = parse_policy(policy);
  o.rank = parse_rank(rank);
  std::string layer_spec = layers.is_none() ? "" : py::str(layers).cast<std::string>();
  o.layers = layers.is_none() ? nullptr : layer_spec.c_str();
  o.form_on_miss = form_on_miss;
  o.per_head = per_head;
  o.cap_rank = cap_rank;
  o.patch_dtype = parse_dtype(patch_dtype);
  kamera_seq* seq = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_seq_assemble(ctx->h.get(), raw.data(), int32_t(raw.size()), &o, &seq));
  }
  return std::make_shared<Sequence>(
      Sequence{std::shared_ptr<kamera_seq>(seq, kamera_seq_free), ctx});
}

const char* source_name(kamera_segment_source s) {
  static const char* names[] = {
      "canonical", "patch_hit",     "patch_formed",        "blind",       "reprefilled",
      "prefix",    "context_exact", "context_nearest",     "patch_exact", "patch_nearest",
      "keep",      "store_patch",   "store_patch_nearest", "recomputed",  "prefix_approximate"};
  return s >= 0 && s <= KAMERA_SOURCE_PREFIX_APPROXIMATE ? names[s] : "?";
}

kamera_reuse_policy parse_reuse(const std::string& s) {
  if (s == "patch") return KAMERA_REUSE_PATCH;
  if (s == "keep") return KAMERA_REUSE_KEEP;
  if (s == "prefix") return KAMERA_REUSE_PREFIX;
  if (s == "blind") return KAMERA_REUSE_BLIND;
  if (s == "reprefill") return KAMERA_REUSE_REPREFILL;
  throw py::value_error("reuse must be 'patch', 'keep', 'prefix', 'blind' or 'reprefill', not '" +
                        s + "'");
}

// A prompt served from what the context has seen: (Sequence, the last token's logits).
py::tuple prompt_eval(const std::shared_ptr<Context>& ctx, const std::vector<int32_t>& tokens,
                      const std::string& reuse, double reuse_budget) {
  const kamera_reuse_policy p = parse_reuse(reuse);
  kamera_seq* seq = nullptr;
  kamera_logits* l = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_prompt_eval_budget(ctx->h.get(), tokens.data(), int32_t(tokens.size()), p,
                                    reuse_budget, &seq, &l));
  }
  auto s =
      std::make_shared<Sequence>(Sequence{std::shared_ptr<kamera_seq>(seq, kamera_seq_free), ctx});
  return py::make_tuple(s, logits_array(l, true));
}

// One token for each sequence in one batched forward: logits (n, n_vocab).
py::object decode_batch(const std::shared_ptr<Context>& ctx, py::list seqs,
                        const std::vector<int32_t>& tokens) {
  std::vector<kamera_seq*> raw;
  for (py::handle h : seqs) {
    auto s = py::cast<std::shared_ptr<Sequence>>(h);
    if (s->ctx != ctx) throw py::value_error("a sequence of another context");
    raw.push_back(s->h.get());
  }
  if (raw.size() != tokens.size()) throw py::value_error("one token per sequence");
  kamera_logits* l = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_decode_batch(raw.data(), tokens.data(), int32_t(raw.size()), &l));
  }
  return logits_array(l, false);
}

py::dict report(const Sequence& s) {
  kamera_serve_report r;
  check(kamera_seq_get_report(s.h.get(), &r));
  py::list segs;
  for (int32_t i = 0; i < r.n_segments; ++i) {
    kamera_segment g;
    check(kamera_seq_get_segment(s.h.get(), i, &g));
    segs.append(py::dict(py::arg("id") = std::string(g.id), py::arg("first_token") = g.first_token,
                         py::arg("n_tokens") = g.n_tokens, py::arg("position") = g.position,
                         py::arg("source") = source_name(g.source)));
  }
  return py::dict(py::arg("forwards") = r.forwards, py::arg("tokens_computed") = r.tokens_computed,
                  py::arg("tokens_reused") = r.tokens_reused, py::arg("segments") = segs);
}

py::object seq_eval(Sequence& s, py::handle input, const std::string& logits) {
  const auto chunk = as_chunk(s.ctx->model, input);
  const kamera_logits_mode mode = parse_logits_mode(logits);
  kamera_logits* l = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_seq_eval_chunk(s.h.get(), chunk->h.get(), mode, mode ? &l : nullptr));
  }
  if (!l) return py::none();
  return logits_array(l, mode == KAMERA_LOGITS_LAST);
}

py::dict store_stats(const Context& c) {
  kamera_store_stats s;
  check(kamera_store_get_stats(c.h.get(), &s));
  py::list tiers;
  for (int32_t i = 0; i < s.n_tiers; ++i) {
    kamera_tier_stats t;
    check(kamera_store_get_tier_stats(c.h.get(), i, &t));
    tiers.append(py::dict(py::arg("name") = std::string(t.name), py::arg("hits") = t.hits,
                          py::arg("misses") = t.misses, py::arg("writes") = t.writes,
                          py::arg("errors") = t.errors, py::arg("discarded") = t.discarded,
                          py::arg("bytes") = t.bytes));
  }
  return py::dict(py::arg("canonical_hits") = s.canonical_hits,
                  py::arg("canonical_misses") = s.canonical_misses,
                  py::arg("patch_hits") = s.patch_hits, py::arg("patch_misses") = s.patch_misses,
                  py::arg("tier_canonical_hits") = s.tier_canonical_hits,
                  py::arg("tier_patch_hits") = s.tier_patch_hits,
                  py::arg("canonical_evictions") = s.canonical_evictions,
                  py::arg("patch_evictions") = s.patch_evictions,
                  py::arg("canonical_entries") = s.canonical_entries,
                  py::arg("patch_entries") = s.patch_entries,
                  py::arg("canonical_bytes") = s.canonical_bytes,
                  py::arg("patch_bytes") = s.patch_bytes, py::arg("byte_budget") = s.byte_budget,
                  py::arg("patch_byte_budget") = s.patch_byte_budget,
                  py::arg("bytes_saved") = s.bytes_saved, py::arg("tiers") = tiers);
}

py::dict pool_stats(const Context& c) {
  kamera_pool_stats s;
  check(kamera_context_pool_stats(c.h.get(), &s));
  return py::dict(py::arg("pages_total") = s.pages_total, py::arg("pages_used") = s.pages_used,
                  py::arg("sequences") = s.sequences, py::arg("tokens") = s.tokens,
                  py::arg("cow_copies") = s.cow_copies);
}

}  // namespace

kamera_logits_mode parse_logits_mode(const std::string& s) {
  if (s == "none") return KAMERA_LOGITS_NONE;
  if (s == "last") return KAMERA_LOGITS_LAST;
  if (s == "all") return KAMERA_LOGITS_ALL;
  throw py::value_error("logits must be 'none', 'last' or 'all', not '" + s + "'");
}

py::object logits_array(kamera_logits* l, bool squeeze) {
  py::capsule owner(l, [](void* p) { kamera_logits_free(static_cast<kamera_logits*>(p)); });
  const py::ssize_t rows = kamera_logits_rows(l), nv = kamera_logits_n_vocab(l);
  if (squeeze && rows == 1) return readonly_array(kamera_logits_data(l), {nv}, owner);
  return readonly_array(kamera_logits_data(l), {rows, nv}, owner);
}

namespace {

void bind_context_class(py::module_& m) {
  // Declared first by the module (module.cpp), so that signatures naming it read "Context"
  py::reinterpret_borrow<py::class_<Context, std::shared_ptr<Context>>>(m.attr("Context"))
      .def(py::init(&make_context), py::arg("model"), py::arg("n_threads") = 2,
           py::arg("kv_tokens") = 0, py::arg("page_tokens") = 16,
           py::arg("store_bytes") = uint64_t(1) << 30, py::arg("disk_dir") = py::none(),
           py::arg("anchor") = std::vector<int32_t>{}, py::arg("kv_type") = "f32",
           py::arg("swa_full") = false,
           "kv_type: element type of the KV pool, canonicals, patches and store tiers (f32, f16 "
           "or bf16; docs/KV_DTYPE.md). swa_full: sliding-window layers keep every token's row "
           "(every reuse path; False: only the window, cached prompts resumed at their end)")
      .def_property_readonly("model", [](const Context& c) { return c.model; })
      .def(
          "cache",
          [](Context& c, const std::shared_ptr<Chunk>& chunk) {
            int32_t formed = 0;
            py::gil_scoped_release nogil;
            check(kamera_context_cache_chunk(c.h.get(), chunk->h.get(), &formed));
            return formed != 0;
          },
          py::arg("chunk"), "Caches the chunk's canonical KV; True when a forward formed it")
      .def("assemble", &assemble, py::arg("chunks"), py::arg("policy") = "patch",
           py::arg("rank") = 32, py::arg("layers") = py::none(), py::arg("form_on_miss") = true,
           py::arg("per_head") = false, py::arg("cap_rank") = true, py::arg("patch_dtype") = "f32",
           "A Sequence [anchor][chunks...] served by the policy")
      .def(
          "sequence",
          [](const std::shared_ptr<Context>& c) {
            kamera_seq* s = nullptr;
            check(kamera_seq_new(c->h.get(), &s));
            return std::make_shared<Sequence>(
                Sequence{std::shared_ptr<kamera_seq>(s, kamera_seq_free), c});
          },
          "An empty Sequence (no anchor)")
      .def("prompt_eval", &prompt_eval, py::arg("tokens"), py::arg("reuse") = "patch",
           py::arg("reuse_budget") = 0.0,
           "A prompt of token ids served from what the context has seen (the exact prefix, then "
           "segments seen in other contexts, the rest prefilled): (Sequence, last logits); its "
           "report names each run's source. reuse_budget (patch only, 0 to 1): the share of the "
           "tokens served from another context recomputed in context instead, the segments whose "
           "context differs most first (kamera_prompt_eval_budget)")
      .def("decode_batch", &decode_batch, py::arg("sequences"), py::arg("tokens"),
           "One token for each sequence at its next position, in one forward: logits (n, vocab)")
      .def("store_stats", &store_stats,
           "The chunk store's counters and bytes, and its tiers' (a dict)")
      .def("pool_stats", &pool_stats, "The KV pool's pages, sequences and tokens (a dict)")
      .def(
          "set_store_budget",
          [](Context& c, uint64_t bytes) { check(kamera_store_set_budget(c.h.get(), bytes)); },
          py::arg("bytes"), "The memory tier's byte budget (least recently used entries go)")
      .def(
          "set_patch_budget",
          [](Context& c, uint64_t bytes) {
            check(kamera_store_set_patch_budget(c.h.get(), bytes));
          },
          py::arg("bytes"), "The patches' share of the memory tier, in bytes")
      .def(
          "add_disk_tier",
          [](Context& c, const std::string& dir) {
            check(kamera_store_add_disk_tier(c.h.get(), dir.c_str()));
          },
          py::arg("dir"), "Adds a disk tier under `dir` (entries survive the process)")
      .def(
          "clear_store", [](Context& c) { check(kamera_store_clear(c.h.get())); },
          "Drops every entry of the memory tier");
}

void bind_sequence_class(py::module_& m) {
  py::class_<Sequence, std::shared_ptr<Sequence>>(m, "Sequence",
                                                  "A sequence of the context's KV pool.")
      .def("eval", &seq_eval, py::arg("input"), py::arg("logits") = "last",
           "Runs a Chunk or token ids at the next position; logits as a read-only array")
      .def(
          "fork",
          [](const Sequence& s) {
            kamera_seq* f = nullptr;
            check(kamera_seq_fork(s.h.get(), &f));
            return std::make_shared<Sequence>(
                Sequence{std::shared_ptr<kamera_seq>(f, kamera_seq_free), s.ctx});
          },
          "A copy-on-write fork (pages shared until written)")
      .def(
          "remember", [](Sequence& s) { check(kamera_seq_remember(s.h.get())); },
          "Keeps a prompt_eval sequence's prompt and what was evaluated after it for later "
          "prompts")
      .def_property_readonly("report", &report)
      .def_property_readonly("n_tokens",
                             [](const Sequence& s) { return kamera_seq_n_tokens(s.h.get()); })
      .def_property_readonly("next_position",
                             [](const Sequence& s) { return kamera_seq_next_position(s.h.get()); });
}

}  // namespace

void bind_context(py::module_& m) {
  bind_sequence_class(m);  // first: Context's methods return Sequences
  bind_context_class(m);
}

}  // namespace kamera_py
