#include <fmt/format.h>
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cache/chunk_cache.h"
#include "demo/agent_demo.h"
#include "minivl/minivl.h"
#include "support/temp_path.h"
#include "vision/frame_chunk.h"
#include "window/window.h"

using namespace kamera;

namespace {

namespace fs = std::filesystem;

// Random-weight mini-VL files in a temp folder, loaded once for the whole suite.
struct RandomMiniVl {
  std::string dir, decoder, vision;
  minivl::MiniVl model;
  RandomMiniVl() {
    dir = unique_temp("kamera_agent_demo_") + std::to_string(::getpid());
    fs::create_directories(dir);
    decoder = dir + "/minivl.gguf";
    vision = dir + "/minivl-mmproj.gguf";
    const Status st = minivl::write_random_minivl(decoder, vision, 7);
    EXPECT_TRUE(st.ok()) << st.message();
    auto m = minivl::MiniVl::load(decoder, vision);
    EXPECT_TRUE(m.ok()) << m.message();
    if (m.ok()) model = std::move(*m);
  }
  ~RandomMiniVl() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

RandomMiniVl& random_minivl() {
  static RandomMiniVl m;
  return m;
}

// The demo run the tests inspect: 10 frames, a window of 4, a recall every 3rd question, full
// rank, one timed rep.
struct DemoRun {
  AgentDemoOptions opts;
  Result<AgentDemoResult> result = make_error(ErrorCode::InvalidArgument, "not run");
  std::string png;
  DemoRun() {
    RandomMiniVl& m = random_minivl();
    opts.n_frames = 10;
    opts.window = 4;
    opts.rank = kFullRank;
    opts.recall_every = 3;
    opts.reps = 1;
    png = m.dir + "/agent-demo.png";
    opts.png_path = png;
    auto ctx = Context::create(m.model.decoder, agent_demo_context(opts, 1));
    EXPECT_TRUE(ctx.ok()) << ctx.message();
    if (ctx.ok()) result = run_agent_demo(m.model, **ctx, opts);
  }
};

const DemoRun& demo_run() {
  static DemoRun r;
  return r;
}

}  // namespace

TEST(AgentDemo, QuestionsAndRecalls) {
  const DemoRun& run = demo_run();
  ASSERT_TRUE(run.result.ok()) << run.result.message();
  const AgentDemoResult& r = *run.result;
  const int W = run.opts.window, N = run.opts.n_frames;
  ASSERT_EQ(int(r.steps.size()), N);
  EXPECT_EQ(r.tokens_per_frame, 4);
  EXPECT_TRUE(r.rank_is_full);

  // One question per step once the window is full; every 3rd of them a recall.
  int questions = 0, recalls = 0, single = 0, cross = 0;
  for (const auto& st : r.steps) {
    EXPECT_EQ(st.step >= W - 1, st.question.has_value()) << "step " << st.step;
    EXPECT_EQ(st.window_last, st.step);
    EXPECT_EQ(st.window_first, std::max(0, st.step - W + 1));
    if (!st.question) continue;
    const DemoQuestion& q = *st.question;
    const bool want_recall = (questions + 1) % 3 == 0;
    ++questions;
    EXPECT_EQ(q.type == DemoQuestionType::Recall, want_recall) << "step " << st.step;
    EXPECT_EQ(st.recalled >= 0, want_recall);
    if (q.type == DemoQuestionType::Recall) {
      ++recalls;
      // A frame evicted earlier, asked about as f0 on the fork (the oldest frame left out).
      EXPECT_LT(st.recalled, st.window_first);
      EXPECT_EQ(st.fork_dropped, st.window_first);
      EXPECT_EQ(q.stream_frames, std::vector<int>{st.recalled});
      EXPECT_NE(q.text.find(" f0 "), std::string::npos) << q.text;
      EXPECT_TRUE(q.kind == "colour_of" || q.kind == "shape_of");
    } else {
      (q.type == DemoQuestionType::SingleHop ? single : cross)++;
      for (int f : q.stream_frames) {
        EXPECT_GE(f, st.window_first);
        EXPECT_LE(f, st.window_last);
      }
    }
    EXPECT_FALSE(q.tokens.empty());
    EXPECT_GT(q.kamera_ms, 0);
    EXPECT_GT(q.reprefill_ms, 0);
    EXPECT_GE(q.kl, -1e-12);
  }
  EXPECT_EQ(questions, N - W + 1);
  EXPECT_EQ(recalls, (N - W + 1) / 3);
  EXPECT_EQ(r.by_type[size_t(DemoQuestionType::Recall)].count, recalls);
  EXPECT_EQ(r.by_type[size_t(DemoQuestionType::SingleHop)].count, single);
  EXPECT_EQ(r.by_type[size_t(DemoQuestionType::CrossFrame)].count, cross);
  EXPECT_EQ(r.all.count, questions);
  EXPECT_GE(single, 1);

  // The first question comes before any slide: every frame carries its full-rank patch formed
  // on exactly the frames before it, so kamera's answer is re-prefill's up to rounding.
  const DemoQuestion& first = *r.steps[size_t(W - 1)].question;
  EXPECT_LT(first.kl, 1e-6);
  EXPECT_EQ(first.kamera, first.reprefill);

  const nlohmann::json j = agent_demo_json(r);
  EXPECT_EQ(j["steps"].size(), size_t(N));
  EXPECT_EQ(j["summary"]["by_type"]["recall"]["count"], recalls);
  EXPECT_EQ(j["summary"]["all"]["count"], questions);
  EXPECT_EQ(j["config"]["rank_used"], 4);
}

TEST(AgentDemo, OpsMatchTheLoop) {
  const DemoRun& run = demo_run();
  ASSERT_TRUE(run.result.ok()) << run.result.message();
  const AgentDemoResult& r = *run.result;
  const int W = run.opts.window, tpf = r.tokens_per_frame;
  const int64_t row_bytes =
      int64_t(random_minivl().model.decoder->kv_layout().floats_per_token() * sizeof(float));
  EXPECT_TRUE(r.relocation_exact);
  for (const auto& st : r.steps) {
    const DemoOps& o = st.ops;
    const bool slide = st.step >= W, recall = st.recalled >= 0;
    SCOPED_TRACE("step " + std::to_string(st.step));
    EXPECT_EQ(o.frames_encoded, 1);  // each frame encoded once
    EXPECT_EQ(o.chunks_admitted, 1);
    // Exactly one patch formed and applied per admitted frame behind another (the front frame
    // is exact); a recall at the front is exact too: no patch, no forward.
    EXPECT_EQ(o.patches_formed, st.step == 0 ? 0 : 1);
    EXPECT_EQ(o.patches_applied, st.step == 0 ? 0 : 1);
    EXPECT_EQ(st.fork_forwards, 0);
    // Forwards: only the admission's (the frame's canonical, when new, and its patch); the
    // slide, the fork and the recall run none.
    EXPECT_LE(o.canonicals_formed, 1);
    EXPECT_EQ(o.forwards, o.canonicals_formed + o.patches_formed);
    const int window_tokens = (std::min(st.step, W - 1) + 1) * tpf;
    EXPECT_EQ(o.tokens_forwarded,
              int64_t(o.canonicals_formed) * tpf + int64_t(o.patches_formed) * window_tokens);
    // A slide evicts one frame and relocates the W - 1 survivors (metadata: their KV is checked
    // bit-identical); the recall fork drops one more and moves the same W - 1 back.
    EXPECT_EQ(st.evicted, slide ? st.step - W : -1);
    EXPECT_EQ(o.chunks_evicted, int(slide) + int(recall));
    EXPECT_EQ(o.chunks_recalled, int(recall));
    EXPECT_EQ(o.chunks_relocated, (slide ? W - 1 : 0) + (recall ? 2 * (W - 1) : 0));
    EXPECT_EQ(o.tokens_relocated, int64_t(o.chunks_relocated) * tpf);
    EXPECT_EQ(st.relocation_checked, slide || recall);
    EXPECT_TRUE(st.relocation_exact);
    // Bytes: the admitted (and recalled) frame's rows; the fork copies no page.
    EXPECT_EQ(o.cow_pages, 0);
    EXPECT_EQ(o.kv_bytes_written, int64_t(1 + int(recall)) * tpf * row_bytes);
  }
  EXPECT_EQ(r.totals.frames_encoded, run.opts.n_frames);
  EXPECT_EQ(r.totals.patches_formed, run.opts.n_frames - 1);
}

// The re-prefill arm (one forward over [<bos>, frames, question]) answers as the reference
// minivl::clip_logits does (one forward per chunk), and the gold answers hold on the window.
TEST(AgentDemo, ReprefillMatchesClipLogits) {
  const DemoRun& run = demo_run();
  ASSERT_TRUE(run.result.ok()) << run.result.message();
  const AgentDemoResult& r = *run.result;
  RandomMiniVl& m = random_minivl();
  minivl::ClipSpec spec;
  spec.n_frames = run.opts.n_frames;
  const minivl::Clip stream = minivl::make_stream(minivl::Split::Test, run.opts.clip, spec);
  VisionEncoder enc(m.model.vision);
  std::vector<ChunkContent> chunks;
  for (const auto& f : stream.frames) {
    auto c = frame_chunk(enc, f.rgb);
    ASSERT_TRUE(c.ok());
    chunks.push_back(std::move(*c));
  }
  auto pool = KvPool::create(pool_params(*m.model.decoder, 64 * 16));
  ASSERT_TRUE(pool.ok());
  Engine engine(*m.model.decoder, 1);
  for (const auto& st : r.steps) {
    if (!st.question) continue;
    const DemoQuestion& q = *st.question;
    std::vector<ChunkContent> view;
    if (st.recalled >= 0) view.push_back(chunks[size_t(st.recalled)]);
    for (int i = st.window_first + (st.recalled >= 0); i <= st.window_last; ++i)
      view.push_back(chunks[size_t(i)]);
    ASSERT_EQ(int(view.size()), run.opts.window);
    auto l = minivl::clip_logits(engine, **pool, view, q.tokens, false);
    ASSERT_TRUE(l.ok()) << l.message();
    const int32_t am = int32_t(std::max_element(l->begin(), l->end()) - l->begin());
    EXPECT_EQ(am, q.reprefill) << "step " << st.step << ": " << q.text;
    // The gold answer, re-derived from the frames the model sees.
    std::vector<minivl::Frame> frames;
    if (st.recalled >= 0) frames.push_back(stream.frames[size_t(st.recalled)]);
    for (int i = st.window_first + (st.recalled >= 0); i <= st.window_last; ++i)
      frames.push_back(stream.frames[size_t(i)]);
    bool found = false;
    for (const auto& c : minivl::all_questions(frames))
      found = found || (c.tokens == q.tokens && c.answer == q.gold);
    EXPECT_TRUE(found) << q.text;
  }
}

// Independently of the demo's own check: a slide leaves the survivors' KV rows bit-identical and
// moves each survivor back by one frame's extent.
TEST(AgentDemo, SlideIsMetadata) {
  RandomMiniVl& m = random_minivl();
  ContextOptions co;
  co.n_threads = 1;
  co.kv_tokens = 64 * 16;
  co.store_bytes = size_t(1) << 26;
  co.anchor = {minivl::bos_id()};
  auto ctx = Context::create(m.model.decoder, co);
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  KvPool* pool = &(*ctx)->pool();
  ChunkStore& store = (*ctx)->store();
  WindowPolicy pol;
  pol.rank = 2;
  auto win = Window::create(**ctx, pol);
  ASSERT_TRUE(win.ok());
  VisionEncoder enc(m.model.vision);
  const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 5);
  for (int i = 0; i < 4; ++i) {
    auto c = frame_chunk(enc, clip.frames[size_t(i)].rgb);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*win)->admit_back(*c).ok());
  }
  Window& w = **win;
  std::vector<ChunkKV> before;
  std::vector<int32_t> pos_before;
  for (int s = 1; s < 4; ++s) {
    before.push_back(read_chunk_kv(*pool, w.sequence(), w.token_index(s), w.slots()[s].n_tokens()));
    pos_before.push_back(w.slots()[s].position);
  }
  const int32_t extent = w.slots()[0].extent();
  const ChunkStore::Stats s0 = store.stats();
  ASSERT_TRUE(w.evict_front().ok());
  const ChunkStore::Stats s1 = store.stats();
  EXPECT_EQ(s1.canonical_misses, s0.canonical_misses);  // no forward of any kind
  EXPECT_EQ(s1.patch_misses, s0.patch_misses);
  ASSERT_EQ(w.slots().size(), 3u);
  ASSERT_TRUE(w.check_invariants().ok());
  for (int s = 0; s < 3; ++s) {
    const ChunkKV after =
        read_chunk_kv(*pool, w.sequence(), w.token_index(s), w.slots()[s].n_tokens());
    const ChunkKV& b = before[size_t(s)];
    ASSERT_EQ(after.blocks.size(), b.blocks.size());
    for (size_t k = 0; k < b.blocks.size(); ++k) {
      ASSERT_EQ(after.blocks[k].bytes(), b.blocks[k].bytes());
      EXPECT_EQ(std::memcmp(after.blocks[k].raw(), b.blocks[k].raw(), b.blocks[k].bytes()), 0)
          << "slot " << s << " block " << k;
    }
    EXPECT_EQ(w.slots()[s].position, pos_before[size_t(s)] - extent);
  }
}

TEST(AgentDemo, Png) {
  const DemoRun& run = demo_run();
  ASSERT_TRUE(run.result.ok()) << run.result.message();
  ASSERT_TRUE(fs::exists(run.png));
  EXPECT_FALSE(fs::exists(run.png + ".tmp"));
  // The documented layout for 10 frames: scale 2 (64-pixel frames, pitch 68), bars 320 wide.
  const int width = 8 + 10 * 68 - 4 + 16 + 320 + 8, height = 8 + 64 + 8 + 10 * 14 + 8;
  EXPECT_EQ(agent_demo_png_size(10), std::make_pair(width, height));
  EXPECT_EQ(run.result->png_width, width);
  EXPECT_EQ(run.result->png_height, height);
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  ASSERT_TRUE(png_image_begin_read_from_file(&img, run.png.c_str())) << img.message;
  img.format = PNG_FORMAT_RGB;
  EXPECT_EQ(int(img.width), width);
  EXPECT_EQ(int(img.height), height);
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(img));
  ASSERT_TRUE(png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) << img.message;
  auto at = [&](int x, int y) {
    const uint8_t* p = &px[(size_t(y) * img.width + size_t(x)) * 3];
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  // Step 0's row: frame 0 admitted (green box under the first frame).
  const int row0 = 8 + 64 + 8;
  EXPECT_EQ(at(8 + 10, row0 + 4), (std::array<uint8_t, 3>{60, 190, 80}));
  // The last step has a question: its red re-prefill bar starts at the bars' origin.
  const int last = row0 + 9 * 14, x0 = 8 + 10 * 68 - 4 + 16;
  EXPECT_EQ(at(x0, last + 2), (std::array<uint8_t, 3>{220, 50, 50}));
  EXPECT_EQ(at(x0, last + 7), (std::array<uint8_t, 3>{50, 90, 230}));
}

TEST(AgentDemo, RejectsBadOptions) {
  RandomMiniVl& m = random_minivl();
  AgentDemoOptions o;
  auto ctx = Context::create(m.model.decoder, agent_demo_context(o, 1));
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  o.window = 1;
  EXPECT_FALSE(run_agent_demo(m.model, **ctx, o).ok());
  o.window = 17;  // frame words end at f15
  EXPECT_FALSE(run_agent_demo(m.model, **ctx, o).ok());
  o.window = 8;
  o.n_frames = 5;  // shorter than the window
  EXPECT_FALSE(run_agent_demo(m.model, **ctx, o).ok());
  o.n_frames = 8;
  o.rank = 0;
  EXPECT_FALSE(run_agent_demo(m.model, **ctx, o).ok());
}

// make_stream extends make_clip, and the questions of any window of a stream check out.
TEST(AgentDemo, StreamsAndWindowQuestions) {
  for (uint64_t i = 0; i < 20; ++i) {
    minivl::ClipSpec spec;
    const minivl::Clip c = minivl::make_clip(minivl::Split::Test, i, spec);
    const minivl::Clip s = minivl::make_stream(minivl::Split::Test, i, spec);
    ASSERT_EQ(c.frames.size(), s.frames.size());
    for (size_t t = 0; t < c.frames.size(); ++t) EXPECT_EQ(c.frames[t].rgb, s.frames[t].rgb);
    ASSERT_EQ(c.questions.size(), s.questions.size());
    for (size_t k = 0; k < c.questions.size(); ++k)
      EXPECT_EQ(c.questions[k].text(), s.questions[k].text());
    // make_questions draws from all_questions.
    const auto all = minivl::all_questions(c.frames);
    for (const auto& q : minivl::make_questions(c.frames, i, 2)) {
      bool found = false;
      for (const auto& a : all) found = found || (a.tokens == q.tokens && a.answer == q.answer);
      EXPECT_TRUE(found) << q.text();
    }
    // Every question of make_clip is among all_questions of its frames.
    for (const auto& q : c.questions) {
      bool found = false;
      for (const auto& a : all) found = found || (a.tokens == q.tokens && a.answer == q.answer);
      EXPECT_TRUE(found) << q.text();
    }
  }
  minivl::ClipSpec spec;
  spec.n_frames = 40;
  const minivl::Clip s = minivl::make_stream(minivl::Split::Test, 3, spec);
  ASSERT_EQ(s.frames.size(), 40u);
  EXPECT_EQ(s.events.size(), 39u);
  EXPECT_TRUE(s.questions.empty());
  int cross = 0;
  for (int first = 0; first + 8 <= 40; ++first) {
    const std::vector<minivl::Frame> w(s.frames.begin() + first, s.frames.begin() + first + 8);
    for (const auto& q : minivl::all_questions(w)) {
      for (int f : q.frames) {
        EXPECT_GE(f, 0);
        EXPECT_LT(f, 8);
      }
      if (q.family == minivl::Family::SingleHop) {
        // The key is unique in the frame named by the question, and the answer is its other half.
        const int k = q.frames.at(0);
        const std::string key = minivl::words()[size_t(q.tokens[2])];
        int hits = 0;
        for (const auto& o : w[size_t(k)].objects) {
          const bool by_shape = q.kind == "colour_of";
          const std::string name = by_shape ? minivl::shape_names()[size_t(o.shape)]
                                            : minivl::colour_names()[size_t(o.colour)];
          if (name != key) continue;
          ++hits;
          const std::string want = by_shape ? minivl::colour_names()[size_t(o.colour)]
                                            : minivl::shape_names()[size_t(o.shape)];
          EXPECT_EQ(minivl::words()[size_t(q.answer)], want) << q.text();
        }
        EXPECT_EQ(hits, 1) << q.text();
        EXPECT_EQ(q.tokens[5], minivl::word_id(fmt::format("f{}", k)));
      } else {
        ++cross;
      }
    }
  }
  EXPECT_GT(cross, 0);
}
