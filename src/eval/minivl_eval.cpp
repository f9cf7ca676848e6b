#include "eval/minivl_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "eval/metrics.h"
#include "eval/recompute.h"
#include "reuse/chunk_cache.h"
#include "reuse/patch.h"
#include "reuse/store.h"

namespace kamera {

namespace {

struct ArmStats {
  std::string name, knob;
  // per question: family (0 single-hop, 1 cross-frame), argmax, KL vs reprefill
  std::vector<int> family;
  std::vector<int32_t> argmax;
  std::vector<double> kl;
  std::vector<int32_t> gold;
  double extra_bytes = 0, canonical_bytes = 0, flops = 0, reprefill_flops = 0;
};

int32_t argmax_of(const std::vector<float>& l) {
  return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
}

}  // namespace

ContextOptions minivl_eval_context(const minivl::MiniVl& mv, const MiniVlEvalOptions& o,
                                   int n_threads) {
  ContextOptions co;
  co.n_threads = n_threads;
  co.kv_tokens = 64 * (1 + int64_t(o.n_frames) * mv.vision.cfg.n_tokens() + 64);
  co.anchor = {minivl::bos_id()};
  return co;
}

Result<nlohmann::json> run_minivl_eval(const minivl::MiniVl& mv, Context& ctx,
                                       const MiniVlEvalOptions& o) {
  using nlohmann::json;
  const Model& model = *mv.decoder;
  if (&ctx.model() != &model)
    return make_error(ErrorCode::InvalidArgument, "mini-VL eval: the context runs another model");
  const ModelConfig& c = model.cfg;
  Engine& engine = ctx.engine();
  VisionEncoder enc(mv.vision);
  const int per_frame = mv.vision.cfg.n_tokens();
  KvPool& pool = ctx.pool();
  ChunkCache& cache = ctx.cache();
  size_t row_floats = 0;
  for (const auto& ch : pool.layout().channels) row_floats += size_t(ch.width);
  const double bytes_per_token = double(row_floats) * c.n_layers * 4;

  std::vector<ArmStats> arms;
  std::map<std::string, size_t> index;
  auto arm = [&](const std::string& name, const std::string& knob) -> ArmStats& {
    const std::string key = name + "|" + knob;
    auto it = index.find(key);
    if (it != index.end()) return arms[it->second];
    index[key] = arms.size();
    arms.push_back({name, knob, {}, {}, {}, {}, 0, 0, 0, 0});
    return arms.back();
  };

  minivl::ClipSpec spec;
  spec.n_frames = o.n_frames;
  int n_questions = 0;
  for (int ci = 0; ci < o.n_clips; ++ci) {
    const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, uint64_t(ci), spec);
    std::vector<ChunkContent> frames;
    for (const auto& f : clip.frames) {
      auto ch = minivl::frame_chunk(enc, f);
      if (!ch.ok()) return ch.error();
      frames.push_back(std::move(*ch));
    }
    const int n_seq = 1 + o.n_frames * per_frame;
    const double frame_bytes = double(o.n_frames * per_frame) * bytes_per_token;
    // Builds the frames one way, then answers every question on a fork of it.
    auto answer_all = [&](SeqId seq, int32_t qpos) -> Result<std::vector<std::vector<float>>> {
      std::vector<std::vector<float>> out;
      for (const auto& q : clip.questions) {
        auto fork = pool.fork(seq);
        if (!fork.ok()) return fork.error();
        auto l = cache.forward_chunk(*fork, minivl::text_chunk(q.tokens), qpos, LogitsMode::Last);
        pool.free_sequence(*fork);
        if (!l.ok()) return l.error();
        out.push_back(std::move(*l));
      }
      return out;
    };
    std::vector<std::vector<float>> ref;
    auto record = [&](ArmStats& a, const std::vector<std::vector<float>>& logits, double bytes,
                      double flops) {
      for (size_t qi = 0; qi < clip.questions.size(); ++qi) {
        const auto& q = clip.questions[qi];
        a.family.push_back(q.family == minivl::Family::CrossFrame ? 1 : 0);
        a.argmax.push_back(argmax_of(logits[qi]));
        a.kl.push_back(ref.empty() ? 0.0 : kl_from_logits(ref[qi], logits[qi]));
        a.gold.push_back(q.answer);
      }
      a.extra_bytes += bytes;
      a.canonical_bytes += frame_bytes;
      a.flops += flops;
    };
    auto serve = [&](const ServeOptions& so,
                     ServeReport* rep) -> Result<std::vector<std::vector<float>>> {
      ScopedSequence s(pool);
      auto r = cache.assemble(s.id(), frames, so);
      if (!r.ok()) return r.error();
      if (rep) *rep = *r;
      return answer_all(s.id(), r->next_position);
    };
    // reprefill (the reference)
    {
      ServeOptions so;
      so.policy = ServePolicy::Reprefill;
      auto l = serve(so, nullptr);
      if (!l.ok()) return l.error();
      ref = *l;
      record(arm("reprefill", ""), *l, 0, 0);
    }
    {
      ServeOptions so;
      so.policy = ServePolicy::Blind;
      auto l = serve(so, nullptr);
      if (!l.ok()) return l.error();
      record(arm("blind", ""), *l, 0, 0);
    }
    for (int deep = 0; deep < 2; ++deep)
      for (int r : o.ranks) {
        ServeOptions so;
        so.policy = ServePolicy::Patch;
        so.patch.rank = r < 0 ? kFullRank : r;
        so.patch.cap_rank = true;
        so.patch.layers.kind = deep ? LayerSet::Kind::DeepHalf : LayerSet::Kind::All;
        ScopedSequence s(pool);
        auto rep = cache.assemble(s.id(), frames, so);
        if (!rep.ok()) return rep.error();
        double bytes = 0, flops = 0;
        for (size_t fi = 1; fi < frames.size(); ++fi) {
          auto p = cache.patch(std::span(frames).first(fi), frames[fi], so.patch, false);
          if (p.ok() && *p) {
            bytes += double((*p)->patch.bytes());
            for (const auto& f : (*p)->patch.factors)
              flops += 2.0 * double(f.rows) * f.rank * f.cols;
          }
        }
        auto l = answer_all(s.id(), rep->next_position);
        if (!l.ok()) return l.error();
        record(arm(deep ? "patch_deep_half" : "patch",
                   r < 0 ? "rank=full" : fmt::format("rank={}", r)),
               *l, bytes, flops);
      }
    if (o.baselines) {
      // Token recompute over all frames on top of blind reuse.
      auto recompute_arm = [&](const std::string& name, const std::string& knob,
                               RecomputePlan plan) -> Status {
        ScopedSequence s(pool);
        ServeOptions so;
        so.policy = ServePolicy::Blind;
        auto rep = cache.assemble(s.id(), frames, so);
        if (!rep.ok()) return rep.error();
        std::vector<float> rows;
        for (int t : plan.tokens) {
          const int f = (t - 1) / per_frame, i = (t - 1) % per_frame;
          rows.insert(rows.end(), frames[size_t(f)].embeddings.begin() + size_t(i) * c.dim,
                      frames[size_t(f)].embeddings.begin() + size_t(i + 1) * c.dim);
        }
        plan.hidden = rows.data();
        RecomputeStats rs;
        if (!plan.tokens.empty()) KAMERA_TRY(recompute_tokens(engine, pool, s.id(), plan, &rs));
        auto l = answer_all(s.id(), rep->next_position);
        if (!l.ok()) return l.error();
        record(arm(name, knob), *l, double(rs.rows_written) * double(row_floats) * 4, rs.flops);
        return Status::Ok();
      };
      std::vector<int> all_frames;  // frames 1.. (frame 0 is exact under blind reuse)
      for (int t = 1 + per_frame; t < n_seq; ++t) all_frames.push_back(t);
      for (double p : {0.15, 0.5}) {
        RecomputePlan plan;
        plan.tokens = all_frames;
        plan.select_layer = std::min(1, c.n_layers - 1);
        plan.keep = std::max(1, int(std::lround(p * double(all_frames.size()))));
        KAMERA_TRY(recompute_arm("cacheblend", fmt::format("p={:g}", p), plan));
      }
      {
        RecomputePlan plan;  // EPIC: the first token of each frame
        for (int f = 1; f < o.n_frames; ++f) plan.tokens.push_back(1 + f * per_frame);
        KAMERA_TRY(recompute_arm("epic", "k=1", plan));
      }
      {
        RecomputePlan plan;  // VLCache-style uniform 10% keep budget
        const int t = std::max(1, int(std::ceil(0.1 * double(all_frames.size()))));
        for (int i = 0; i < t; ++i)
          plan.tokens.push_back(all_frames[size_t(int64_t(i) * int64_t(all_frames.size()) / t)]);
        KAMERA_TRY(recompute_arm("vlcache", "share=0.1", plan));
      }
    }
    n_questions += int(clip.questions.size());
    if (o.progress) o.progress(ci + 1, o.n_clips);
  }

  // Summaries.
  const ArmStats& re = arms[index.at("reprefill|")];
  const ArmStats& bl = arms[index.at("blind|")];
  json jarms = json::array();
  for (const ArmStats& a : arms) {
    json fam = json::object();
    for (int f = -1; f < 2; ++f) {
      std::vector<double> kl, klb;
      std::vector<int32_t> ref_am, blind_am, arm_am;
      int n = 0, right = 0;
      for (size_t i = 0; i < a.family.size(); ++i) {
        if (f >= 0 && a.family[i] != f) continue;
        ++n;
        right += a.argmax[i] == a.gold[i];
        kl.push_back(a.kl[i]);
        klb.push_back(bl.kl[i]);
        ref_am.push_back(re.argmax[i]);
        blind_am.push_back(bl.argmax[i]);
        arm_am.push_back(a.argmax[i]);
      }
      int flips = 0;
      for (size_t i = 0; i < ref_am.size(); ++i) flips += ref_am[i] != blind_am[i];
      const auto e = eta(kl, klb);
      const auto fr = flip_recover(ref_am, blind_am, arm_am);
      fam[f < 0    ? "all"
          : f == 0 ? "single_hop"
                   : "cross_frame"] = {{"questions", n},
                                       {"accuracy", n ? double(right) / n : 0.0},
                                       {"kl", mean(kl)},
                                       {"eta", e ? json(*e) : json(nullptr)},
                                       {"flips", flips},
                                       {"flip_recover", fr ? json(*fr) : json(nullptr)},
                                       {"agree_reprefill", argmax_agree(ref_am, arm_am)}};
    }
    jarms.push_back(
        {{"arm", a.name},
         {"knob", a.knob},
         {"extra_bytes_fraction", a.canonical_bytes > 0 ? a.extra_bytes / a.canonical_bytes : 0.0},
         {"flops", a.flops / std::max(1, o.n_clips)},
         {"by_family", fam}});
  }
  return json{{"kind", "kamera-eval-minivl"},
              {"clips", o.n_clips},
              {"frames", o.n_frames},
              {"questions", n_questions},
              {"tokens_per_frame", per_frame},
              {"split", "test (held out: never trained on)"},
              {"arms", jarms}};
}

}  // namespace kamera
