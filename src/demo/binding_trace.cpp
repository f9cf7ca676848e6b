#include "demo/binding_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "demo/agent_demo.h"

namespace kamera {

namespace {

using json = nlohmann::json;

// splitmix64: every draw of the trace is fixed by the stream's seed and the mode.
class TraceRng {
 public:
  explicit TraceRng(uint64_t seed) : s_(seed) {}
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

// For every stream frame seen so far: the frame it followed in the latest view that held it
// (-1: it was first).
using Predecessors = std::map<int, int>;

int predecessor(const std::vector<int>& view, int j) {
  return j == 0 ? -1 : view[size_t(j - 1)];
}

bool binds(const std::vector<int>& view, const minivl::Question& q, const Predecessors& seen) {
  for (int j : q.frames) {
    const auto it = seen.find(view[size_t(j)]);
    if (it != seen.end() && it->second != predecessor(view, j)) return true;
  }
  return false;
}

void remember(const std::vector<int>& view, Predecessors& seen) {
  for (int j = 0; j < int(view.size()); ++j) seen[view[size_t(j)]] = predecessor(view, j);
}

std::vector<minivl::Question> questions_of(const minivl::Clip& s, const std::vector<int>& view) {
  std::vector<minivl::Frame> frames;
  for (int i : view) frames.push_back(s.frames[size_t(i)]);
  return minivl::all_questions(frames);
}

// The view's questions that `accept` takes, one drawn; nullopt when none.
template <class Accept>
std::optional<minivl::Question> draw(TraceRng& rng, const std::vector<minivl::Question>& all,
                                     Accept accept) {
  std::vector<const minivl::Question*> c;
  for (const auto& q : all)
    if (accept(q)) c.push_back(&q);
  if (c.empty()) return std::nullopt;
  return *c[size_t(rng.below(int(c.size())))];
}

bool is_cross(const minivl::Question& q) {
  return q.family == minivl::Family::CrossFrame;
}

BindingQuestion make_question(std::string situation, std::vector<int> view, minivl::Question q,
                              const Predecessors& seen) {
  BindingQuestion b;
  b.situation = std::move(situation);
  b.binds = binds(view, q, seen);
  for (int j : q.frames) b.stream_frames.push_back(view[size_t(j)]);
  b.frames = std::move(view);
  b.q = std::move(q);
  return b;
}

// A stream-order view: a cross-frame question when it offers one, else single-hop.
BindingQuestion slide_question(TraceRng& rng, const minivl::Clip& s, std::vector<int> view,
                               const Predecessors& seen) {
  const auto all = questions_of(s, view);
  auto q = draw(rng, all, is_cross);
  if (!q) q = draw(rng, all, [](const minivl::Question&) { return true; });
  BindingQuestion b = make_question("slide", std::move(view), q ? *q : minivl::Question{}, seen);
  b.fallback = !q || !is_cross(*q);
  return b;
}

// One drawn re-ordering of `base`: a shuffle, a rotation, a swap of two frames or one frame moved.
std::vector<int> draw_order(TraceRng& rng, const std::vector<int>& base, int kind) {
  std::vector<int> v = base;
  const int n = int(v.size());
  if (kind == 0) {
    for (int i = n - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(rng.below(i + 1))]);
  } else if (kind == 1) {
    std::rotate(v.begin(), v.begin() + 1 + rng.below(n - 1), v.end());
  } else if (kind == 2) {
    std::swap(v[size_t(rng.below(n))], v[size_t(rng.below(n))]);
  } else {
    const int from = rng.below(n), to = rng.below(n);
    const int f = v[size_t(from)];
    v.erase(v.begin() + from);
    v.insert(v.begin() + to, f);
  }
  return v;
}

// A re-sorted view of `set` not asked before, with a binding cross-frame question if any drawn
// ordering offers one; else the first ordering with a cross-frame question; else single-hop.
BindingQuestion reorder_question(TraceRng& rng, const minivl::Clip& s, const std::vector<int>& set,
                                 const std::vector<std::vector<int>>& asked,
                                 const Predecessors& seen, int tries) {
  std::optional<BindingQuestion> cross, any;
  for (int t = 0; t < tries; ++t) {
    std::vector<int> view = draw_order(rng, set, t % 4);
    if (std::find(asked.begin(), asked.end(), view) != asked.end()) continue;
    const auto all = questions_of(s, view);
    if (auto q = draw(rng, all, [&](const auto& x) { return is_cross(x) && binds(view, x, seen); }))
      return make_question("reorder", std::move(view), std::move(*q), seen);
    if (!cross)
      if (auto q = draw(rng, all, is_cross)) cross = make_question("reorder", view, *q, seen);
    if (!any && !all.empty())
      any = make_question("reorder", view, all[size_t(rng.below(int(all.size())))], seen);
  }
  BindingQuestion b = cross ? std::move(*cross) : any ? std::move(*any) : BindingQuestion{};
  b.situation = "reorder";
  b.fallback = true;
  return b;
}

void make_reorder(TraceRng& rng, BindingTrace& t) {
  const BindingTraceOptions& o = t.options;
  Predecessors seen;
  for (int s0 = 0; s0 + o.window <= o.n_frames; s0 += o.window) {
    std::vector<int> set;
    for (int i = s0; i < s0 + o.window; ++i) set.push_back(i);
    std::vector<std::vector<int>> asked = {set};
    t.questions.push_back(slide_question(rng, t.stream, set, seen));
    remember(set, seen);
    for (int r = 0; r < o.reorders; ++r) {
      t.questions.push_back(reorder_question(rng, t.stream, set, asked, seen, o.tries));
      asked.push_back(t.questions.back().frames);
      remember(asked.back(), seen);
    }
  }
}

// The window's frames less its oldest, with evicted frame e put back at position p.
std::vector<int> recall_view(int first, int last, int e, int p) {
  std::vector<int> v;
  for (int i = first + 1; i <= last; ++i) v.push_back(i);
  v.insert(v.begin() + p, e);
  return v;
}

// A recall: an evicted frame at a drawn place, with a cross-frame question that needs it if a
// drawn placement offers one; else a single-hop question about it (at the front, as the demo).
BindingQuestion recall_question(TraceRng& rng, const minivl::Clip& s, int first, int last,
                                const Predecessors& seen, int tries) {
  const int W = last - first + 1;
  for (int t = 0; t < tries; ++t) {
    const int e = rng.below(first), p = rng.below(W);
    std::vector<int> view = recall_view(first, last, e, p);
    auto needs_e = [&](const minivl::Question& q) {
      return is_cross(q) && std::find(q.frames.begin(), q.frames.end(), p) != q.frames.end();
    };
    if (auto q = draw(rng, questions_of(s, view), needs_e)) {
      BindingQuestion b = make_question("recall", std::move(view), std::move(*q), seen);
      b.recalled = e;
      return b;
    }
  }
  const int e = rng.below(first);
  std::vector<int> view = recall_view(first, last, e, 0);
  auto about_e = [](const minivl::Question& q) { return q.frames == std::vector<int>{0}; };
  auto q = draw(rng, questions_of(s, view), about_e);
  BindingQuestion b = make_question("recall", std::move(view), q ? *q : minivl::Question{}, seen);
  b.recalled = e;
  b.fallback = true;
  return b;
}

void make_recall(TraceRng& rng, BindingTrace& t) {
  const BindingTraceOptions& o = t.options;
  Predecessors seen;
  int asked = 0;
  for (int last = o.window - 1; last < o.n_frames; ++last) {
    const int first = last - o.window + 1;
    if (first > 0 && (asked + 1) % o.recall_every == 0) {
      t.questions.push_back(recall_question(rng, t.stream, first, last, seen, o.tries));
    } else {
      std::vector<int> view;
      for (int i = first; i <= last; ++i) view.push_back(i);
      t.questions.push_back(slide_question(rng, t.stream, std::move(view), seen));
    }
    remember(t.questions.back().frames, seen);
    ++asked;
  }
}

Status validate(const BindingTraceOptions& o) {
  if (o.mode != "reorder" && o.mode != "recall")
    return make_error(ErrorCode::InvalidArgument, "--binding: '{}' is not reorder or recall",
                      o.mode);
  if (o.window < 2 || o.window > minivl::kMaxFrames)
    return make_error(ErrorCode::InvalidArgument, "--window: {} not in [2, {}]", o.window,
                      minivl::kMaxFrames);
  if (o.n_frames < o.window + 1 || o.n_frames > minivl::kMaxStreamFrames)
    return make_error(ErrorCode::InvalidArgument, "--frames: {} not in [window + 1, {}]",
                      o.n_frames, minivl::kMaxStreamFrames);
  if (o.recall_every < 1 || o.reorders < 1 || o.tries < 1)
    return make_error(ErrorCode::InvalidArgument,
                      "--binding: recall_every, reorders and tries must be >= 1");
  return Status::Ok();
}

}  // namespace

Result<BindingTrace> make_binding_trace(const BindingTraceOptions& o) {
  KAMERA_TRY(validate(o));
  BindingTrace t;
  t.options = o;
  minivl::ClipSpec spec;
  spec.n_frames = o.n_frames;
  t.stream = minivl::make_stream(minivl::Split::Test, o.clip, spec);
  TraceRng rng(t.stream.seed ^ (o.mode == "reorder" ? 0x5E0DE4ull : 0x4ECA11ull));
  if (o.mode == "reorder")
    make_reorder(rng, t);
  else
    make_recall(rng, t);
  for (const auto& b : t.questions)
    if (b.q.tokens.empty())
      return make_error(ErrorCode::InvalidArgument,
                        "--binding {}: a view of stream {} offers no question", o.mode, o.clip);
  return t;
}

Status write_binding_frames(const BindingTrace& t, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::Io, "demo: cannot create {}: {}", dir, ec.message());
  for (size_t i = 0; i < t.stream.frames.size(); ++i)
    KAMERA_TRY(
        minivl::write_frames_png(dir + "/" + demo_frame_file(int(i)), {t.stream.frames[i]}, 1));
  return Status::Ok();
}

json binding_trace_json(const BindingTrace& t) {
  const auto& w = minivl::words();
  json steps = json::array();
  for (size_t i = 0; i < t.questions.size(); ++i) {
    const BindingQuestion& b = t.questions[i];
    std::string text = b.q.text();
    text = text.substr(0, text.rfind(" -> "));
    steps.push_back({{"step", i},
                     {"question",
                      {{"type", b.situation},
                       {"kind", b.q.kind},
                       {"text", text},
                       {"tokens", b.q.tokens},
                       {"frames", b.frames},
                       {"stream_frames", b.stream_frames},
                       {"gold", w[size_t(b.q.answer)]},
                       {"binds", b.binds},
                       {"recalled", b.recalled >= 0 ? json(b.recalled) : json(nullptr)},
                       {"fallback", b.fallback}}}});
  }
  const BindingTraceOptions& o = t.options;
  return json{{"config",
               {{"binding", o.mode},
                {"frames", o.n_frames},
                {"window", o.window},
                {"clip", o.clip},
                {"split", "test"},
                {"reorders", o.reorders},
                {"recall_every", o.recall_every},
                {"tries", o.tries}}},
              {"events", t.stream.events},
              {"steps", std::move(steps)}};
}

}  // namespace kamera
