#include "demo/agent_demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <utility>

#include "cache/chunk_cache.h"
#include "core/clock.h"
#include "eval/metrics.h"
#include "kv/kv_row.h"
#include "model/sampler.h"
#include "vision/frame_chunk.h"
#include "window/window.h"

namespace kamera {

namespace {

using json = nlohmann::json;

// splitmix64: the demo's own choices (which question, which frame to recall) are fixed by the
// stream's seed alone.
class DemoRng {
 public:
  explicit DemoRng(uint64_t seed) : s_(seed) {}
  int below(int n) {
    s_ += 0x9E3779B97F4A7C15ull;
    uint64_t x = s_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return int(x % uint64_t(n));
  }

 private:
  uint64_t s_;
};

// Where every chunk of a window sits, to count what an operation relocated.
std::vector<std::pair<ChunkId, int32_t>> slot_positions(const Window& w) {
  std::vector<std::pair<ChunkId, int32_t>> out;
  for (const auto& s : w.slots()) out.emplace_back(s.id, s.position);
  return out;
}

// Chunks whose position an operation changed: slot j after the operation was slot j + shift
// before it (evict at the front: +1; insert at the front: -1; admit at the back: 0).
void count_relocations(const std::vector<std::pair<ChunkId, int32_t>>& before, const Window& w,
                       int shift, DemoOps& ops) {
  for (int j = 0; j < int(w.slots().size()); ++j) {
    const int i = j + shift;
    if (i < 0 || i >= int(before.size())) continue;
    const WindowSlot& s = w.slots()[size_t(j)];
    if (before[size_t(i)].first == s.id && before[size_t(i)].second != s.position) {
      ++ops.chunks_relocated;
      ops.tokens_relocated += s.n_tokens();
    }
  }
}

// The rows (every layer and channel) of tokens [begin, end) of a sequence, and their positions.
struct RowsSnapshot {
  std::vector<float> rows;
  std::vector<Pos> positions;
};

RowsSnapshot snapshot(const KvPool& pool, SeqId seq, int begin, int end) {
  RowsSnapshot s;
  const KvLayout& lay = pool.layout();
  for (int t = begin; t < end; ++t) {
    s.positions.push_back(pool.positions(seq)[size_t(t)]);
    for (int l = 0; l < lay.n_layers; ++l)
      for (int c = 0; c < int(lay.channels.size()); ++c) {
        const size_t at = s.rows.size();
        s.rows.resize(at + size_t(lay.channels[size_t(c)].width));
        pool.read_row(seq, l, c, t, s.rows.data() + at);
      }
  }
  return s;
}

int64_t kv_bytes_per_token(const KvPool& pool) {
  return int64_t(pool.layout().floats_per_token() * kv_elem_bytes(pool.dtype()));
}

int32_t argmax_id(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string question_words(const minivl::Question& q) {
  std::string s = q.text();
  const size_t arrow = s.rfind(" -> ");
  return arrow == std::string::npos ? s : s.substr(0, arrow);
}

std::string word_of(int32_t id) {
  const auto& w = minivl::words();
  return id >= 0 && size_t(id) < w.size() ? w[size_t(id)] : fmt::format("<{}>", id);
}

json ops_json(const DemoOps& o) {
  return json{{"frames_encoded", o.frames_encoded},
              {"canonicals_formed", o.canonicals_formed},
              {"patches_formed", o.patches_formed},
              {"patches_applied", o.patches_applied},
              {"chunks_admitted", o.chunks_admitted},
              {"chunks_evicted", o.chunks_evicted},
              {"chunks_recalled", o.chunks_recalled},
              {"chunks_relocated", o.chunks_relocated},
              {"tokens_relocated", o.tokens_relocated},
              {"kv_bytes_written", o.kv_bytes_written},
              {"patch_bytes", o.patch_bytes},
              {"forwards", o.forwards},
              {"tokens_forwarded", o.tokens_forwarded},
              {"cow_pages", o.cow_pages},
              {"vision_ms", o.vision_ms},
              {"cache_ms", o.cache_ms}};
}

json summary_json(const DemoTypeSummary& s) {
  auto share = [&](int k) { return s.count ? double(k) / s.count : 0.0; };
  return json{{"count", s.count},
              {"kamera_accuracy", share(s.kamera_correct)},
              {"reprefill_accuracy", share(s.reprefill_correct)},
              {"agreement", share(s.agree)},
              {"kamera_correct", s.kamera_correct},
              {"reprefill_correct", s.reprefill_correct},
              {"agree", s.agree},
              {"fallbacks", s.fallbacks},
              {"mean_kl", s.mean_kl},
              {"kamera_ttft_ms", s.kamera_ms},
              {"reprefill_ttft_ms", s.reprefill_ms},
              {"speedup", s.kamera_ms > 0 ? s.reprefill_ms / s.kamera_ms : 0.0}};
}

// Picture constants (see agent_demo.h).
constexpr int kMargin = 8, kColGap = 4, kRowPitch = 14, kRowHeight = 10, kBarGap = 16,
              kBarWidth = 320;

int png_scale(int n_frames) {
  return n_frames <= 32 ? 2 : 1;
}

Status write_demo_png(const std::string& path, const minivl::Clip& stream,
                      const AgentDemoResult& r) {
  const int n = int(stream.frames.size());
  const int s = png_scale(n), cell = minivl::kFramePixels * s, pitch = cell + kColGap;
  const auto [width, height] = agent_demo_png_size(n);
  minivl::Canvas c(width, height, {255, 255, 255});
  for (int i = 0; i < n; ++i)
    c.draw_frame(stream.frames[size_t(i)], kMargin + i * pitch, kMargin, s);
  const minivl::Rgb outside{232, 232, 232}, inside{150, 150, 150}, admitted{60, 190, 80},
      recalled{240, 210, 30}, dropped{250, 190, 150}, red{220, 50, 50}, blue{50, 90, 230};
  double max_ms = 0;
  for (const auto& st : r.steps)
    if (st.question) max_ms = std::max({max_ms, st.question->kamera_ms, st.question->reprefill_ms});
  const int x0 = kMargin + n * pitch - kColGap + kBarGap;
  const int y0 = kMargin + cell + 8;
  for (const auto& st : r.steps) {
    const int y = y0 + st.step * kRowPitch;
    for (int i = 0; i < n; ++i) {
      minivl::Rgb col = outside;
      if (i >= st.window_first && i <= st.window_last) col = inside;
      if (i == st.fork_dropped) col = dropped;
      if (i == st.step) col = admitted;
      if (i == st.recalled) col = recalled;
      c.fill(kMargin + i * pitch, y, cell, kRowHeight, col);
    }
    if (st.question && max_ms > 0) {
      auto bar = [&](double ms) { return std::max(1, int(ms / max_ms * kBarWidth + 0.5)); };
      c.fill(x0, y, bar(st.question->reprefill_ms), 5, red);
      c.fill(x0, y + 5, bar(st.question->kamera_ms), 5, blue);
    }
  }
  return minivl::write_png(path, c);
}

}  // namespace

const char* demo_question_type_name(DemoQuestionType t) {
  switch (t) {
    case DemoQuestionType::SingleHop:
      return "single-hop";
    case DemoQuestionType::CrossFrame:
      return "cross-frame";
    case DemoQuestionType::Recall:
      return "recall";
  }
  return "?";
}

DemoOps& DemoOps::operator+=(const DemoOps& o) {
  frames_encoded += o.frames_encoded;
  canonicals_formed += o.canonicals_formed;
  patches_formed += o.patches_formed;
  patches_applied += o.patches_applied;
  chunks_admitted += o.chunks_admitted;
  chunks_evicted += o.chunks_evicted;
  chunks_recalled += o.chunks_recalled;
  chunks_relocated += o.chunks_relocated;
  tokens_relocated += o.tokens_relocated;
  kv_bytes_written += o.kv_bytes_written;
  patch_bytes += o.patch_bytes;
  forwards += o.forwards;
  tokens_forwarded += o.tokens_forwarded;
  cow_pages += o.cow_pages;
  vision_ms += o.vision_ms;
  cache_ms += o.cache_ms;
  return *this;
}

std::string demo_frame_file(int i) {
  return fmt::format("frame-{:04d}.png", i);
}

std::pair<int, int> agent_demo_png_size(int n_frames) {
  const int cell = minivl::kFramePixels * png_scale(n_frames), pitch = cell + kColGap;
  const int x0 = kMargin + n_frames * pitch - kColGap + kBarGap;
  return {x0 + kBarWidth + kMargin, kMargin + cell + 8 + n_frames * kRowPitch + kMargin};
}

ContextOptions agent_demo_context(const AgentDemoOptions& o, int n_threads) {
  ContextOptions co;
  co.n_threads = n_threads;
  co.kv_tokens = 16 * (8 * (int64_t(o.window) + 4) + 64);  // chunks start pages of their own
  co.anchor = {minivl::bos_id()};
  return co;
}

namespace {

Status validate(const minivl::MiniVl& m, const Context& ctx, const AgentDemoOptions& o) {
  if (o.window < 2 || o.window > minivl::kMaxFrames)
    return make_error(ErrorCode::InvalidArgument,
                      "demo: the window must hold 2 to {} frames (frame words f0..f{}), not {}",
                      minivl::kMaxFrames, minivl::kMaxFrames - 1, o.window);
  if (o.n_frames < o.window || o.n_frames > minivl::kMaxStreamFrames)
    return make_error(ErrorCode::InvalidArgument,
                      "demo: the stream needs {} to {} frames (at least the window), not {}",
                      o.window, minivl::kMaxStreamFrames, o.n_frames);
  if (o.rank != kFullRank && o.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "demo: patch rank {} must be >= 1 (or full)",
                      o.rank);
  if (o.reps < 1 || o.reps > 100)
    return make_error(ErrorCode::InvalidArgument, "demo: reps {} must be in [1, 100]", o.reps);
  if (o.recall_every < 0)
    return make_error(ErrorCode::InvalidArgument, "demo: recall_every must be >= 0");
  if (!o.png_path.empty() && o.n_frames > kAgentDemoPngMaxFrames)
    return make_error(ErrorCode::InvalidArgument,
                      "demo: the picture is drawn for streams of up to {} frames, not {}",
                      kAgentDemoPngMaxFrames, o.n_frames);
  if (!m.decoder) return make_error(ErrorCode::InvalidArgument, "demo: no decoder loaded");
  if (&ctx.model() != m.decoder.get())
    return make_error(ErrorCode::InvalidArgument, "demo: the context runs another model");
  return Status::Ok();
}

// Store misses between two snapshots: what an operation had to form (one forward each).
void count_formed(const ChunkStore::Stats& s0, const ChunkStore::Stats& s1, DemoOps& ops,
                  int* formed_canon, int* formed_patch) {
  *formed_canon = int(s1.canonical_misses - s0.canonical_misses);
  *formed_patch = int(s1.patch_misses - s0.patch_misses);
  ops.canonicals_formed += *formed_canon;
  ops.patches_formed += *formed_patch;
  ops.forwards += *formed_canon + *formed_patch;
}

// Byte-for-byte equality of two snapshots' rows.
bool same_rows(const RowsSnapshot& a, const RowsSnapshot& b) {
  return a.rows.size() == b.rows.size() &&
         std::memcmp(a.rows.data(), b.rows.data(), a.rows.size() * sizeof(float)) == 0;
}

// One run of the demo over a stream: the window, the vision cache and the per-step records.
class AgentDemo {
 public:
  AgentDemo(const minivl::MiniVl& m, Context& ctx, const AgentDemoOptions& o)
      : m_(m), ctx_(ctx), o_(o), model_(*m.decoder), pool_(ctx.pool()), enc_(m.vision) {
    row_bytes_ = kv_bytes_per_token(pool_);
    page_bytes_ = row_bytes_ * pool_.page_tokens();
  }

  Result<AgentDemoResult> run();

 private:
  Status start(AgentDemoResult& r);
  Status arrive(DemoStep& st, AgentDemoResult& r);
  Status slide(DemoStep& st);
  Status admit(DemoStep& st);
  std::vector<int> recallable() const;
  Result<std::unique_ptr<Window>> recall_fork(int e, DemoStep& st);
  Status pick_recall_question(int e, minivl::Question& q, DemoQuestion& dq);
  Status pick_window_question(int t, const std::vector<int>& view, minivl::Question& q,
                              DemoQuestion& dq);
  Status answer(Window& w, const std::vector<int>& view, const minivl::Question& q,
                DemoQuestion& dq);
  Status question_turn(int t, DemoStep& st);
  Result<std::vector<float>> reprefill(const std::vector<int>& frames,
                                       const std::vector<int32_t>& q);

  const minivl::MiniVl& m_;
  Context& ctx_;
  const AgentDemoOptions& o_;
  const Model& model_;
  KvPool& pool_;
  VisionEncoder enc_;
  int64_t row_bytes_ = 0, page_bytes_ = 0;
  minivl::Clip stream_;
  std::unique_ptr<DemoRng> rng_;
  std::unique_ptr<Window> win_;
  std::vector<ChunkContent> chunks_;  // the vision cache: one chunk per stream frame
  int window_first_ = 0;              // stream index of the window's slot 0
  int question_index_ = 0, nonrecall_index_ = 0;
};

// Re-prefill: one forward over [<bos>, frames, question] in a fresh sequence.
Result<std::vector<float>> AgentDemo::reprefill(const std::vector<int>& frames,
                                                const std::vector<int32_t>& q) {
  const int d = model_.cfg.dim;
  std::vector<float> rows;  // (n, dim)
  std::vector<Pos> pos;
  auto token_row = [&](int32_t id, int32_t p) {
    rows.resize(rows.size() + size_t(d));
    model_.tok_embd.rows_f32(id, 1, rows.data() + rows.size() - size_t(d));
    pos.push_back(Pos::linear(p));
  };
  token_row(minivl::bos_id(), 0);
  int32_t p = 1;
  for (int f : frames) {
    const ChunkContent& c = chunks_[size_t(f)];
    rows.insert(rows.end(), c.embeddings.begin(), c.embeddings.end());
    const auto fp = c.positions_at(p);
    pos.insert(pos.end(), fp.begin(), fp.end());
    p += c.extent();
  }
  for (int32_t t : q) token_row(t, p++);
  ScopedSequence seq(pool_);
  ForwardInput in;
  in.embeddings = rows.data();
  in.n = int(pos.size());
  in.positions = pos;
  ForwardOptions fo;
  fo.logits = LogitsMode::Last;
  return ctx_.engine().forward(pool_, seq.id(), in, fo);
}

Status AgentDemo::start(AgentDemoResult& r) {
  r.options = o_;
  r.decoder_path = model_.source;
  r.threads = ctx_.engine().threads().size();
  minivl::ClipSpec spec;
  spec.n_frames = o_.n_frames;
  stream_ = minivl::make_stream(minivl::Split::Test, o_.clip, spec);
  r.events = stream_.events;
  rng_ = std::make_unique<DemoRng>(stream_.seed ^ 0xA6E47D3E0ull);
  r.tokens_per_frame = m_.vision.cfg.n_tokens();
  r.rank_is_full = o_.rank == kFullRank || o_.rank >= r.tokens_per_frame;
  r.rank_used = r.rank_is_full ? r.tokens_per_frame : o_.rank;
  WindowPolicy pol;
  pol.rank = r.rank_is_full ? kFullRank : o_.rank;  // the window does not cap ranks itself
  pol.form_on_miss = true;
  KAMERA_ASSIGN_OR_RETURN(win_, Window::create(ctx_, pol));
  return Status::Ok();
}

// The frame arrives: encoded once, its rows kept (the vision cache).
Status AgentDemo::arrive(DemoStep& st, AgentDemoResult& r) {
  const double a = now_ms();
  auto cc = frame_chunk(enc_, stream_.frames[size_t(st.step)].rgb);
  if (!cc.ok()) return cc.error();
  st.ops.vision_ms = now_ms() - a;
  st.ops.frames_encoded = 1;
  chunks_.push_back(std::move(*cc));
  if (r.frame_extent == 0) r.frame_extent = chunks_.back().extent();
  return Status::Ok();
}

// Slide: evict the head; the survivors only move (checked: same rows, positions shifted).
Status AgentDemo::slide(DemoStep& st) {
  Window& win = *win_;
  const int W = o_.window;
  const int first = win.token_index(1), end = win.token_index(W);
  const RowsSnapshot before = snapshot(std::as_const(pool_), win.sequence(), first, end);
  const auto placed = slot_positions(win);
  const int32_t shift = win.slots()[0].extent();
  const double a = now_ms();
  KAMERA_TRY(win.evict_front());
  st.ops.cache_ms += now_ms() - a;
  ++st.ops.chunks_evicted;
  count_relocations(placed, win, 1, st.ops);
  st.evicted = window_first_++;
  const RowsSnapshot after =
      snapshot(std::as_const(pool_), win.sequence(), win.token_index(0), win.token_index(W - 1));
  st.relocation_checked = true;
  st.relocation_exact =
      same_rows(before, after) && before.positions.size() == after.positions.size();
  for (size_t i = 0; st.relocation_exact && i < before.positions.size(); ++i)
    st.relocation_exact = after.positions[i] == before.positions[i].shifted(-shift);
  return Status::Ok();
}

// Admission at the back, with its patch formed on the window it joins.
Status AgentDemo::admit(DemoStep& st) {
  Window& win = *win_;
  DemoOps& ops = st.ops;
  const ChunkStore::Stats s0 = ctx_.store().stats();
  const int64_t cow0 = pool_.stats().cow_copies;
  const auto placed = slot_positions(win);
  const double a = now_ms();
  KAMERA_TRY(win.admit_back(chunks_.back()));
  ops.cache_ms += now_ms() - a;
  const WindowSlot& slot = win.slots().back();
  ++ops.chunks_admitted;
  count_relocations(placed, win, 0, ops);
  int formed_canon = 0, formed_patch = 0;
  count_formed(s0, ctx_.store().stats(), ops, &formed_canon, &formed_patch);
  ops.tokens_forwarded += int64_t(formed_canon) * slot.n_tokens();
  if (formed_patch > 0) {
    // The conditioned forward runs every chunk of the window (the anchor is copied).
    ops.tokens_forwarded +=
        int64_t(formed_patch) * (win.token_index(int(win.slots().size())) - win.token_index(0));
    if (slot.patch) ops.patch_bytes += int64_t(slot.patch->bytes());
  }
  ops.patches_applied += slot.patch != nullptr;
  ops.kv_bytes_written += int64_t(slot.n_tokens()) * row_bytes_;
  ops.cow_pages += pool_.stats().cow_copies - cow0;
  ops.kv_bytes_written += (pool_.stats().cow_copies - cow0) * page_bytes_;
  return win.check_invariants();
}

// On a recall turn: the frames evicted earlier whose content is not on the fork already (a stream
// may show the same picture twice: the same chunk).
std::vector<int> AgentDemo::recallable() const {
  std::vector<int> out;
  if (o_.recall_every <= 0 || (question_index_ + 1) % o_.recall_every != 0) return out;
  for (int e = 0; e < window_first_; ++e) {
    const ChunkId id = ctx_.cache().id_of(chunks_[size_t(e)]);
    bool on_fork = false;
    for (int i = 1; i < o_.window; ++i) on_fork = on_fork || win_->slots()[size_t(i)].id == id;
    if (!on_fork) out.push_back(e);
  }
  return out;
}
// A fork of the window that drops its head and recalls evicted frame e at the front with a fresh
// patch. The fork's survivors (window slots 1..W-1) move twice and back: their rows must be the
// window's own pages, byte for byte.
Result<std::unique_ptr<Window>> AgentDemo::recall_fork(int e, DemoStep& st) {
  Window& win = *win_;
  const int W = o_.window;
  DemoOps& ops = st.ops;
  st.recalled = e;
  st.fork_dropped = window_first_;
  const ChunkStore::Stats s0 = ctx_.store().stats();
  const int64_t cow0 = pool_.stats().cow_copies;
  double a = now_ms();
  KAMERA_ASSIGN_OR_RETURN(std::unique_ptr<Window> fork, win.fork());
  double op_ms = now_ms() - a;
  auto placed = slot_positions(*fork);
  a = now_ms();
  KAMERA_TRY(fork->evict_front());
  op_ms += now_ms() - a;
  ++ops.chunks_evicted;
  count_relocations(placed, *fork, 1, ops);
  placed = slot_positions(*fork);
  a = now_ms();
  KAMERA_TRY(fork->recall(ctx_.cache().id_of(chunks_[size_t(e)]), 0, RecallMode::Fresh));
  op_ms += now_ms() - a;
  ops.cache_ms += op_ms;
  ++ops.chunks_recalled;
  count_relocations(placed, *fork, -1, ops);
  int formed_canon = 0, formed_patch = 0;
  count_formed(s0, ctx_.store().stats(), ops, &formed_canon, &formed_patch);
  ops.patches_applied += fork->slots().front().patch != nullptr;
  ops.kv_bytes_written += int64_t(fork->slots().front().n_tokens()) * row_bytes_;
  ops.cow_pages += pool_.stats().cow_copies - cow0;
  ops.kv_bytes_written += (pool_.stats().cow_copies - cow0) * page_bytes_;
  st.fork_forwards = formed_canon + formed_patch;
  KAMERA_TRY(fork->check_invariants());
  const RowsSnapshot w_rows =
      snapshot(std::as_const(pool_), win.sequence(), win.token_index(1), win.token_index(W));
  const RowsSnapshot f_rows =
      snapshot(std::as_const(pool_), fork->sequence(), fork->token_index(1), fork->token_index(W));
  st.relocation_checked = true;
  st.relocation_exact = st.relocation_exact && same_rows(w_rows, f_rows);
  return fork;
}

// A single-hop question about the recalled frame e, which sits at f0 of the fork.
Status AgentDemo::pick_recall_question(int e, minivl::Question& q, DemoQuestion& dq) {
  std::vector<minivl::Question> cands;
  for (auto& c : minivl::all_questions({stream_.frames[size_t(e)]}))
    if (c.family == minivl::Family::SingleHop) cands.push_back(std::move(c));
  if (cands.empty())
    return make_error(ErrorCode::InvalidArgument, "demo: frame {} offers no single-hop question",
                      e);
  q = std::move(cands[size_t(rng_->below(int(cands.size())))]);
  dq.type = DemoQuestionType::Recall;
  dq.stream_frames = {e};
  return Status::Ok();
}

// A question about the window's frames: single-hop and cross-frame turns alternate (a single-hop
// fallback when the window offers no cross-frame question).
Status AgentDemo::pick_window_question(int t, const std::vector<int>& view, minivl::Question& q,
                                       DemoQuestion& dq) {
  std::vector<minivl::Frame> frames;
  for (int i : view) frames.push_back(stream_.frames[size_t(i)]);
  const auto all = minivl::all_questions(frames);
  const bool want_cross = nonrecall_index_++ % 2 == 1;
  std::vector<const minivl::Question*> cands;
  for (const auto& c : all)
    if ((c.family == minivl::Family::CrossFrame) == want_cross) cands.push_back(&c);
  if (cands.empty() && want_cross) {
    dq.fallback = true;
    for (const auto& c : all)
      if (c.family == minivl::Family::SingleHop) cands.push_back(&c);
  }
  if (cands.empty())
    return make_error(ErrorCode::InvalidArgument, "demo: the window at step {} offers no question",
                      t);
  q = *cands[size_t(rng_->below(int(cands.size())))];
  dq.type = q.family == minivl::Family::CrossFrame ? DemoQuestionType::CrossFrame
                                                   : DemoQuestionType::SingleHop;
  for (int f : q.frames) dq.stream_frames.push_back(view[size_t(f)]);
  return Status::Ok();
}

// The two arms (kamera's window, re-prefill), alternating which runs first; each timed reps times
// (median). Run -1 is an untimed warm-up of both arms (caches, scratch growth); its logits answer.
Status AgentDemo::answer(Window& w, const std::vector<int>& view, const minivl::Question& q,
                         DemoQuestion& dq) {
  dq.kind = q.kind;
  dq.text = question_words(q);
  dq.tokens = q.tokens;
  dq.gold = q.answer;
  const ChunkContent qc = minivl::text_chunk(q.tokens);
  std::vector<double> k_ms, r_ms;
  std::vector<float> k_logits, r_logits;
  for (int rep = -1; rep < o_.reps; ++rep) {
    for (int arm = 0; arm < 2; ++arm) {
      const bool kamera_arm = (arm == 0) == ((question_index_ + rep + 1) % 2 == 0);
      const double a = now_ms();
      auto l = kamera_arm ? w.query(qc, LogitsMode::Last) : reprefill(view, q.tokens);
      const double ms = now_ms() - a;
      if (!l.ok()) return l.error();
      if (rep < 0)
        (kamera_arm ? k_logits : r_logits) = std::move(*l);
      else
        (kamera_arm ? k_ms : r_ms).push_back(ms);
    }
  }
  dq.kamera_ms = median(k_ms);
  dq.reprefill_ms = median(r_ms);
  dq.kamera = argmax_id(k_logits);
  dq.reprefill = argmax_id(r_logits);
  dq.kl = kl_from_logits(r_logits, k_logits);
  return Status::Ok();
}

// A full window asks a question: on a recall turn about an evicted frame recalled on a fork,
// otherwise about the window's frames.
Status AgentDemo::question_turn(int t, DemoStep& st) {
  const std::vector<int> candidates = recallable();
  std::unique_ptr<Window> fork;
  std::vector<int> view;  // stream frames as the model sees them
  minivl::Question q;
  DemoQuestion dq;
  if (!candidates.empty()) {
    const int e = candidates[size_t(rng_->below(int(candidates.size())))];
    KAMERA_ASSIGN_OR_RETURN(fork, recall_fork(e, st));
    view.push_back(e);
    for (int i = window_first_ + 1; i <= t; ++i) view.push_back(i);
    KAMERA_TRY(pick_recall_question(e, q, dq));
  } else {
    for (int i = window_first_; i <= t; ++i) view.push_back(i);
    KAMERA_TRY(pick_window_question(t, view, q, dq));
  }
  dq.frames = view;
  KAMERA_TRY(answer(fork ? *fork : *win_, view, q, dq));
  st.question = std::move(dq);
  ++question_index_;
  return Status::Ok();  // the fork (if any) is dropped here
}

// Totals, per-type summaries and speedups over the steps.
void summarize(AgentDemoResult& r) {
  std::vector<double> ratios;
  double k_sum = 0, r_sum = 0;
  for (const auto& st : r.steps) {
    r.totals += st.ops;
    if (st.relocation_checked && !st.relocation_exact) r.relocation_exact = false;
    if (!st.question) continue;
    const DemoQuestion& q = *st.question;
    for (DemoTypeSummary* s : {&r.by_type[size_t(q.type)], &r.all}) {
      ++s->count;
      s->kamera_correct += q.kamera == q.gold;
      s->reprefill_correct += q.reprefill == q.gold;
      s->agree += q.kamera == q.reprefill;
      s->fallbacks += q.fallback;
      s->mean_kl += q.kl;
      s->kamera_ms += q.kamera_ms;
      s->reprefill_ms += q.reprefill_ms;
    }
    k_sum += q.kamera_ms;
    r_sum += q.reprefill_ms;
    if (q.kamera_ms > 0) ratios.push_back(q.reprefill_ms / q.kamera_ms);
  }
  for (DemoTypeSummary* s : {&r.by_type[0], &r.by_type[1], &r.by_type[2], &r.all})
    if (s->count) {
      s->mean_kl /= s->count;
      s->kamera_ms /= s->count;
      s->reprefill_ms /= s->count;
    }
  r.speedup = k_sum > 0 ? r_sum / k_sum : 0;
  r.median_speedup = ratios.empty() ? 0 : median(ratios);
}

// Every stream frame as its own PNG (o.frames_dir).
Status write_stream_frames(const minivl::Clip& stream, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::Io, "demo: cannot create {}: {}", dir, ec.message());
  for (size_t i = 0; i < stream.frames.size(); ++i)
    KAMERA_TRY(
        minivl::write_frames_png(dir + "/" + demo_frame_file(int(i)), {stream.frames[i]}, 1));
  return Status::Ok();
}

Result<AgentDemoResult> AgentDemo::run() {
  AgentDemoResult r;
  KAMERA_TRY(start(r));
  if (!o_.frames_dir.empty()) KAMERA_TRY(write_stream_frames(stream_, o_.frames_dir));
  for (int t = 0; t < o_.n_frames; ++t) {
    DemoStep st;
    st.step = t;
    KAMERA_TRY(arrive(st, r));
    if (int(win_->slots().size()) == o_.window) KAMERA_TRY(slide(st));
    KAMERA_TRY(admit(st));
    st.window_first = window_first_;
    st.window_last = t;
    if (int(win_->slots().size()) == o_.window) KAMERA_TRY(question_turn(t, st));
    r.steps.push_back(std::move(st));
  }
  summarize(r);
  if (!o_.png_path.empty()) {
    KAMERA_TRY(write_demo_png(o_.png_path, stream_, r));
    r.png_written = o_.png_path;
    std::tie(r.png_width, r.png_height) = agent_demo_png_size(o_.n_frames);
  }
  return r;
}

}  // namespace

Result<AgentDemoResult> run_agent_demo(const minivl::MiniVl& m, Context& ctx,
                                       const AgentDemoOptions& o) {
  const double t_start = now_ms();
  KAMERA_TRY(validate(m, ctx, o));
  AgentDemo demo(m, ctx, o);
  KAMERA_ASSIGN_OR_RETURN(AgentDemoResult r, demo.run());
  r.wall_s = (now_ms() - t_start) / 1e3;
  return r;
}

json agent_demo_json(const AgentDemoResult& r) {
  json steps = json::array();
  for (const auto& st : r.steps) {
    json j{{"step", st.step},
           {"frame", st.step},
           {"window", {st.window_first, st.window_last}},
           {"evicted", st.evicted >= 0 ? json(st.evicted) : json(nullptr)},
           {"ops", ops_json(st.ops)}};
    if (st.relocation_checked) j["relocation_exact"] = st.relocation_exact;
    if (st.recalled >= 0)
      j["recall"] = {{"frame", st.recalled},
                     {"fork_dropped", st.fork_dropped},
                     {"fork_forwards", st.fork_forwards}};
    if (st.question) {
      const DemoQuestion& q = *st.question;
      j["question"] = {{"type", demo_question_type_name(q.type)},
                       {"kind", q.kind},
                       {"text", q.text},
                       {"tokens", q.tokens},
                       {"stream_frames", q.stream_frames},
                       {"frames", q.frames},
                       {"fallback", q.fallback},
                       {"gold", word_of(q.gold)},
                       {"kamera", word_of(q.kamera)},
                       {"reprefill", word_of(q.reprefill)},
                       {"kamera_correct", q.kamera == q.gold},
                       {"reprefill_correct", q.reprefill == q.gold},
                       {"agree", q.kamera == q.reprefill},
                       {"kl", q.kl},
                       {"kamera_ttft_ms", q.kamera_ms},
                       {"reprefill_ttft_ms", q.reprefill_ms},
                       {"speedup", q.kamera_ms > 0 ? q.reprefill_ms / q.kamera_ms : 0.0}};
    }
    steps.push_back(std::move(j));
  }
  json by_type = json::object();
  for (int i = 0; i < 3; ++i)
    by_type[demo_question_type_name(DemoQuestionType(i))] = summary_json(r.by_type[size_t(i)]);
  const AgentDemoOptions& o = r.options;
  return json{{"config",
               {{"frames", o.n_frames},
                {"window", o.window},
                {"clip", o.clip},
                {"split", "test"},
                {"rank_requested", o.rank == kFullRank ? json("full") : json(o.rank)},
                {"rank_used", r.rank_used},
                {"rank_is_full", r.rank_is_full},
                {"tokens_per_frame", r.tokens_per_frame},
                {"frame_extent", r.frame_extent},
                {"recall_every", o.recall_every},
                {"reps", o.reps},
                {"threads", r.threads},
                {"decoder", r.decoder_path},
                {"vision", r.vision_path},
                {"frames_dir", o.frames_dir.empty() ? json(nullptr) : json(o.frames_dir)}}},
              {"events", r.events},
              {"steps", std::move(steps)},
              {"summary",
               {{"by_type", std::move(by_type)},
                {"all", summary_json(r.all)},
                {"kamera_ttft_ms", r.all.kamera_ms},
                {"reprefill_ttft_ms", r.all.reprefill_ms},
                {"speedup", r.speedup},
                {"median_speedup", r.median_speedup},
                {"relocation_exact", r.relocation_exact},
                {"totals", ops_json(r.totals)},
                {"wall_s", r.wall_s}}},
              {"png", r.png_written.empty() ? json(nullptr)
                                            : json{{"path", r.png_written},
                                                   {"width", r.png_width},
                                                   {"height", r.png_height}}}};
}

}  // namespace kamera
