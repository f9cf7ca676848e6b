#include "train/text_train.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "minivl/minivl.h"
#include "synthetic/synthetic_model.h"
#include "train/toolloop.h"
#include "train/torch_minivl.h"

namespace kamera::train {

namespace {

struct Batch {
  torch::Tensor ids, targets, weights;  // [B, T], [B, T], [B, T]
};

Batch make_batch(const Tokenizer& tok, LoopSplit split, uint64_t first, int n, int max_len,
                 double other_weight) {
  std::vector<LoopTokens> seqs;
  int64_t T = 0;
  for (int i = 0; i < n; ++i) {
    seqs.push_back(tokenize_loop(tok, make_tool_loop(split, first + uint64_t(i))));
    T = std::max<int64_t>(T, std::min<int64_t>(max_len + 1, int64_t(seqs.back().ids.size())));
  }
  --T;
  std::vector<int64_t> ids(size_t(n * T), 0), tgt(size_t(n * T), 0);
  std::vector<float> w(size_t(n * T), 0.0f);
  for (int b = 0; b < n; ++b) {
    const LoopTokens& s = seqs[size_t(b)];
    const int64_t len = std::min<int64_t>(T + 1, int64_t(s.ids.size()));
    for (int64_t t = 0; t + 1 < len; ++t) {
      ids[size_t(b * T + t)] = s.ids[size_t(t)];
      tgt[size_t(b * T + t)] = s.ids[size_t(t + 1)];
      w[size_t(b * T + t)] = s.assistant[size_t(t + 1)] ? 1.0f : float(other_weight);
    }
  }
  auto opt64 = torch::kInt64;
  return {torch::from_blob(ids.data(), {n, T}, opt64).clone(),
          torch::from_blob(tgt.data(), {n, T}, opt64).clone(),
          torch::from_blob(w.data(), {n, T}, torch::kFloat32).clone()};
}

// The copy curriculum: n sequences [BOS][s][s][s] of a random run s of 16-48 ordinary pieces
// (drawn from torch's seeded generator); the loss counts the repeats fully, the first run at
// `other_weight`. It gives the attention a dense copying signal (the induction pattern) that the
// tool loops hold only in their quoted spans.
Batch copy_batch(const Tokenizer& tok, int n, double other_weight) {
  const int64_t lo = 3 + 256, hi = tok.n_vocab() - 2;  // past <unk> <s> </s> and the bytes
  const int64_t len = torch::randint(16, 49, {1}).item<int64_t>(), T = 3 * len;
  auto run = torch::randint(lo, hi, {n, len}, torch::kInt64);
  auto seq = torch::cat({torch::full({n, 1}, int64_t(tok.bos()), torch::kInt64), run, run, run}, 1);
  auto w = torch::full({n, T}, 1.0f);
  w.slice(1, 0, len - 1).fill_(float(other_weight));
  return {seq.slice(1, 0, T), seq.slice(1, 1, T + 1), w};
}

torch::Tensor weighted_loss(const torch::Tensor& logits, const Batch& b) {
  auto ce = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), b.targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto w = b.weights.reshape({-1});
  return (ce * w).sum() / w.sum();
}

// Held-out teacher-forced accuracy of the argmax on assistant tokens: all of them, and those
// that continue a 3-gram seen earlier in the conversation (what prompt lookup can draft).
struct CopyAcc {
  int64_t n = 0, right = 0, copy_n = 0, copy_right = 0;
  double loss = 0;
};

CopyAcc evaluate(TorchMiniVl& m, const Tokenizer& tok, int n_conv, int max_len) {
  torch::NoGradGuard ng;
  CopyAcc a;
  for (int i = 0; i < n_conv; ++i) {
    const LoopTokens s = tokenize_loop(tok, make_tool_loop(LoopSplit::Test, uint64_t(i)));
    const int64_t len = std::min<int64_t>(max_len + 1, int64_t(s.ids.size()));
    std::vector<int64_t> ids(s.ids.begin(), s.ids.begin() + len);
    auto x = torch::from_blob(ids.data(), {1, len}, torch::kInt64).clone();
    auto logits = m.text_logits(x.slice(1, 0, len - 1))[0];
    auto pred = logits.argmax(-1);
    std::unordered_set<uint64_t> seen;
    auto key = [&](int64_t t) {
      return (uint64_t(ids[size_t(t - 2)]) << 40) ^ (uint64_t(ids[size_t(t - 1)]) << 20) ^
             uint64_t(ids[size_t(t)]);
    };
    for (int64_t t = 1; t < len; ++t) {
      const bool copy = t >= 2 && seen.count(key(t));
      if (t >= 2) seen.insert(key(t));
      if (!s.assistant[size_t(t)]) continue;
      const bool ok = pred[t - 1].item<int64_t>() == ids[size_t(t)];
      a.n++, a.right += ok;
      if (copy) a.copy_n++, a.copy_right += ok;
    }
  }
  return a;
}

// The server renders the whole prompt and tokenizes it at once; the trainer tokenizes messages
// one by one (for the loss mask). They must agree.
bool tokenization_agrees(const Tokenizer& tok) {
  for (uint64_t i = 0; i < 8; ++i) {
    const auto msgs = make_tool_loop(LoopSplit::Test, i);
    auto whole = tok.tokenize(render_chatml(msgs, false), {false, true});
    whole.insert(whole.begin(), tok.bos());
    if (whole != tokenize_loop(tok, msgs).ids) return false;
  }
  return true;
}

}  // namespace

int run_text_train(const TextTrainArgs& a) {
  torch::manual_seed(a.seed);
  torch::set_num_threads(a.threads);
  auto cfg = synthetic_preset(Arch::Qwen2, "tiny");
  if (Status s = apply_dims(
          *cfg, a.dims + ",vocab=" + std::to_string(a.vocab) + ",ctx=4096,tied=0,bias=1");
      !s.ok()) {
    std::fprintf(stderr, "kamera-train text: %s\n", s.message().c_str());
    return 1;
  }
  auto vocab = loop_vocab(a.vocab);
  if (!vocab.ok())
    return std::fprintf(stderr, "kamera-train text: %s\n", vocab.message().c_str()), 1;
  auto tok = Tokenizer::from_vocab(*vocab);
  if (!tok.ok()) return std::fprintf(stderr, "kamera-train text: %s\n", tok.message().c_str()), 1;
  if (!tokenization_agrees(*tok)) {
    std::fprintf(stderr, "kamera-train text: whole-prompt and per-message tokens differ\n");
    return 1;
  }
  auto type = dtype_from_name(a.type);
  if (!type) return std::fprintf(stderr, "kamera-train text: unknown type %s\n", a.type.c_str()), 1;
  TorchMiniVl model(*cfg, minivl::vision_config());
  if (!a.init.empty()) {
    auto m = load_model(a.init);
    Status st = m.ok() ? model.import_decoder(**m) : m.error();
    if (!st.ok())
      return std::fprintf(stderr, "kamera-train text: --init: %s\n", st.message().c_str()), 1;
  }
  std::vector<torch::Tensor> params;
  int64_t n_params = 0;
  for (const auto& [name, t] : model.gguf_tensors())
    if (name.rfind("v.", 0) != 0 && name.rfind("mm.", 0) != 0)
      params.push_back(t), n_params += t.numel();
  std::fprintf(
      stderr,
      "kamera-train text: %lld decoder parameters (%s), vocabulary %d, %d steps of %d loops\n",
      (long long)n_params, a.dims.c_str(), a.vocab, a.steps, a.batch);
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(a.lr).weight_decay(a.weight_decay));
  if (a.steps <= 0) {  // evaluate --init's weights only
    const CopyAcc acc = evaluate(model, *tok, a.eval_n, a.max_len);
    std::printf(
        "held-out assistant accuracy %.4f (%lld tokens), copied-3-gram accuracy %.4f "
        "(%lld tokens), %d transcripts of at most %d tokens\n",
        double(acc.right) / std::max<int64_t>(1, acc.n), (long long)acc.n,
        double(acc.copy_right) / std::max<int64_t>(1, acc.copy_n), (long long)acc.copy_n, a.eval_n,
        a.max_len);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  double run_loss = 0;
  int run_n = 0;
  // Progress runs from 0 to 1 with the steps, or with the time when --max-minutes ends first:
  // the cosine schedule decays by it, so a run cut by time still ends at a low rate.
  const double budget_s = a.max_minutes > 0 ? a.max_minutes * 60 : 0;
  double progress = 0, secs = 0;
  for (int step = 1; progress < 1; ++step) {
    const double warm = std::min(1.0, double(step) / std::max(1, a.warmup));
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
    for (auto& g : opt.param_groups())
      static_cast<torch::optim::AdamWOptions&>(g.options())
          .lr(a.lr * warm * (0.05 + 0.95 * cosine));
    const Batch b = make_batch(*tok, LoopSplit::Train, uint64_t(step - 1) * uint64_t(a.batch),
                               a.batch, a.max_len, a.other_weight);
    opt.zero_grad();
    auto loss = weighted_loss(model.text_logits(b.ids), b);
    if (a.copy_batch > 0) {
      const Batch c = copy_batch(*tok, a.copy_batch, a.other_weight);
      loss = loss + weighted_loss(model.text_logits(c.ids), c);
    }
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    opt.step();
    run_loss += loss.item<double>(), ++run_n;
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress = std::max(double(step) / a.steps, budget_s > 0 ? secs / budget_s : 0.0);
    if (step % a.eval_every == 0 || progress >= 1) {
      const CopyAcc acc = evaluate(model, *tok, a.eval_n, a.max_len);
      std::fprintf(
          stderr,
          "step %4d  %.0f s (%.2f s/step)  train loss %.4f  held-out assistant accuracy %.4f (%lld "
          "tokens), copied-3-gram accuracy %.4f (%lld tokens)\n",
          step, secs, secs / step, run_loss / run_n,
          double(acc.right) / std::max<int64_t>(1, acc.n), (long long)acc.n,
          double(acc.copy_right) / std::max<int64_t>(1, acc.copy_n), (long long)acc.copy_n);
      run_loss = 0, run_n = 0;
    }
  }
  if (Status s = model.export_decoder(a.out, *vocab, a.name, *type); !s.ok()) {
    std::fprintf(stderr, "kamera-train text: export: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kamera-train text: wrote %s\n", a.out.c_str());
  return 0;
}

int run_loop_trace(uint64_t first, int n, const std::string& out) {
  nlohmann::json convs = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    nlohmann::json c = nlohmann::json::array();
    for (const LoopMessage& m : make_tool_loop(LoopSplit::Test, first + uint64_t(i)))
      c.push_back({{"role", m.role}, {"content", m.content}});
    convs.push_back(c);
  }
  std::ofstream f(out);
  f << convs.dump(1) << "\n";
  return f ? 0 : 1;
}

}  // namespace kamera::train
