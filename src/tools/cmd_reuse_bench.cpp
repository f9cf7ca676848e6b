// kamera reuse-bench: every arm of the reuse harness on a file of {antecedent, chunk, query}
// items, scored against full re-prefill (KL, eta, flip-recover), with exactness checks and timing.
// With --mmproj and --image the chunks are pictures through the tower (the paper's Table 7 on a
// vision family: docs/RESULTS.md); with --mmproj and --audio, audio clips through an audio tower
// (Qwen2.5-Omni's), between its audio delimiters.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "audio/audio_chunks.h"
#include "audio/audio_tower.h"
#include "eval/reuse_bench.h"
#include "media/audio_file.h"
#include "media/image.h"
#include "tools/cli_common.h"
#include "vision/media_tower.h"

namespace kamera::cli {

namespace {

struct ReuseBenchArgs {
  std::string model, tokenizer, items, mmproj, images, audios,
      ranks = "1,2,4,8,16,32,full", patch_dtype = "f32", svd = "auto", layers = "all";
  int threads = default_threads();
  int timing_rank = 32;
  int limit = 0;
  bool no_deep_half = false, per_head = false, json = false, quiet = false;
};

Result<std::vector<int>> parse_ranks(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "full") {
      out.push_back(kFullRank);
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1000000)
      return make_error(ErrorCode::InvalidArgument,
                        "--ranks: '{}' is not a rank (a positive integer or 'full')", item);
    out.push_back(int(v));
  }
  if (out.empty()) return make_error(ErrorCode::InvalidArgument, "--ranks is empty");
  return out;
}

// The placed chunk of one --image picture or --audio clip through the tower.
Result<ChunkContent> media_chunk(MediaTower& tower, const std::string& path, bool audio) {
  if (audio) {
    KAMERA_ASSIGN_OR_RETURN(const AudioClip clip, load_audio(path, kAudioSampleRate));
    KAMERA_ASSIGN_OR_RETURN(auto c, tower.audio_chunk(clip.samples, nullptr, {}));
    return *c;
  }
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
  KAMERA_ASSIGN_OR_RETURN(auto c, tower.chunk(std::span<const Image>(&img, 1), nullptr, 0, {}));
  return *c;
}

// --mmproj with --image or --audio: the items' chunks become the pictures or clips (the tower's
// placed chunks), the tower's delimiters around them (picture_items).
Status use_media(const ReuseBenchArgs& a, const Model& m, std::vector<ReuseItem>& items) {
  const bool audio = !a.audios.empty();
  if (!a.images.empty() && audio)
    return make_error(ErrorCode::InvalidArgument, "give --image or --audio, not both");
  if (a.mmproj.empty() != (a.images.empty() && !audio))
    return make_error(ErrorCode::InvalidArgument, "--mmproj and --image (or --audio) go together");
  if (a.mmproj.empty()) return Status::Ok();
  KAMERA_ASSIGN_OR_RETURN(auto tower, load_media_tower(a.mmproj, m, a.threads, nullptr));
  if (tower->word_prompt())
    return make_error(ErrorCode::InvalidArgument,
                      "--mmproj: {} is the mini-VL's encoder (kamera eval --suite mini-vl "
                      "measures it)",
                      a.mmproj);
  if (audio && !tower->takes_audio())
    return make_error(ErrorCode::InvalidArgument,
                      "--audio: {} is a picture tower; audio needs an audio tower's mmproj "
                      "(Qwen2.5-Omni's)",
                      a.mmproj);
  std::vector<ChunkContent> chunks;
  std::stringstream ss(audio ? a.audios : a.images);
  for (std::string path; std::getline(ss, path, ',');) {
    if (path.empty()) continue;
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, media_chunk(*tower, path, audio));
    chunks.push_back(std::move(c));
  }
  const VisionDelimiters d = audio ? tower->audio_delimiters() : tower->delimiters();
  items = picture_items(std::move(items), chunks, d.open, d.close);
  return Status::Ok();
}

int run_reuse_bench_cmd(const ReuseBenchArgs& a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  auto items = load_reuse_items(a.items, m);
  if (!items.ok()) return fail(items.message(), a.json);
  if (a.limit > 0 && int(items->size()) > a.limit) items->resize(a.limit);
  if (Status st = use_media(a, m, *items); !st.ok()) return fail(st.message(), a.json);
  ReuseBenchOptions o;
  auto ranks = parse_ranks(a.ranks);
  if (!ranks.ok()) return fail(ranks.message(), a.json);
  o.ranks = *ranks;
  o.deep_half = !a.no_deep_half;
  o.per_head = a.per_head;
  auto layers = LayerSet::parse(a.layers);
  if (!layers.ok()) return fail(layers.message(), a.json);
  o.layers = *layers;
  o.timing_rank = a.timing_rank;
  auto dt = dtype_from_name(a.patch_dtype);
  if (!dt || (*dt != DType::F32 && *dt != DType::BF16))
    return fail("--patch-dtype must be f32 or bf16", a.json);
  o.patch_dtype = *dt;
  o.svd = a.svd == "gesdd"        ? SvdMethod::Gesdd
          : a.svd == "randomized" ? SvdMethod::Randomized
                                  : SvdMethod::Auto;
  const double t0 = now_ms();
  const bool tty = isatty(2);
  if (!a.quiet)
    o.progress = [&, tty](int done, int total) {
      // On a terminal one line updates in place; in a log, a line per tenth of the items.
      if (!tty && done != total && done % std::max(1, total / 10) != 0) return;
      const double el = (now_ms() - t0) / 1e3;
      std::fprintf(stderr, "%skamera: reuse-bench %d/%d items, %.1f s elapsed, ETA %.1f s%s",
                   tty ? "\r" : "", done, total, el, el / done * (total - done),
                   tty && done != total ? "   " : "\n");
    };
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = harness_kv_tokens(*items);
  co.store_bytes = size_t(1) << 34;
  auto ctx = Context::create(*loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_reuse_bench(**ctx, *items, o);
  if (!r.ok()) return fail(r.message(), a.json);
  json j = reuse_bench_json(*r);
  j["model"] = model_summary(m);
  j["items_file"] = a.items;
  if (!a.images.empty()) j["pictures"] = {{"mmproj", a.mmproj}, {"images", a.images}};
  if (!a.audios.empty()) j["audio"] = {{"mmproj", a.mmproj}, {"clips", a.audios}};
  j["threads"] = a.threads;
  j["patch_dtype"] = a.patch_dtype;
  j["per_head"] = a.per_head;
  j["patch_layers"] = a.layers;
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  std::printf("%d items (mean tokens: antecedent %.1f, chunk %.1f, query %.1f), %d flips\n",
              r->n_items, r->mean_antecedent_tokens, r->mean_chunk_tokens, r->mean_query_tokens,
              r->n_flips);
  std::string per_channel;
  for (size_t ch = 0; ch < r->channels.size(); ++ch)
    per_channel += fmt::format("{}{} {:.3g}", ch ? ", " : "", r->channels[ch],
                               r->full_rank_max_rel_err_channel[ch]);
  std::printf(
      "relocation: max ULP %lld (layer 0: %lld), max abs err %.3g, max rel err %.3g; "
      "full-rank patch max rel err %.3g (%s)\n",
      (long long)r->relocation_max_ulp, (long long)r->relocation_max_ulp_layer0,
      r->relocation_max_abs_err, r->relocation_max_rel_err, r->full_rank_max_rel_err,
      per_channel.c_str());
  std::printf("%-16s %5s %11s %8s %8s %8s %8s %8s %10s\n", "arm", "rank", "kl", "eta", "eta_med",
              "flip_rec", "argmax", "bytes", "kv_relerr");
  for (const auto& arm : r->arms) {
    const std::string rank = arm.rank == kFullRank ? "full"
                             : arm.rank            ? std::to_string(arm.rank)
                                                   : "-";
    auto f = [](double x) { return std::isnan(x) ? std::string("-") : fmt::format("{:.3f}", x); };
    const std::string kv =
        std::isnan(arm.kv_max_rel_err) ? "-" : fmt::format("{:.2e}", arm.kv_max_rel_err);
    std::printf("%-16s %5s %11.3e %8s %8s %8s %8.3f %8.3f %10s\n", arm.name.c_str(), rank.c_str(),
                arm.kl, f(arm.eta).c_str(), f(arm.eta_median).c_str(), f(arm.flip_recover).c_str(),
                arm.argmax_agree, arm.patch_bytes_fraction, kv.c_str());
  }
  std::printf(
      "timing (median ms per item): reprefill of chunk+query %.3f, reuse blind %.3f, reuse "
      "patch (rank %s) %.3f, compile %.3f\n",
      r->timing_reprefill_ms, r->timing_reuse_blind_ms,
      r->timing_rank == kFullRank ? "full" : std::to_string(r->timing_rank).c_str(),
      r->timing_reuse_patch_ms, r->timing_compile_ms);
  return 0;
}

}  // namespace

Runner add_reuse_bench(CLI::App& app) {
  auto a = std::make_shared<ReuseBenchArgs>();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (for text items)")
      ->check(CLI::ExistingFile);
  app.add_option(
         "--items", a->items,
         "JSONL file, one {\"antecedent\", \"chunk\", \"query\"} per line (text or token ids)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--mmproj", a->mmproj,
                 "Vision or audio tower beside -m (any family the server reads): with --image, "
                 "every item's chunk becomes a picture, with --audio an audio clip, the tower's "
                 "delimiters around it")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a->images,
                 "PNG / JPEG pictures for --mmproj (comma list; item i takes picture i mod n)");
  app.add_option("--audio", a->audios,
                 "WAV / FLAC / MP3 clips for an audio --mmproj (comma list; item i takes clip i "
                 "mod n)");
  app.add_option("--ranks", a->ranks,
                 "Patch ranks to evaluate (comma list; 'full' = min(n, width))")
      ->capture_default_str();
  app.add_option("--layers", a->layers,
                 "Layers the patch arms cover: all, deep-half, or a list like 0,2,4")
      ->capture_default_str();
  app.add_flag("--no-deep-half", a->no_deep_half, "Skip the patch_deep_half arms");
  app.add_flag("--per-head", a->per_head, "Factor each KV head's slice separately");
  app.add_option("--patch-dtype", a->patch_dtype, "Storage of the patch factors: f32 or bf16")
      ->capture_default_str();
  app.add_option("--svd", a->svd, "auto, gesdd or randomized")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gesdd", "randomized"}));
  app.add_option("--timing-rank", a->timing_rank, "Rank whose serve/compile times are reported")
      ->capture_default_str();
  app.add_option("--limit", a->limit, "Use only the first N items (0 = all)");
  add_threads_option(app, a->threads);
  app.add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  app.add_flag("--json", a->json, "Print the full result as JSON");
  return [a] { return run_reuse_bench_cmd(*a); };
}

}  // namespace kamera::cli
