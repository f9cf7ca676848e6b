// The binding frame traces (demo/binding_trace.h): views a sliding window never produces, with
// cross-frame questions over frames whose neighbours changed.
#include "demo/binding_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace kamera {
namespace {

BindingTrace make(const std::string& mode, uint64_t clip, int frames = 48) {
  BindingTraceOptions o;
  o.mode = mode;
  o.clip = clip;
  o.n_frames = frames;
  auto t = make_binding_trace(o);
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? std::move(*t) : BindingTrace{};
}

// Whether a frame the answer needs follows another frame than in its latest earlier view,
// recomputed here from the views alone.
std::vector<bool> binds_of(const BindingTrace& t) {
  std::map<int, int> seen;
  std::vector<bool> out;
  for (const auto& b : t.questions) {
    bool binds = false;
    for (int j : b.q.frames) {
      const int pred = j ? b.frames[size_t(j - 1)] : -1;
      const auto it = seen.find(b.frames[size_t(j)]);
      binds = binds || (it != seen.end() && it->second != pred);
    }
    out.push_back(binds);
    for (size_t j = 0; j < b.frames.size(); ++j) seen[b.frames[j]] = j ? b.frames[j - 1] : -1;
  }
  return out;
}

TEST(BindingTrace, ReordersResortTheSameSetWithCrossFrameQuestionsThatBind) {
  int reorders = 0, binding_cross = 0;
  for (uint64_t clip = 0; clip < 4; ++clip) {
    const BindingTrace t = make("reorder", clip);
    ASSERT_EQ(t.questions.size(),
              24u);  // 8 sets of 6, each asked once in order and twice re-sorted
    const auto binds = binds_of(t);
    for (size_t i = 0; i < t.questions.size(); ++i) {
      const BindingQuestion& b = t.questions[i];
      const auto& set = t.questions[i - i % 3].frames;
      EXPECT_TRUE(std::is_permutation(b.frames.begin(), b.frames.end(), set.begin(), set.end()));
      EXPECT_EQ(b.binds, binds[i]) << "question " << i;
      if (i % 3 == 0) {
        EXPECT_EQ(b.situation, "slide");
        EXPECT_TRUE(std::is_sorted(b.frames.begin(), b.frames.end()));
        continue;
      }
      EXPECT_EQ(b.situation, "reorder");
      EXPECT_NE(b.frames, set);
      ++reorders;
      binding_cross += b.binds && b.q.family == minivl::Family::CrossFrame;
    }
  }
  // Measured on Test streams 0-3: most re-sorted views offer a binding cross-frame question.
  EXPECT_GE(binding_cross * 4, reorders * 3) << binding_cross << " of " << reorders;
}

TEST(BindingTrace, RecallsPutAnEvictedFrameBackAndAskAboutIt) {
  int recalls = 0, cross_on_recalled = 0;
  for (uint64_t clip = 0; clip < 4; ++clip) {
    const BindingTrace t = make("recall", clip);
    ASSERT_EQ(t.questions.size(), 43u);  // one per full window of 6 over 48 frames
    for (size_t i = 0; i < t.questions.size(); ++i) {
      const BindingQuestion& b = t.questions[i];
      const int last = int(i) + 5;
      ASSERT_EQ(b.frames.size(), 6u);
      if (b.situation == "slide") {
        EXPECT_EQ(b.frames.front(), last - 5);
        EXPECT_EQ(b.frames.back(), last);
        continue;
      }
      ++recalls;
      EXPECT_EQ(i % 2, 1u);
      EXPECT_LT(b.recalled, last - 5);  // evicted before this window
      EXPECT_EQ(std::count(b.frames.begin(), b.frames.end(), b.recalled), 1);
      EXPECT_EQ(std::count(b.frames.begin(), b.frames.end(), last - 5), 0);  // its oldest left out
      const bool needs = std::count(b.stream_frames.begin(), b.stream_frames.end(), b.recalled);
      EXPECT_TRUE(needs) << "question " << i;
      cross_on_recalled += needs && b.q.family == minivl::Family::CrossFrame;
    }
  }
  EXPECT_GE(cross_on_recalled * 4, recalls * 3) << cross_on_recalled << " of " << recalls;
}

TEST(BindingTrace, IsSeededAndRefusesWhatItCannotMake) {
  const BindingTrace a = make("reorder", 2, 24), b = make("reorder", 2, 24);
  ASSERT_EQ(a.questions.size(), b.questions.size());
  for (size_t i = 0; i < a.questions.size(); ++i) {
    EXPECT_EQ(a.questions[i].frames, b.questions[i].frames);
    EXPECT_EQ(a.questions[i].q.tokens, b.questions[i].q.tokens);
    EXPECT_EQ(a.questions[i].q.answer, b.questions[i].q.answer);
  }
  BindingTraceOptions o;
  o.mode = "shuffle";
  EXPECT_FALSE(make_binding_trace(o).ok());
  o.mode = "recall";
  o.n_frames = 6;  // nothing is ever evicted
  EXPECT_FALSE(make_binding_trace(o).ok());
}

}  // namespace
}  // namespace kamera
