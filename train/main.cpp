// kamera-train: trains the mini vision-language model on synthetic clips (libtorch, CPU) and
// exports it to kamera's two GGUF files; `check` compares the engine's forward with this
// program's own (libtorch) forward on held-out clips.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "context/context.h"
#include "minivl/minivl.h"
#include "train/text_train.h"
#include "train/torch_minivl.h"
#include "vision/frame_chunk.h"

using namespace kamera;
using nlohmann::json;

namespace {

struct Accuracy {
  int n[minivl::kNumFamilies] = {}, right[minivl::kNumFamilies] = {};
  double loss = 0;
  double share(int f) const { return n[f] ? double(right[f]) / n[f] : 0.0; }
};

std::vector<minivl::Clip> clips_of(minivl::Split split, uint64_t first, int count,
                                   const minivl::ClipSpec& spec) {
  std::vector<minivl::Clip> v;
  v.reserve(size_t(count));
  for (int i = 0; i < count; ++i) v.push_back(minivl::make_clip(split, first + uint64_t(i), spec));
  return v;
}

std::vector<train::Example> examples_of(const std::vector<minivl::Clip>& clips) {
  std::vector<train::Example> ex;
  for (const auto& c : clips)
    for (const auto& q : c.questions) ex.push_back({&c, &q});
  return ex;
}

Accuracy evaluate(train::TorchMiniVl& m, const std::vector<train::Example>& ex, int batch) {
  torch::NoGradGuard ng;
  Accuracy a;
  for (size_t i = 0; i < ex.size(); i += size_t(batch)) {
    std::vector<train::Example> b(ex.begin() + long(i),
                                  ex.begin() + long(std::min(ex.size(), i + size_t(batch))));
    auto logits = m.answer_logits(b);
    std::vector<int64_t> tgt;
    for (auto& e : b) tgt.push_back(e.question->answer);
    auto t = torch::from_blob(tgt.data(), {int64_t(tgt.size())}, torch::kInt64).clone();
    a.loss += torch::nn::functional::cross_entropy(logits, t).item<double>() * double(b.size());
    auto pred = logits.argmax(1);
    for (size_t j = 0; j < b.size(); ++j) {
      const int f = int(b[j].question->family);
      a.n[f]++;
      a.right[f] += pred[long(j)].item<int64_t>() == tgt[j];
    }
  }
  a.loss /= double(std::max<size_t>(1, ex.size()));
  return a;
}

struct TrainArgs {
  uint64_t seed = 1;
  int steps = 4000, batch_clips = 16, eval_clips = 200, eval_every = 250, threads = 2;
  double lr = 3e-3, weight_decay = 0.01;
  int warmup = 100;
  int frames = 6, questions = 3, layers = 0, patch = 0;
  bool two_frame = false;
  std::string out_dir = "models/minivl", log;
  std::string init_decoder, init_vision;
};

int run_train(const TrainArgs& a) {
  torch::manual_seed(a.seed);
  torch::set_num_threads(a.threads);
  minivl::ClipSpec spec;
  spec.n_frames = a.frames;
  spec.questions_per_family = a.questions;
  spec.two_frame = a.two_frame;
  ModelConfig dc = minivl::decoder_config();
  if (a.layers > 0) dc.n_layers = a.layers;
  VisionConfig vc = minivl::vision_config();
  if (a.patch > 0) vc.patch = a.patch;
  if (Status s = vc.validate(); !s.ok()) {
    std::fprintf(stderr, "kamera-train: %s\n", s.message().c_str());
    return 1;
  }
  train::TorchMiniVl model(dc, vc);
  if (!a.init_decoder.empty()) {
    if (Status s = model.import_files(a.init_decoder, a.init_vision); !s.ok()) {
      std::fprintf(stderr, "kamera-train: %s\n", s.message().c_str());
      return 1;
    }
  }
  int64_t n_params = 0;
  for (auto& p : model.parameters()) n_params += p.numel();
  std::fprintf(stderr,
               "kamera-train: %lld parameters, %d decoder layers, %d tokens per frame, %d steps of "
               "%d clips, seed %llu\n",
               (long long)n_params, dc.n_layers, vc.n_tokens(), a.steps, a.batch_clips,
               (unsigned long long)a.seed);
  torch::optim::AdamW opt(model.parameters(),
                          torch::optim::AdamWOptions(a.lr).weight_decay(a.weight_decay));
  const auto test = clips_of(minivl::Split::Test, 0, a.eval_clips, spec);
  const auto test_ex = examples_of(test);
  json curve = json::array();
  const auto t0 = std::chrono::steady_clock::now();
  double run_loss = 0, data_s = 0, fwd_s = 0;
  int run_n = 0;
  for (int step = 1; step <= a.steps; ++step) {
    const double warm = std::min(1.0, double(step) / std::max(1, a.warmup));
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * double(step) / a.steps));
    const double lr = a.lr * warm * (0.05 + 0.95 * cosine);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    const auto td = std::chrono::steady_clock::now();
    const auto clips = clips_of(minivl::Split::Train, uint64_t(step - 1) * uint64_t(a.batch_clips),
                                a.batch_clips, spec);
    data_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - td).count();
    const auto ex = examples_of(clips);
    std::vector<int64_t> tgt;
    for (auto& e : ex) tgt.push_back(e.question->answer);
    auto t = torch::from_blob(tgt.data(), {int64_t(tgt.size())}, torch::kInt64).clone();
    opt.zero_grad();
    const auto tf = std::chrono::steady_clock::now();
    auto loss = torch::nn::functional::cross_entropy(model.answer_logits(ex), t);
    fwd_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - tf).count();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    run_loss += loss.item<double>();
    ++run_n;
    if (step % a.eval_every == 0 || step == a.steps) {
      const Accuracy acc = evaluate(model, test_ex, 64);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr,
                   "step %5d  %.0f s  train loss %.4f  held-out loss %.4f  acc single-hop %.3f "
                   "cross-frame %.3f two-frame %.3f  lr %.2e  (data %.0f s, forward %.0f s)\n",
                   step, secs, run_loss / run_n, acc.loss, acc.share(0), acc.share(1), acc.share(2),
                   lr, data_s, fwd_s);
      curve.push_back({{"step", step},
                       {"seconds", secs},
                       {"train_loss", run_loss / run_n},
                       {"heldout_loss", acc.loss},
                       {"heldout_acc_single_hop", acc.share(0)},
                       {"heldout_acc_cross_frame", acc.share(1)},
                       {"heldout_acc_two_frame", acc.share(2)},
                       {"heldout_questions", acc.n[0] + acc.n[1] + acc.n[2]}});
      run_loss = 0;
      run_n = 0;
      if (!a.log.empty()) {
        // The same curve as columns for gnuplot (docs/minivl/training-curve.gp).
        std::ofstream tsv(a.log + ".tsv");
        tsv << "# step seconds train_loss heldout_loss acc_single_hop acc_cross_frame "
               "acc_two_frame\n";
        for (const auto& r : curve)
          tsv << r["step"].get<int>() << '\t' << r["seconds"].get<double>() << '\t'
              << r["train_loss"].get<double>() << '\t' << r["heldout_loss"].get<double>() << '\t'
              << r["heldout_acc_single_hop"].get<double>() << '\t'
              << r["heldout_acc_cross_frame"].get<double>() << '\t'
              << r["heldout_acc_two_frame"].get<double>() << '\n';
        std::ofstream f(a.log);
        f << json{{"seed", a.seed},
                  {"steps", a.steps},
                  {"batch_clips", a.batch_clips},
                  {"lr", a.lr},
                  {"frames", a.frames},
                  {"questions_per_family", a.questions},
                  {"two_frame_family", a.two_frame},
                  {"decoder_layers", dc.n_layers},
                  {"vision_patch", vc.patch},
                  {"tokens_per_frame", vc.n_tokens()},
                  {"parameters", n_params},
                  {"curve", curve}}
                 .dump(1)
          << "\n";
      }
    }
  }
  const std::string dec = a.out_dir + "/minivl.gguf", vis = a.out_dir + "/minivl-mmproj.gguf";
  if (Status s = model.export_files(dec, vis); !s.ok()) {
    std::fprintf(stderr, "kamera-train: export: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kamera-train: wrote %s and %s\n", dec.c_str(), vis.c_str());
  return 0;
}

struct CheckArgs {
  std::string decoder = minivl::kDecoderFile, vision = minivl::kVisionFile;
  int clips = 4, frames = 6, threads = 2;
  double tol = 1e-4;
  bool json_out = false, two_frame = false;
};

int run_check(const CheckArgs& a) {
  torch::set_num_threads(a.threads);
  auto mv = minivl::MiniVl::load(a.decoder, a.vision);
  if (!mv.ok()) {
    std::fprintf(stderr, "kamera-train check: %s\n", mv.message().c_str());
    return 2;
  }
  train::TorchMiniVl tm(mv->decoder->cfg, mv->vision.cfg);
  if (Status s = tm.import_files(a.decoder, a.vision); !s.ok()) {
    std::fprintf(stderr, "kamera-train check: %s\n", s.message().c_str());
    return 2;
  }
  Engine engine(*mv->decoder, a.threads);
  VisionEncoder enc(mv->vision);
  auto pool = KvPool::create(pool_params(*mv->decoder, 64 * 16));
  if (!pool.ok()) return 2;
  minivl::ClipSpec spec;
  spec.n_frames = a.frames;
  spec.two_frame = a.two_frame;
  double max_abs = 0, max_ref = 0, packed_abs = 0;
  int64_t n_logits = 0, argmax_agree = 0, n_rows = 0;
  for (int i = 0; i < a.clips; ++i) {
    const auto clip = minivl::make_clip(minivl::Split::Test, uint64_t(i), spec);
    std::vector<ChunkContent> frames;
    for (const auto& f : clip.frames) frames.push_back(*frame_chunk(enc, f.rgb));
    // The trainer's packed forward (all questions in one sequence) against each question alone.
    std::vector<train::Example> ex;
    for (const auto& q : clip.questions) ex.push_back({&clip, &q});
    torch::Tensor packed;
    {
      torch::NoGradGuard ng;
      packed = tm.answer_logits(ex);
    }
    for (size_t qi = 0; qi < clip.questions.size(); ++qi) {
      const auto& q = clip.questions[qi];
      torch::NoGradGuard ng;
      auto ref = tm.sequence_logits({&clip, &q}).contiguous();
      packed_abs = std::max(packed_abs,
                            (packed[long(qi)] - ref[ref.size(0) - 1]).abs().max().item<double>());
      auto got = minivl::clip_logits(engine, **pool, frames, q.tokens, true);
      if (!got.ok()) {
        std::fprintf(stderr, "kamera-train check: %s\n", got.message().c_str());
        return 2;
      }
      if (int64_t(got->size()) != ref.numel()) {
        std::fprintf(stderr, "kamera-train check: %zu engine logits vs %lld\n", got->size(),
                     (long long)ref.numel());
        return 1;
      }
      const float* r = ref.data_ptr<float>();
      const int64_t V = ref.size(1);
      for (int64_t row = 0; row < ref.size(0); ++row) {
        int64_t ar = 0, ag = 0;
        for (int64_t j = 0; j < V; ++j) {
          const float x = r[row * V + j], y = (*got)[size_t(row * V + j)];
          max_abs = std::max(max_abs, double(std::fabs(x - y)));
          max_ref = std::max(max_ref, double(std::fabs(x)));
          if (x > r[row * V + ar]) ar = j;
          if (y > (*got)[size_t(row * V + ag)]) ag = j;
        }
        argmax_agree += ar == ag;
        ++n_rows;
      }
      n_logits += ref.numel();
    }
  }
  const bool ok = max_abs <= a.tol && packed_abs <= a.tol;
  if (a.json_out) {
    std::printf("%s\n", json{{"max_abs_diff", max_abs},
                             {"max_abs_logit", max_ref},
                             {"logits", n_logits},
                             {"positions", n_rows},
                             {"argmax_agree", argmax_agree},
                             {"packed_max_abs_diff", packed_abs},
                             {"tolerance", a.tol},
                             {"pass", ok}}
                            .dump()
                            .c_str());
  } else {
    std::printf(
        "engine vs libtorch on %lld logits (%lld positions, %d held-out clips): max |diff| "
        "%.3g (largest |logit| %.3g), argmax agree %lld/%lld; packed training forward vs one "
        "question alone: max |diff| %.3g: %s\n",
        (long long)n_logits, (long long)n_rows, a.clips, max_abs, max_ref, (long long)argmax_agree,
        (long long)n_rows, packed_abs, ok ? "pass" : "FAIL");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kamera-train: the mini vision-language model's trainer (libtorch, CPU)"};
  app.require_subcommand(1);
  TrainArgs t;
  auto* tr = app.add_subcommand("train", "Train on synthetic clips and export the two GGUF files");
  tr->add_option("--seed", t.seed, "Seed of the initialization (data order is fixed)")
      ->capture_default_str();
  tr->add_option("--steps", t.steps, "Optimizer steps")->capture_default_str();
  tr->add_option("--batch-clips", t.batch_clips, "Clips per step (all their questions)")
      ->capture_default_str();
  tr->add_option("--lr", t.lr, "Peak learning rate (AdamW, warmup then cosine)")
      ->capture_default_str();
  tr->add_option("--warmup", t.warmup, "Warmup steps")->capture_default_str();
  tr->add_option("--eval-every", t.eval_every, "Held-out evaluation period (steps)")
      ->capture_default_str();
  tr->add_option("--eval-clips", t.eval_clips, "Held-out clips evaluated")->capture_default_str();
  tr->add_option("--frames", t.frames, "Frames per clip")->capture_default_str();
  tr->add_option("--layers", t.layers, "Decoder layers (0: the default shape, docs/MINIVL.md)");
  tr->add_option("--patch", t.patch,
                 "Vision patch side in pixels (0: the default 8, 4 tokens per frame; 4: 16 tokens "
                 "per frame, mini-VL v2)");
  tr->add_flag("--two-frame", t.two_frame,
               "Also the two-frame family (mini-VL v2): questions naming two frames");
  tr->add_option("--questions", t.questions, "Questions per family per clip")
      ->capture_default_str();
  tr->add_option("-o,--out-dir", t.out_dir, "Where minivl.gguf and minivl-mmproj.gguf go")
      ->capture_default_str();
  tr->add_option("--log", t.log,
                 "Training curve (JSON, and the same as columns in LOG.tsv), rewritten at each "
                 "evaluation");
  tr->add_option("--init-decoder", t.init_decoder, "Continue from these weights (decoder)");
  tr->add_option("--init-vision", t.init_vision, "Continue from these weights (vision)");
  tr->add_option("-t,--threads", t.threads, "Intra-op threads")->capture_default_str();
  CheckArgs c;
  auto* ck = app.add_subcommand(
      "check", "Compare kamera's forward with libtorch's on held-out clips (all logits)");
  ck->add_option("--decoder", c.decoder, "Decoder GGUF")->capture_default_str();
  ck->add_option("--vision", c.vision, "Vision (mmproj) GGUF")->capture_default_str();
  ck->add_option("--clips", c.clips, "Held-out clips (all their questions)")->capture_default_str();
  ck->add_option("--tol", c.tol, "Largest allowed |logit difference|")->capture_default_str();
  ck->add_option("-t,--threads", c.threads, "Threads")->capture_default_str();
  ck->add_option("--frames", c.frames, "Frames per clip")->capture_default_str();
  ck->add_flag("--two-frame", c.two_frame, "Clips with two-frame questions too (mini-VL v2)");
  ck->add_flag("--json", c.json_out, "Print the result as JSON");
  train::TextTrainArgs x;
  auto* tx = app.add_subcommand(
      "text", "Train a text decoder on synthetic tool loops (the copying pair, docs/SPECTRAIN.md)");
  tx->add_option("--seed", x.seed, "Seed of the initialization (data order is fixed)")
      ->capture_default_str();
  tx->add_option("--steps", x.steps, "Optimizer steps (0: evaluate --init's weights and stop)")
      ->capture_default_str();
  tx->add_option("--batch", x.batch, "Transcripts per step")->capture_default_str();
  tx->add_option("--max-len", x.max_len, "Tokens per transcript at most")->capture_default_str();
  tx->add_option("--lr", x.lr, "Peak learning rate (AdamW, warmup then cosine)")
      ->capture_default_str();
  tx->add_option("--warmup", x.warmup, "Warmup steps")->capture_default_str();
  tx->add_option("--other-weight", x.other_weight, "Loss weight of non-assistant tokens")
      ->capture_default_str();
  tx->add_option("--dims", x.dims, "Decoder shape (make-model's --dims keys)")
      ->capture_default_str();
  tx->add_option("--copy-batch", x.copy_batch,
                 "Copy-curriculum sequences per step (a random run repeated; 0: none)")
      ->capture_default_str();
  tx->add_option("--vocab", x.vocab, "Vocabulary size")->capture_default_str();
  tx->add_option("--type", x.type, "Weight type of the file")->capture_default_str();
  tx->add_option("--eval-every", x.eval_every, "Held-out evaluation period (steps)")
      ->capture_default_str();
  tx->add_option("--eval-n", x.eval_n, "Held-out transcripts evaluated")->capture_default_str();
  tx->add_option("--max-minutes", x.max_minutes, "Stop after this long (0: the steps alone)")
      ->capture_default_str();
  tx->add_option("-o,--out", x.out, "Output GGUF")->capture_default_str();
  tx->add_option("--init", x.init, "Continue from this GGUF's weights (the same --dims)");
  tx->add_option("-t,--threads", x.threads, "Intra-op threads")->capture_default_str();
  uint64_t trace_first = 1000;
  int trace_n = 4;
  std::string trace_out = "toolloop-trace.json";
  auto* tt = app.add_subcommand("loop-trace", "Held-out tool-loop transcripts as JSON");
  tt->add_option("--first", trace_first, "First test-split transcript")->capture_default_str();
  tt->add_option("-n", trace_n, "Transcripts")->capture_default_str();
  tt->add_option("-o,--out", trace_out, "Output JSON")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (tr->parsed()) return run_train(t);
  if (tx->parsed()) return train::run_text_train(x);
  if (tt->parsed()) return train::run_loop_trace(trace_first, trace_n, trace_out);
  return run_check(c);
}
