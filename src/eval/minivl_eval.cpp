#include "eval/minivl_eval.h"

#include <fmt/format.h>

#include "eval/arm.h"
#include "eval/arms.h"
#include "eval/arms_output.h"
#include "eval/baselines.h"
#include "vision/frame_chunk.h"

namespace kamera {

ContextOptions minivl_eval_context(const minivl::MiniVl& mv, const MiniVlEvalOptions& o,
                                   int n_threads) {
  ContextOptions co;
  co.n_threads = n_threads;
  co.kv_tokens = 64 * (1 + int64_t(o.n_frames) * mv.vision.cfg.n_tokens() + 64);
  co.anchor = {minivl::bos_id()};
  return co;
}

namespace {

// Blind reuse, the patch ranks (all layers, then the deepest half), and token recompute over all
// frames on top of blind reuse: CacheBlend, EPIC (the first token of each frame), VLCache.
std::vector<std::unique_ptr<Arm>> minivl_arms(const Model& m, const MiniVlEvalOptions& o) {
  std::vector<std::unique_ptr<Arm>> arms;
  arms.push_back(std::make_unique<BlindArm>());
  for (bool deep : {false, true})
    for (int r : o.ranks) {
      const LayerSet layers{deep ? LayerSet::Kind::DeepHalf : LayerSet::Kind::All, {}};
      arms.push_back(
          std::make_unique<PatchArm>(ArmKey{deep ? "patch_deep_half" : "patch", 0,
                                            r < 0 ? "rank=full" : fmt::format("rank={}", r)},
                                     harness_patch_options(m, r < 0 ? kFullRank : r, layers)));
    }
  if (o.output_patches) {
    for (bool oracle : {false, true}) {
      auto cache = std::make_shared<OutputWeightsCache>();
      cache->with_query = oracle;
      for (int r : o.ranks)
        arms.push_back(std::make_unique<OutputPatchArm>(
            ArmKey{oracle ? "patch_output_qoracle" : "patch_output", 0,
                   r < 0 ? "rank=full" : fmt::format("rank={}", r)},
            harness_patch_options(m, r < 0 ? kFullRank : r, LayerSet{}), cache));
    }
  }
  if (!o.baselines) return arms;
  BaselineOptions b;
  b.cacheblend_share = {0.15, 0.5};
  b.epic_k = {1};
  b.sink_k = -1;
  b.vlcache_share = 0.1;
  b.delta_token_share = {};
  b.partial_reprefill = false;
  b.matched_ranks = {};
  for (auto& a : make_baseline_arms(m, b)) arms.push_back(std::move(a));
  return arms;
}

// A clip as an item: the frames (the first one exact), its questions answered at the last
// position; the family is minivl::Family's value.
Result<EvalItem> clip_item(VisionEncoder& enc, const minivl::Clip& clip, int index) {
  EvalItem it;
  it.name = fmt::format("clip{}", index);
  for (const auto& f : clip.frames) {
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, frame_chunk(enc, f.rgb));
    it.chunks.push_back(std::move(c));
  }
  for (const auto& q : clip.questions)
    it.queries.push_back({minivl::text_chunk(q.tokens), LogitsMode::Last, int(q.family), q.answer});
  return it;
}

nlohmann::json family_json(const Scoreboard& board, const ArmRecord& a, const ArmRecord& blind,
                           int family) {
  using nlohmann::json;
  const ArmStats s = summarize(board, a, &blind, &blind, [family](const MeasurementInfo& m) {
    return family < 0 || m.family == family;
  });
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  return {{"questions", s.n},
          {"accuracy", s.n && !std::isnan(s.accuracy) ? s.accuracy : 0.0},
          {"kl", s.kl},
          {"eta", num(s.eta)},
          {"flips", s.flips},
          {"flip_recover", num(s.flip_recover)},
          {"agree_reprefill", s.argmax_agree}};
}

nlohmann::json arms_json(const Scoreboard& board, double frame_bytes, int n_clips, int n_families) {
  using nlohmann::json;
  const ArmRecord& blind = *board.find({"blind", 0, ""});
  json out = json::array();
  for (const ArmRecord& a : board.arms()) {
    json fam = json::object();
    fam["all"] = family_json(board, a, blind, -1);
    for (int f = 0; f < n_families; ++f)
      fam[minivl::family_name(minivl::Family(f))] = family_json(board, a, blind, f);
    out.push_back({{"arm", a.key.name},
                   {"knob", a.key.param},
                   {"extra_bytes_fraction", a.cost.kv_bytes / (frame_bytes * n_clips)},
                   {"flops", a.cost.flops / std::max(1, n_clips)},
                   {"by_family", fam}});
  }
  return out;
}

}  // namespace

Result<nlohmann::json> run_minivl_eval(const minivl::MiniVl& mv, Context& ctx,
                                       const MiniVlEvalOptions& o) {
  const Model& model = *mv.decoder;
  if (&ctx.model() != &model)
    return make_error(ErrorCode::InvalidArgument, "mini-VL eval: the context runs another model");
  VisionEncoder enc(mv.vision);
  const int per_frame = mv.vision.cfg.n_tokens();
  const double frame_bytes =
      double(o.n_frames) * per_frame * double(ctx.pool().layout().floats_per_token()) * 4.0;
  Scoreboard board;
  ArmDriver driver(ctx, board);
  auto arms = minivl_arms(model, o);
  minivl::ClipSpec spec;
  spec.n_frames = o.n_frames;
  spec.two_frame = o.two_frame;
  for (int ci = 0; ci < o.n_clips; ++ci) {
    const minivl::Clip clip =
        minivl::make_clip(minivl::Split::Test, uint64_t(o.first_clip + ci), spec);
    KAMERA_ASSIGN_OR_RETURN(const EvalItem item, clip_item(enc, clip, ci));
    KAMERA_ASSIGN_OR_RETURN(PreparedItem it, driver.prepare(item, ci, true));
    for (auto& arm : arms) KAMERA_TRY(driver.run(*arm, it));
    if (o.progress) o.progress(ci + 1, o.n_clips);
  }
  return nlohmann::json{{"kind", "kamera-eval-minivl"},
                        {"clips", o.n_clips},
                        {"first_clip", o.first_clip},
                        {"frames", o.n_frames},
                        {"questions", int(board.measurements().size())},
                        {"tokens_per_frame", per_frame},
                        {"split", "test (held out: never trained on)"},
                        {"two_frame_family", o.two_frame},
                        {"arms", arms_json(board, frame_bytes, o.n_clips, o.two_frame ? 3 : 2)}};
}

}  // namespace kamera
