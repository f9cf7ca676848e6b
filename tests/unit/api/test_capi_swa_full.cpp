// kamera_context_params.swa_full (include/kamera.h) on a sliding-window model (make-model's
// gemma3 tiny: 5 local layers of window 8, one global): 0 (the default) bounds the local layers
// by the window, where a chat's next turn still resumes at the end of the last one but a segment
// seen at another place is recomputed; 1 keeps every row and serves that segment from its earlier
// context. Both answer a two-turn chat with the logits of one another; other values are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "kamera.h"
#include "support/tiny_models.h"

namespace {

struct Handles {
  kamera_model* model = nullptr;
  kamera_context* ctx = nullptr;
  std::vector<kamera_seq*> seqs;
  ~Handles() {
    for (kamera_seq* s : seqs) kamera_seq_free(s);
    kamera_context_free(ctx);
    kamera_model_free(model);
  }
};

std::vector<int32_t> tokenize_one(kamera_model* m, const std::string& text) {
  int32_t n = 0;
  kamera_tokenize(m, text.data(), text.size(), 0, nullptr, 0, &n);
  std::vector<int32_t> ids(size_t(std::max(n, 0)));
  EXPECT_EQ(kamera_tokenize(m, text.data(), text.size(), 0, ids.data(), n, &n), KAMERA_OK)
      << kamera_last_error();
  return ids;
}

// The lines tokenized one by one (a line's tokens are the same wherever it stands).
std::vector<int32_t> tokenize(kamera_model* m, std::initializer_list<const char*> lines) {
  std::vector<int32_t> ids;
  for (const char* line : lines) {
    const std::vector<int32_t> t = tokenize_one(m, line);
    ids.insert(ids.end(), t.begin(), t.end());
  }
  return ids;
}

// Lines long enough to be prompt segments of their own.
const char* kLines[] = {
    "A grey ship left the harbour at dawn and turned north past the white cliffs.\n",
    "The market opened late because the baker's cart had lost a wheel on the bridge.\n",
    "Snow covered the fields by noon and the children built a fort behind the school.\n",
    "An old man fed the ducks at the pond while a dog watched him from the bench.\n",
};

struct Served {
  kamera_serve_report report{};
  std::vector<float> logits;
};

Served prompt_eval(Handles& h, const std::vector<int32_t>& ids) {
  Served s;
  kamera_seq* seq = nullptr;
  kamera_logits* l = nullptr;
  EXPECT_EQ(
      kamera_prompt_eval(h.ctx, ids.data(), int32_t(ids.size()), KAMERA_REUSE_PATCH, &seq, &l),
      KAMERA_OK)
      << kamera_last_error();
  if (!seq) return s;
  h.seqs.push_back(seq);
  EXPECT_EQ(kamera_seq_get_report(seq, &s.report), KAMERA_OK);
  s.logits.assign(kamera_logits_data(l), kamera_logits_data(l) + kamera_logits_n_vocab(l));
  kamera_logits_free(l);
  return s;
}

}  // namespace

TEST(CApiSwaFull, BoundedByDefaultEveryRowOnRequest) {
  const std::string path = tiny::model_path("gemma3");
  EXPECT_EQ(kamera_context_default_params().swa_full, 0);
  std::vector<float> last_logits[2];
  int64_t segment_reused[2] = {0, 0};
  for (int32_t full : {0, 1}) {
    Handles h;
    ASSERT_EQ(kamera_model_load(path.c_str(), nullptr, &h.model), KAMERA_OK) << kamera_last_error();
    kamera_context_params p = kamera_context_default_params();
    p.kv_tokens = 4096;
    p.swa_full = full;
    ASSERT_EQ(kamera_context_new(h.model, &p, &h.ctx), KAMERA_OK) << kamera_last_error();
    // turn 1, a reply of 12 tokens evaluated on its sequence and kept, then turn 2 behind them
    const std::vector<int32_t> t1 = tokenize(h.model, {kLines[0], kLines[1]});
    Served s1 = prompt_eval(h, t1);
    std::vector<int32_t> reply = tiny::random_tokens(12, 200, 7);
    ASSERT_EQ(kamera_seq_eval_tokens(h.seqs.back(), reply.data(), 12, KAMERA_LOGITS_NONE, nullptr),
              KAMERA_OK)
        << kamera_last_error();
    ASSERT_EQ(kamera_seq_remember(h.seqs.back()), KAMERA_OK) << kamera_last_error();
    std::vector<int32_t> t2 = t1;
    t2.insert(t2.end(), reply.begin(), reply.end());
    const std::vector<int32_t> user = tokenize(h.model, {kLines[2]});
    t2.insert(t2.end(), user.begin(), user.end());
    Served s2 = prompt_eval(h, t2);
    EXPECT_EQ(s2.report.tokens_reused, int64_t(t1.size() + reply.size())) << full;
    EXPECT_EQ(s2.report.tokens_computed, int64_t(user.size())) << full;
    last_logits[full] = s2.logits;
    // turn 1's first line at another place: a segment of an earlier context
    std::vector<int32_t> t3 = tokenize(h.model, {kLines[3], kLines[0]});
    const std::vector<int32_t> q = tokenize(h.model, {kLines[2]});
    t3.insert(t3.end(), q.begin(), q.end());
    segment_reused[full] = prompt_eval(h, t3).report.tokens_reused;
  }
  const std::vector<float>& want = last_logits[1];
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  EXPECT_LE(tiny::max_abs_diff(last_logits[0], want), 1e-5 * scale);
  EXPECT_EQ(segment_reused[0], 0);   // bounded: not a prefix, recomputed
  EXPECT_GT(segment_reused[1], 10);  // every row: the line served from turn 1's context

  Handles h;
  ASSERT_EQ(kamera_model_load(path.c_str(), nullptr, &h.model), KAMERA_OK);
  kamera_context_params p = kamera_context_default_params();
  p.swa_full = 2;
  EXPECT_EQ(kamera_context_new(h.model, &p, &h.ctx), KAMERA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h.ctx, nullptr);
  EXPECT_NE(std::string(kamera_last_error()).find("swa_full 2"), std::string::npos)
      << kamera_last_error();
}
