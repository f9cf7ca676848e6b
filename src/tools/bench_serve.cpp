// kamera bench serve (bench_serve.h), in steps: the cached state every repetition starts from
// (the antecedent behind an anchor, the chunk's canonical entry), then per repetition the
// re-prefill, the patch compile, the serve with and without the patch and the floor, then the
// medians as JSON or one line.
#include "tools/bench_serve.h"

#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "cache/chunk_cache.h"
#include "eval/metrics.h"
#include "ops/gemm.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

// The state every repetition starts from: the anchor and the antecedent A in `prefix`, the
// chunk B at position pB, B's canonical entry, and the patch options.
struct ServeBench {
  const ServeBenchArgs& a;
  const ModelConfig& c;
  KvPool& kv;
  ChunkCache& cc;
  ChunkContent A, B;
  int32_t pB = 0;
  SeqId prefix = 0;
  std::shared_ptr<const CanonicalEntry> canon{};
  PatchOptions po{};
};

// One repetition's times (ms).
struct ServeRep {
  double reprefill = 0, serve = 0, blind = 0, floor = 0, cond = 0, svd = 0;
};

// The options of the context: room for six copies of the sequence, a store that never evicts.
ContextOptions serve_context_options(const ServeBenchArgs& a) {
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = 6 * (1 + a.antecedent + a.tokens + 32);
  co.store_bytes = size_t(1) << 36;
  return co;
}

PatchOptions serve_patch_options(const ServeBenchArgs& a, const ModelConfig& c, DType kv_type) {
  PatchOptions po;
  po.rank = a.rank;
  po.cap_rank = true;  // capped at min(tokens, width) of each (layer, channel)
  po.head_dim = c.head_dim;
  po.dtype = kv_type;  // factors stored at the pool's width, as ChunkCache stores them
  po.method = a.svd == "gesdd"        ? SvdMethod::Gesdd
              : a.svd == "randomized" ? SvdMethod::Randomized
                                      : SvdMethod::Auto;
  return po;
}

// Re-prefill: the chunk forwarded behind the cached prefix, on a fork of it.
Result<double> time_reprefill(const ServeBench& b) {
  auto f1 = b.kv.fork(b.prefix);
  if (!f1.ok()) return f1.error();
  const double t0 = now_ms();
  if (auto r = b.cc.forward_chunk(*f1, b.B, b.pB); !r.ok()) return r.error();
  const double ms = now_ms() - t0;
  b.kv.free_sequence(*f1);
  return ms;
}

// Compile: the conditioned forward of [A, B] (*cond_ms), then the factorization (*svd_ms).
Result<std::shared_ptr<Patch>> compile_patch(const ServeBench& b, double* cond_ms, double* svd_ms) {
  double t0 = now_ms();
  const std::vector<ChunkContent> ab = {b.A, b.B};
  auto cond = b.cc.conditioned(ab);
  if (!cond.ok()) return cond.error();
  *cond_ms = now_ms() - t0;
  t0 = now_ms();
  auto p = form_patch(cond->back(), b.canon->kv, b.po);
  if (!p.ok()) return p.error();
  *svd_ms = now_ms() - t0;
  return std::make_shared<Patch>(std::move(p.value()));
}

// Serve: the canonical entry (and the patch, unless null) written into a fork of the prefix,
// zero forwards.
Result<double> time_serve(const ServeBench& b, const Patch* patch) {
  auto f = b.kv.fork(b.prefix);
  if (!f.ok()) return f.error();
  const double t0 = now_ms();
  if (auto st = b.cc.append_chunk(*f, *b.canon, patch, b.pB); !st.ok()) return st.error();
  const double ms = now_ms() - t0;
  b.kv.free_sequence(*f);
  return ms;
}

// Floor: a memcpy of the same bytes and the patch GEMMs alone, at BLAS speed (stored bytes in
// the pool's dtype; factors widened to f32 beforehand, outside the timing).
double time_floor(const ServeBench& b, const Patch& patch) {
  const ChunkKV& ck = b.canon->kv;
  std::vector<float> dst(size_t(b.B.n()) * b.c.kv_width()), prod(size_t(b.B.n()) * b.c.kv_width());
  std::vector<std::vector<float>> fus, fvt;
  for (const auto& f : patch.factors) {
    fus.emplace_back(size_t(f.rows) * f.rank);
    fvt.emplace_back(size_t(f.rank) * f.cols);
    for (int i = 0; i < f.rows; ++i) f.us.get_row(i, fus.back().data() + size_t(i) * f.rank);
    for (int j = 0; j < f.rank; ++j) f.vt.get_row(j, fvt.back().data() + size_t(j) * f.cols);
  }
  const double t0 = now_ms();
  for (const auto& blk : ck.blocks) std::memcpy(dst.data(), blk.raw(), blk.bytes());
  for (size_t i = 0; i < patch.factors.size(); ++i) {
    const auto& f = patch.factors[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, f.rows, f.cols, f.rank, 1.0f,
                fus[i].data(), f.rank, fvt[i].data(), f.cols, 0.0f, prod.data(), f.cols);
  }
  return now_ms() - t0;
}

// One repetition, in the order re-prefill, compile, serve, blind serve, floor; the patch it
// compiled in *patch.
Result<ServeRep> run_rep(const ServeBench& b, std::shared_ptr<Patch>* patch) {
  ServeRep r;
  KAMERA_ASSIGN_OR_RETURN(r.reprefill, time_reprefill(b));
  KAMERA_ASSIGN_OR_RETURN(*patch, compile_patch(b, &r.cond, &r.svd));
  KAMERA_ASSIGN_OR_RETURN(r.serve, time_serve(b, patch->get()));
  KAMERA_ASSIGN_OR_RETURN(r.blind, time_serve(b, nullptr));
  r.floor = time_floor(b, **patch);
  return r;
}

// The medians over the timed repetitions (ms).
struct ServeSummary {
  double reprefill, serve, blind, floor, cond, svd;
};

ServeSummary summarize(const std::vector<ServeRep>& reps) {
  auto med = [&](double ServeRep::*field) {
    std::vector<double> v;
    for (const ServeRep& r : reps) v.push_back(r.*field);
    return median(std::move(v));
  };
  return {med(&ServeRep::reprefill), med(&ServeRep::serve), med(&ServeRep::blind),
          med(&ServeRep::floor),     med(&ServeRep::cond),  med(&ServeRep::svd)};
}

json serve_json(const ServeBench& b, const Model& m, const ServeSummary& s, const Patch& patch,
                double canon_ms) {
  const ServeBenchArgs& a = b.a;
  return json{{"mode", "serve"},
              {"model", model_summary(m)},
              {"system", system_info(&m)},
              {"threads", a.threads},
              {"blas_path", blas_path()},
              {"chunk_tokens", a.tokens},
              {"antecedent_tokens", a.antecedent},
              {"rank", b.po.rank},
              {"kv_type", dtype_name(b.po.dtype)},
              {"svd", a.svd},
              {"reps", a.reps},
              {"chunk_kv_bytes", b.canon->kv.bytes()},
              {"patch_bytes", patch.bytes()},
              {"reprefill_ms", s.reprefill},
              {"serve_ms", s.serve},
              {"serve_blind_ms", s.blind},
              {"floor_memcpy_gemm_ms", s.floor},
              {"speedup_vs_reprefill", s.reprefill / s.serve},
              {"serve_over_floor", s.serve / s.floor},
              {"canonical_form_ms", canon_ms},
              {"compile_forward_ms", s.cond},
              {"compile_svd_ms", s.svd},
              {"compile_overhead_beyond_forward", s.svd / s.cond}};
}

void print_serve(const ServeBench& b, const ServeSummary& s) {
  std::printf(
      "serve chunk of %d tokens behind %d, rank %d, %d threads: re-prefill %.1f ms, serve %.3f "
      "ms "
      "(%.0fx faster), %.2fx the memcpy+GEMM floor (%.3f ms); compile = forward %.1f ms + "
      "factorization %.1f ms (+%.1f%%)\n",
      b.a.tokens, b.a.antecedent, b.po.rank, b.a.threads, s.reprefill, s.serve,
      s.reprefill / s.serve, s.serve / s.floor, s.floor, s.cond, s.svd, 100.0 * s.svd / s.cond);
}

// The timed repetitions after one warm-up (rep 0), each logged on stderr unless --json.
Result<std::vector<ServeRep>> run_reps(const ServeBench& b, std::shared_ptr<Patch>* patch) {
  std::vector<ServeRep> reps;
  for (int rep = 0; rep <= b.a.reps; ++rep) {
    KAMERA_ASSIGN_OR_RETURN(const ServeRep r, run_rep(b, patch));
    if (rep == 0) continue;
    reps.push_back(r);
    if (!b.a.json)
      std::fprintf(stderr,
                   "kamera: bench serve rep %d/%d: reprefill %.1f ms, serve %.3f ms, floor %.3f "
                   "ms, compile %.1f + %.1f ms\n",
                   rep, b.a.reps, r.reprefill, r.serve, r.floor, r.cond, r.svd);
  }
  return reps;
}

}  // namespace

int run_bench_serve(const ServeBenchArgs& a) {
  auto loaded = load_for_cli(a.model, "");
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  const ModelConfig& c = m.cfg;
  if (a.tokens < 1 || a.antecedent < 1 || a.reps < 1)
    return fail("--tokens, --antecedent, --reps must be >= 1", a.json);
  if (1 + a.antecedent + a.tokens > c.ctx_len)
    return fail("antecedent + chunk exceed the model's context", a.json);
  std::mt19937 rng(uint32_t(a.seed));
  auto random_chunk = [&](int n) {
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = int32_t(3 + rng() % uint32_t(c.n_vocab - 3));
    return ChunkContent::from_tokens(std::move(ids));
  };
  const ChunkContent A = random_chunk(a.antecedent), B = random_chunk(a.tokens);
  const ContextOptions co = serve_context_options(a);
  auto ctx = Context::create(*loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  ServeBench b{a, c, (*ctx)->pool(), (*ctx)->cache(), A, B, 1 + A.extent()};
  ScopedSequence prefix(b.kv);
  b.prefix = prefix.id();
  if (auto st = b.cc.append_anchor(b.prefix); !st.ok()) return fail(st.message(), a.json);
  if (auto r = b.cc.forward_chunk(b.prefix, A, 1); !r.ok()) return fail(r.message(), a.json);
  const double tc0 = now_ms();
  auto canon = b.cc.canonical(B);
  const double canon_ms = now_ms() - tc0;
  if (!canon.ok()) return fail(canon.message(), a.json);
  b.canon = *canon;
  b.po = serve_patch_options(a, c, co.kv_type);

  std::shared_ptr<Patch> patch;
  auto reps = run_reps(b, &patch);
  if (!reps.ok()) return fail(reps.message(), a.json);
  const ServeSummary s = summarize(*reps);
  if (a.json) {
    print_json(serve_json(b, m, s, *patch, canon_ms), 2);
  } else {
    print_serve(b, s);
  }
  return 0;
}

}  // namespace kamera::cli
