#include "minivl/clips.h"

#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <utility>

namespace kamera::minivl {

namespace {

constexpr int kNumColours = 6;
constexpr int kNumShapes = 4;
constexpr int kNumPairs = kNumColours * kNumShapes;
constexpr int kNumCells = kGrid * kGrid;

constexpr uint8_t kColourRgb[kNumColours][3] = {
    {230, 40, 40},   // red
    {40, 200, 60},   // green
    {50, 90, 240},   // blue
    {230, 220, 40},  // yellow
    {220, 50, 220},  // magenta
    {40, 210, 220},  // cyan
};

const std::vector<std::string>& question_words() {
  static const std::vector<std::string> w = {"colour", "shape",    "of",   "in",   "frame",
                                             "after",  "appeared", "took", "cell", "left",
                                             "by",     "what",     "?"};
  return w;
}

std::vector<std::string> build_words() {
  std::vector<std::string> w = {"<pad>", "<bos>", "<eos>"};
  for (const auto& q : question_words()) w.push_back(q);
  for (int f = 0; f < kMaxFrames; ++f) w.push_back(fmt::format("f{}", f));
  for (const auto& c : colour_names()) w.push_back(c);
  for (const auto& s : shape_names()) w.push_back(s);
  KAMERA_ASSERT(int(w.size()) <= kVocabSize);
  return w;
}

int32_t wid(std::string_view w) {
  const int32_t id = word_id(w);
  KAMERA_ASSERT(id >= 0);
  return id;
}
int32_t frame_word(int f) {
  return wid(fmt::format("f{}", f));
}
int32_t colour_word(int c) {
  return wid(colour_names()[size_t(c)]);
}
int32_t shape_word(int s) {
  return wid(shape_names()[size_t(s)]);
}

// splitmix64: a bijection on 64-bit words with good mixing; also the generator's PRNG step.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A small local PRNG whose output is fixed by this file alone (no implementation-defined
// distributions), so a clip is the same on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    s_ += 0x9E3779B97F4A7C15ull;
    uint64_t x = s_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  int below(int n) {  // uniform-ish in [0, n); n > 0
    KAMERA_ASSERT(n > 0);
    return int(next() % uint64_t(n));
  }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[size_t(below(int(v.size())))];
  }

 private:
  uint64_t s_;
};

int pair_of(const Object& o) {
  return o.colour * kNumShapes + o.shape;
}
int cell_of(const Object& o) {
  return o.row * kGrid + o.col;
}

std::string cell_text(int cell) {
  return fmt::format("r{} c{}", cell / kGrid, cell % kGrid);
}
std::string object_text(const Object& o) {
  return colour_names()[size_t(o.colour)] + " " + shape_names()[size_t(o.shape)];
}

const Object* find_cell(const std::vector<Object>& objs, int cell) {
  for (const auto& o : objs)
    if (cell_of(o) == cell) return &o;
  return nullptr;
}

// Shape masks inside an 8 x 8 cell (1-pixel margin: everything lies in [1, 6] x [1, 6]).
bool shape_covers(int shape, int x, int y) {
  if (x < 1 || x > 6 || y < 1 || y > 6) return false;
  switch (shape) {
    case 0:  // square: filled 6 x 6
      return true;
    case 1: {  // circle: disc centred at (3.5, 3.5), radius^2 = 8 (24 pixels)
      const int dx2 = 2 * x - 7, dy2 = 2 * y - 7;  // twice the offsets from the centre
      return dx2 * dx2 + dy2 * dy2 <= 32;
    }
    case 2: {                        // triangle, apex up: row widths 2 2 4 4 6 6
      const int half = (y + 1) / 2;  // 1 1 2 2 3 3 for y = 1 .. 6
      return x >= 4 - half && x <= 3 + half;
    }
    case 3:  // cross: plus sign with 2-pixel-thick arms
      return (x >= 3 && x <= 4) || (y >= 3 && y <= 4);
    default:
      return false;
  }
}

void render(Frame& f) {
  f.rgb.assign(size_t(kFramePixels) * kFramePixels * 3, 0);
  for (const auto& o : f.objects) {
    for (int y = 0; y < kCellPixels; ++y) {
      for (int x = 0; x < kCellPixels; ++x) {
        if (!shape_covers(o.shape, x, y)) continue;
        const int px = o.col * kCellPixels + x, py = o.row * kCellPixels + y;
        uint8_t* p = &f.rgb[(size_t(py) * kFramePixels + size_t(px)) * 3];
        for (int k = 0; k < 3; ++k) p[k] = kColourRgb[o.colour][k];
      }
    }
  }
}

enum class EventKind { Appear, Vanish, Move };
struct Event {
  EventKind kind = EventKind::Move;
  Object obj;          // the object after the event (Vanish: as it was)
  int from_cell = -1;  // Move / Vanish: the cell it left
};

struct Timeline {
  std::vector<std::vector<Object>> frames;
  std::vector<Event> events;  // events[t - 1] turns frame t - 1 into frame t
};

// One candidate timeline from its own sub-stream. Cells are drawn with a bias towards cells
// vacated in the last two transitions, so "took cell" questions arise often.
Timeline simulate(Rng& rng, const ClipSpec& spec) {
  Timeline tl;
  bool used[kNumPairs] = {};
  std::vector<Object> cur;
  std::vector<int> vacated_at(kNumCells, -100);  // transition index that last vacated a cell

  auto empty_cells = [&] {
    std::vector<int> e;
    for (int c = 0; c < kNumCells; ++c)
      if (!find_cell(cur, c)) e.push_back(c);
    return e;
  };
  auto unused_pairs = [&] {
    std::vector<int> p;
    for (int i = 0; i < kNumPairs; ++i)
      if (!used[i]) p.push_back(i);
    return p;
  };
  auto choose_cell = [&](int t) {
    const std::vector<int> e = empty_cells();
    std::vector<int> recent;
    for (int c : e)
      if (t - vacated_at[size_t(c)] <= 2) recent.push_back(c);
    if (!recent.empty() && rng.below(2) == 0) return rng.pick(recent);
    return rng.pick(e);
  };
  auto new_object = [&](int pair, int cell) {
    used[pair] = true;
    Object o;
    o.colour = pair / kNumShapes;
    o.shape = pair % kNumShapes;
    o.row = cell / kGrid;
    o.col = cell % kGrid;
    return o;
  };

  const int n0 = spec.min_objects + rng.below(spec.max_objects - spec.min_objects + 1);
  for (int i = 0; i < n0; ++i) {
    const int pair = rng.pick(unused_pairs());
    cur.push_back(new_object(pair, rng.pick(empty_cells())));
  }
  tl.frames.push_back(cur);

  for (int t = 1; t < spec.n_frames; ++t) {
    const int count = int(cur.size());
    const bool has_empty = count < kNumCells;
    std::vector<EventKind> allowed;
    if (count < spec.max_objects && has_empty && !unused_pairs().empty())
      allowed.push_back(EventKind::Appear);
    if (count > spec.min_objects) allowed.push_back(EventKind::Vanish);
    if (count >= 1 && has_empty) allowed.push_back(EventKind::Move);
    KAMERA_ASSERT(!allowed.empty());
    Event ev;
    ev.kind = rng.pick(allowed);
    switch (ev.kind) {
      case EventKind::Appear: {
        const int pair = rng.pick(unused_pairs());
        ev.obj = new_object(pair, choose_cell(t));
        cur.push_back(ev.obj);
        break;
      }
      case EventKind::Vanish: {
        const size_t i = size_t(rng.below(count));
        ev.obj = cur[i];
        ev.from_cell = cell_of(cur[i]);
        vacated_at[size_t(ev.from_cell)] = t;
        cur.erase(cur.begin() + std::ptrdiff_t(i));
        break;
      }
      case EventKind::Move: {
        const size_t i = size_t(rng.below(count));
        ev.from_cell = cell_of(cur[i]);
        const int to = choose_cell(t);
        vacated_at[size_t(ev.from_cell)] = t;
        cur[i].row = to / kGrid;
        cur[i].col = to % kGrid;
        ev.obj = cur[i];
        break;
      }
    }
    tl.events.push_back(ev);
    tl.frames.push_back(cur);
  }
  return tl;
}

struct Candidate {
  std::vector<int32_t> tokens;
  int32_t answer = 0;
  std::vector<int> frames;
};

// Every valid question of each kind, in a fixed order.
struct Candidates {
  std::vector<Candidate> colour_of, shape_of, appeared_after, took_cell;
  std::vector<Candidate> shape_in_cell, colour_in_cell;  // the two-frame family
};

const Object* find_pair(const std::vector<Object>& objs, int pair) {
  for (const auto& o : objs)
    if (pair_of(o) == pair) return &o;
  return nullptr;
}

// What changed from frame t - 1 to frame t, by (colour, shape) pair. A generated clip has exactly
// one change per transition; any other frame sequence (e.g. clips joined end to end) may have
// several or none.
struct Transition {
  int added = 0, removed = 0, moved = 0;
  Object appeared;  // the added object when added == 1
  int changes() const { return added + removed + moved; }
  bool single_appearance() const { return added == 1 && changes() == 1; }
};

Transition transition(const std::vector<Object>& before, const std::vector<Object>& after) {
  Transition tr;
  for (const auto& o : after) {
    const Object* p = find_pair(before, pair_of(o));
    if (!p) {
      ++tr.added;
      tr.appeared = o;
    } else if (cell_of(*p) != cell_of(o)) {
      ++tr.moved;
    }
  }
  for (const auto& o : before)
    if (!find_pair(after, pair_of(o))) ++tr.removed;
  return tr;
}

// Two-frame lookups: X sits in cell c in frame a; in frame b (before or after a) another object Y
// sits in c. "shape in frame f_b in cell of X in frame f_a ?" -> Y's shape (and the colour
// variant). The question names both frames; neither alone answers it (X is not in c in f_b).
void add_two_frame(const std::vector<std::vector<Object>>& frames, Candidates& out) {
  const int n = std::min(int(frames.size()), kMaxFrames);
  for (int a = 0; a < n; ++a) {
    for (const Object& x : frames[size_t(a)]) {
      for (int b = 0; b < n; ++b) {
        const Object* y = b == a ? nullptr : find_cell(frames[size_t(b)], cell_of(x));
        if (!y || pair_of(*y) == pair_of(x)) continue;
        auto tokens = [&](const char* what) {
          return std::vector<int32_t>{wid(what),
                                      wid("in"),
                                      wid("frame"),
                                      frame_word(b),
                                      wid("in"),
                                      wid("cell"),
                                      wid("of"),
                                      colour_word(x.colour),
                                      shape_word(x.shape),
                                      wid("in"),
                                      wid("frame"),
                                      frame_word(a),
                                      wid("?")};
        };
        const std::vector<int> fr = {std::min(a, b), std::max(a, b)};
        out.shape_in_cell.push_back({tokens("shape"), shape_word(y->shape), fr});
        out.colour_in_cell.push_back({tokens("colour"), colour_word(y->colour), fr});
      }
    }
  }
}

// The candidates of any frame sequence, from the frames' objects alone (so a window of a longer
// stream gets questions about what it shows). Single-hop questions name frames by index, so only
// the first kMaxFrames frames get them. On a generated clip this is exactly the event-based
// derivation (one event per transition).
Candidates enumerate(const std::vector<std::vector<Object>>& frames) {
  Candidates out;
  const int n = int(frames.size());
  for (int k = 0; k < std::min(n, kMaxFrames); ++k) {
    const auto& objs = frames[size_t(k)];
    for (int s = 0; s < kNumShapes; ++s) {
      const Object* hit = nullptr;
      int hits = 0;
      for (const auto& o : objs)
        if (o.shape == s) hit = &o, ++hits;
      if (hits == 1)
        out.colour_of.push_back({{wid("colour"), wid("of"), shape_word(s), wid("in"), wid("frame"),
                                  frame_word(k), wid("?")},
                                 colour_word(hit->colour),
                                 {k}});
    }
    for (int c = 0; c < kNumColours; ++c) {
      const Object* hit = nullptr;
      int hits = 0;
      for (const auto& o : objs)
        if (o.colour == c) hit = &o, ++hits;
      if (hits == 1)
        out.shape_of.push_back({{wid("shape"), wid("of"), colour_word(c), wid("in"), wid("frame"),
                                 frame_word(k), wid("?")},
                                shape_word(hit->shape),
                                {k}});
    }
  }
  std::vector<Transition> trans(size_t(std::max(n, 1)));  // trans[t]: frame t - 1 -> frame t
  for (int t = 1; t < n; ++t)
    trans[size_t(t)] = transition(frames[size_t(t - 1)], frames[size_t(t)]);
  // Frames holding a pair form one unbroken run that starts after frame 0 (the pair appears once).
  auto appears_once_at = [&](int pair, int f) {
    for (int t = 0; t < n; ++t) {
      const bool here = find_pair(frames[size_t(t)], pair) != nullptr;
      if (t < f && here) return false;
      if (t > f && here && !find_pair(frames[size_t(t - 1)], pair)) return false;
    }
    return true;
  };
  // appeared_after: X is the single change into frame f, and the change into frame f + 1 is a
  // single appearance too; X appears nowhere else.
  for (int f = 1; f + 1 < n; ++f) {
    const Transition& a = trans[size_t(f)];
    const Transition& b = trans[size_t(f + 1)];
    if (!a.single_appearance() || !b.single_appearance()) continue;
    if (!appears_once_at(pair_of(a.appeared), f)) continue;
    out.appeared_after.push_back(
        {{wid("colour"), wid("of"), wid("shape"), wid("appeared"), wid("after"),
          colour_word(a.appeared.colour), shape_word(a.appeared.shape), wid("?")},
         colour_word(b.appeared.colour),
         {f - 1, f, f + 1}});
  }
  // took_cell: X leaves a cell exactly once in the sequence (moving away or vanishing), and the
  // cell is occupied again within two frames by another object.
  for (int pair = 0; pair < kNumPairs; ++pair) {
    int departures = 0, f = -1, cell = -1;
    for (int t = 1; t < n; ++t) {
      const Object* before = find_pair(frames[size_t(t - 1)], pair);
      const Object* after = find_pair(frames[size_t(t)], pair);
      if (before && (!after || cell_of(*after) != cell_of(*before)))
        ++departures, f = t, cell = cell_of(*before);
    }
    if (departures != 1) continue;
    for (int g = f; g < n && g <= f + 2; ++g) {
      const Object* occ = find_cell(frames[size_t(g)], cell);
      if (!occ) continue;
      if (pair_of(*occ) != pair) {
        std::vector<int> fr = {f - 1, f};
        if (g != f) fr.push_back(g);
        out.took_cell.push_back(
            {{wid("shape"), wid("took"), wid("cell"), wid("left"), wid("by"),
              colour_word(pair / kNumShapes), shape_word(pair % kNumShapes), wid("?")},
             shape_word(occ->shape),
             std::move(fr)});
      }
      break;
    }
  }
  add_two_frame(frames, out);
  return out;
}

std::string event_text(int t, const Event& e) {
  std::string s = fmt::format("f{}: {}", t, object_text(e.obj));
  switch (e.kind) {
    case EventKind::Appear:
      return s + " appears at " + cell_text(cell_of(e.obj));
    case EventKind::Vanish:
      return s + " vanishes from " + cell_text(e.from_cell);
    case EventKind::Move:
      return s + " moves " + cell_text(e.from_cell) + " -> " + cell_text(cell_of(e.obj));
  }
  return s;
}

void add_questions(std::vector<Question>& out, Rng& rng, uint64_t index, Family family,
                   int per_family, const char* kind_a, std::vector<Candidate> a, const char* kind_b,
                   std::vector<Candidate> b) {
  for (int j = 0; j < per_family; ++j) {
    // Kinds in rotation (by clip index and slot), falling back to the other kind when the
    // preferred one has no unused candidate left.
    const bool prefer_a = (index + uint64_t(j)) % 2 == 0;
    std::vector<Candidate>* pools[2] = {prefer_a ? &a : &b, prefer_a ? &b : &a};
    const char* kinds[2] = {prefer_a ? kind_a : kind_b, prefer_a ? kind_b : kind_a};
    for (int p = 0; p < 2; ++p) {
      auto& pool = *pools[p];
      if (pool.empty()) continue;
      const size_t i = size_t(rng.below(int(pool.size())));
      Question q;
      q.family = family;
      q.kind = kinds[p];
      q.tokens = std::move(pool[i].tokens);
      q.answer = pool[i].answer;
      q.frames = std::move(pool[i].frames);
      pool.erase(pool.begin() + std::ptrdiff_t(i));
      out.push_back(std::move(q));
      break;
    }
  }
}

}  // namespace

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> s = {"square", "circle", "triangle", "cross"};
  return s;
}

const std::vector<std::string>& colour_names() {
  static const std::vector<std::string> c = {"red", "green", "blue", "yellow", "magenta", "cyan"};
  return c;
}

const std::vector<std::string>& words() {
  static const std::vector<std::string> w = build_words();
  return w;
}

int32_t word_id(std::string_view w) {
  const auto& ws = words();
  for (size_t i = 0; i < ws.size(); ++i)
    if (ws[i] == w) return int32_t(i);
  return -1;
}

const char* family_name(Family f) {
  switch (f) {
    case Family::SingleHop:
      return "single_hop";
    case Family::CrossFrame:
      return "cross_frame";
    case Family::TwoFrame:
      return "two_frame";
  }
  return "?";
}

int32_t bos_id() {
  return 1;
}

std::string Question::text() const {
  std::string s;
  for (int32_t t : tokens) {
    if (!s.empty()) s += ' ';
    s += (t >= 0 && size_t(t) < words().size()) ? words()[size_t(t)] : std::string("<?>");
  }
  s += " -> ";
  s += (answer >= 0 && size_t(answer) < words().size()) ? words()[size_t(answer)] : "<?>";
  return s;
}

uint64_t clip_seed(Split split, uint64_t index) {
  // 2 * index + split is injective (index < 2^63) and splitmix64 is a bijection, so the two
  // splits never share a seed.
  return mix64((index << 1 | uint64_t(split == Split::Test)) ^ 0x6B616D6572612D76ull);
}

namespace {

std::vector<std::vector<Object>> objects_of(const std::vector<Frame>& frames) {
  std::vector<std::vector<Object>> out;
  out.reserve(frames.size());
  for (const auto& f : frames) out.push_back(f.objects);
  return out;
}

std::vector<Question> derive_questions(Candidates c, uint64_t rng_seed, uint64_t rotation,
                                       int per_family, bool two_frame) {
  std::vector<Question> out;
  Rng rng(rng_seed);
  add_questions(out, rng, rotation, Family::SingleHop, per_family, "colour_of",
                std::move(c.colour_of), "shape_of", std::move(c.shape_of));
  add_questions(out, rng, rotation, Family::CrossFrame, per_family, "appeared_after",
                std::move(c.appeared_after), "took_cell", std::move(c.took_cell));
  if (two_frame)  // last, so the first two families draw exactly as without it
    add_questions(out, rng, rotation, Family::TwoFrame, per_family, "shape_in_cell",
                  std::move(c.shape_in_cell), "colour_in_cell", std::move(c.colour_in_cell));
  return out;
}

uint64_t question_seed(uint64_t seed) {
  return mix64(seed ^ 0x51A5D0C4E11ull);
}

}  // namespace

Clip make_stream(Split split, uint64_t index, const ClipSpec& spec) {
  KAMERA_ASSERT(spec.n_frames >= 1 && spec.n_frames <= kMaxStreamFrames);
  KAMERA_ASSERT(spec.min_objects >= 1 && spec.min_objects <= spec.max_objects);
  KAMERA_ASSERT(spec.max_objects < kNumCells && spec.max_objects <= kNumPairs);
  KAMERA_ASSERT(spec.questions_per_family >= 0);

  Clip clip;
  clip.seed = clip_seed(split, index);

  // Rejection sampling over sub-streams of the seed: the first timeline that offers both
  // cross-frame kinds (and, with spec.two_frame, a two-frame lookup) wins; if none does within the
  // budget, the one offering the most kinds.
  constexpr int kAttempts = 256;
  const int full_score = spec.two_frame ? 3 : 2;
  Timeline best;
  Candidates best_cands;
  int best_score = -1;
  for (int attempt = 0; attempt < kAttempts && best_score < full_score; ++attempt) {
    Rng rng(mix64(clip.seed ^ mix64(uint64_t(attempt) + 0x7A11ull)));
    Timeline tl = simulate(rng, spec);
    Candidates c = enumerate(tl.frames);
    const int score = int(!c.appeared_after.empty()) + int(!c.took_cell.empty()) +
                      int(spec.two_frame && !c.shape_in_cell.empty());
    if (score > best_score) best_score = score, best = std::move(tl), best_cands = std::move(c);
  }

  for (size_t t = 0; t < best.frames.size(); ++t) {
    Frame f;
    f.objects = best.frames[t];
    render(f);
    clip.frames.push_back(std::move(f));
  }
  for (size_t t = 1; t < best.frames.size(); ++t)
    clip.events.push_back(event_text(int(t), best.events[t - 1]));

  if (spec.n_frames <= kMaxFrames)
    clip.questions = derive_questions(std::move(best_cands), question_seed(clip.seed), index,
                                      spec.questions_per_family, spec.two_frame);
  return clip;
}

Clip make_clip(Split split, uint64_t index, const ClipSpec& spec) {
  KAMERA_ASSERT(spec.n_frames >= 1 && spec.n_frames <= kMaxFrames);
  return make_stream(split, index, spec);
}

std::vector<Question> all_questions(const std::vector<Frame>& frames) {
  Candidates c = enumerate(objects_of(frames));
  std::vector<Question> out;
  auto add = [&](Family family, const char* kind, std::vector<Candidate>& v) {
    for (auto& cand : v) {
      Question q;
      q.family = family;
      q.kind = kind;
      q.tokens = std::move(cand.tokens);
      q.answer = cand.answer;
      q.frames = std::move(cand.frames);
      out.push_back(std::move(q));
    }
  };
  add(Family::SingleHop, "colour_of", c.colour_of);
  add(Family::SingleHop, "shape_of", c.shape_of);
  add(Family::CrossFrame, "appeared_after", c.appeared_after);
  add(Family::CrossFrame, "took_cell", c.took_cell);
  return out;
}

std::vector<Question> make_questions(const std::vector<Frame>& frames, uint64_t seed,
                                     int per_family) {
  KAMERA_ASSERT(per_family >= 0);
  return derive_questions(enumerate(objects_of(frames)), question_seed(seed), seed, per_family,
                          false);
}

namespace {

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* out = static_cast<std::string*>(png_get_error_ptr(png));
  if (out) *out = msg ? msg : "unknown libpng error";
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

// Writes an RGB image with libpng; false (and *err set) on error. The error text lives in the
// caller's frame and nothing with a destructor is created after setjmp, so libpng's longjmp
// skips no destructor and reads no clobbered local.
bool write_png_rows(FILE* fp, png_uint_32 width, png_uint_32 height, png_bytepp rows,
                    std::string* err) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, err, png_error_fn, png_warning_fn);
  if (!png) return *err = "cannot create the libpng write struct", false;
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return *err = "cannot create the libpng info struct", false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (err->empty()) *err = "libpng error";
    return false;
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

Canvas::Canvas(int w, int h, Rgb background) : width(w), height(h) {
  KAMERA_ASSERT(w >= 0 && h >= 0);
  rgb.resize(size_t(w) * size_t(h) * 3);
  for (size_t p = 0; p < rgb.size(); p += 3)
    std::copy(background.begin(), background.end(), &rgb[p]);
}

void Canvas::fill(int x, int y, int w, int h, Rgb colour) {
  const int x0 = std::max(x, 0), y0 = std::max(y, 0);
  const int x1 = std::min(x + w, width), y1 = std::min(y + h, height);
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx)
      std::copy(colour.begin(), colour.end(), &rgb[(size_t(yy) * size_t(width) + size_t(xx)) * 3]);
}

void Canvas::draw_frame(const Frame& f, int x, int y, int scale) {
  if (f.rgb.size() != size_t(kFramePixels) * kFramePixels * 3 || scale < 1) return;
  for (int sy = 0; sy < kFramePixels * scale; ++sy) {
    const int yy = y + sy;
    if (yy < 0 || yy >= height) continue;
    for (int sx = 0; sx < kFramePixels * scale; ++sx) {
      const int xx = x + sx;
      if (xx < 0 || xx >= width) continue;
      const uint8_t* p = &f.rgb[(size_t(sy / scale) * kFramePixels + size_t(sx / scale)) * 3];
      std::copy(p, p + 3, &rgb[(size_t(yy) * size_t(width) + size_t(xx)) * 3]);
    }
  }
}

Status write_png(const std::string& path, const Canvas& canvas) {
  if (canvas.width < 1 || canvas.height < 1)
    return make_error(ErrorCode::InvalidArgument, "{}: empty image ({} x {})", path, canvas.width,
                      canvas.height);
  if (canvas.rgb.size() != size_t(canvas.width) * size_t(canvas.height) * 3)
    return make_error(ErrorCode::InvalidArgument, "{}: canvas holds {} bytes, expected {} x {} x 3",
                      path, canvas.rgb.size(), canvas.width, canvas.height);
  std::vector<png_bytep> rows(size_t(canvas.height));
  for (size_t y = 0; y < rows.size(); ++y)
    rows[y] = const_cast<png_bytep>(&canvas.rgb[y * size_t(canvas.width) * 3]);

  const std::string tmp = path + ".tmp";
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) return make_error(ErrorCode::Io, "{}: cannot open {} for writing", path, tmp);
  std::string err;
  if (!write_png_rows(fp, png_uint_32(canvas.width), png_uint_32(canvas.height), rows.data(),
                      &err) &&
      err.empty())
    err = "libpng error";
  if (std::fflush(fp) != 0 && err.empty()) err = "write failed";
  if (std::fclose(fp) != 0 && err.empty()) err = "close failed";
  if (err.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
    err = "cannot rename " + tmp + " into place";
  if (!err.empty()) {
    std::remove(tmp.c_str());
    return make_error(ErrorCode::InvalidArgument, "{}: {}", path, err);
  }
  return Status::Ok();
}

Status write_frames_png(const std::string& path, const std::vector<Frame>& frames, int scale) {
  if (frames.empty()) return make_error(ErrorCode::InvalidArgument, "{}: no frames to write", path);
  if (scale < 1 || scale > 64)
    return make_error(ErrorCode::InvalidArgument, "{}: bad scale {}", path, scale);
  for (const auto& f : frames)
    if (f.rgb.size() != size_t(kFramePixels) * kFramePixels * 3)
      return make_error(ErrorCode::InvalidArgument, "{}: a frame has {} bytes, expected {}", path,
                        f.rgb.size(), kFramePixels * kFramePixels * 3);

  // Frames side by side with a 1-pixel grey gap (in source pixels), all scaled.
  const int n = int(frames.size());
  Canvas c((n * (kFramePixels + 1) - 1) * scale, kFramePixels * scale, {128, 128, 128});
  for (int i = 0; i < n; ++i)
    c.draw_frame(frames[size_t(i)], i * (kFramePixels + 1) * scale, 0, scale);
  return write_png(path, c);
}

}  // namespace kamera::minivl
