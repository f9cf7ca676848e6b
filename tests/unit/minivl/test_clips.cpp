#include <gtest/gtest.h>
#include <png.h>

#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "minivl/clips.h"
#include "support/temp_path.h"

using namespace kamera;
using namespace kamera::minivl;

namespace {

uint64_t fnv1a(const Clip& c) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& f : c.frames)
    for (uint8_t b : f.rgb) h = (h ^ b) * 1099511628211ull;
  return h;
}

std::string word(int32_t id) {
  return words().at(size_t(id));
}

int colour_index(const std::string& w) {
  const auto& c = colour_names();
  auto it = std::find(c.begin(), c.end(), w);
  return it == c.end() ? -1 : int(it - c.begin());
}
int shape_index(const std::string& w) {
  const auto& s = shape_names();
  auto it = std::find(s.begin(), s.end(), w);
  return it == s.end() ? -1 : int(it - s.begin());
}

// The RGB of each colour, written out here rather than read from the generator.
std::array<uint8_t, 3> rgb_of(int colour) {
  static const std::array<uint8_t, 3> c[6] = {{230, 40, 40},  {40, 200, 60},  {50, 90, 240},
                                              {230, 220, 40}, {220, 50, 220}, {40, 210, 220}};
  return c[colour];
}

const Object* with_pair(const Frame& f, int colour, int shape) {
  for (const auto& o : f.objects)
    if (o.colour == colour && o.shape == shape) return &o;
  return nullptr;
}
const Object* at_cell(const Frame& f, int row, int col) {
  for (const auto& o : f.objects)
    if (o.row == row && o.col == col) return &o;
  return nullptr;
}

// Re-derives a question's answer and frames from the objects lists alone, by the question's
// words. Returns an empty string when the question checks out, else what is wrong.
std::string check_question(const Clip& clip, const Question& q) {
  const int n = int(clip.frames.size());
  for (int32_t t : q.tokens)
    if (t < 0 || size_t(t) >= words().size() || t >= kVocabSize) return "token out of range";
  if (q.answer < 3 || size_t(q.answer) >= words().size()) return "answer out of range";
  std::vector<std::string> w;
  for (int32_t t : q.tokens) w.push_back(word(t));
  const std::string ans = word(q.answer);
  if (!std::is_sorted(q.frames.begin(), q.frames.end()) ||
      std::adjacent_find(q.frames.begin(), q.frames.end()) != q.frames.end())
    return "frames not ascending and unique";

  if (q.kind == "colour_of" || q.kind == "shape_of") {
    const bool by_shape = q.kind == "colour_of";
    if (q.family != Family::SingleHop || w.size() != 7) return "bad single-hop form";
    if (w[0] != (by_shape ? "colour" : "shape") || w[1] != "of" || w[3] != "in" ||
        w[4] != "frame" || w[6] != "?")
      return "bad single-hop words";
    if (w[5].size() < 2 || w[5][0] != 'f') return "no frame word";
    const int k = std::stoi(w[5].substr(1));
    if (k < 0 || k >= n) return "frame out of range";
    const int key = by_shape ? shape_index(w[2]) : colour_index(w[2]);
    if (key < 0) return "bad key word";
    std::vector<const Object*> hits;
    for (const auto& o : clip.frames[size_t(k)].objects)
      if ((by_shape ? o.shape : o.colour) == key) hits.push_back(&o);
    if (hits.size() != 1) return "key not unique in frame";
    const std::string want =
        by_shape ? colour_names()[size_t(hits[0]->colour)] : shape_names()[size_t(hits[0]->shape)];
    if (ans != want) return "wrong answer " + ans + ", want " + want;
    if (q.frames != std::vector<int>{k}) return "wrong frames";
    return {};
  }

  if (q.family != Family::CrossFrame || w.size() != 8 || w[7] != "?") return "bad cross form";
  const int xc = colour_index(w[5]), xs = shape_index(w[6]);
  if (xc < 0 || xs < 0) return "bad object words";
  std::vector<int> present;  // frames holding X
  for (int t = 0; t < n; ++t)
    if (with_pair(clip.frames[size_t(t)], xc, xs)) present.push_back(t);

  if (q.kind == "appeared_after") {
    if (w[0] != "colour" || w[1] != "of" || w[2] != "shape" || w[3] != "appeared" ||
        w[4] != "after")
      return "bad appeared_after words";
    if (present.empty() || present.front() == 0) return "X never appears after frame 0";
    if (present.back() - present.front() + 1 != int(present.size())) return "X reappears";
    const int f = present.front();
    if (f + 1 >= n) return "no frame after the appearance";
    // The objects new in frame f + 1 (by (colour, shape)); nothing may leave.
    std::vector<const Object*> added;
    for (const auto& o : clip.frames[size_t(f + 1)].objects)
      if (!with_pair(clip.frames[size_t(f)], o.colour, o.shape)) added.push_back(&o);
    if (added.size() != 1) return "no single appearance after X";
    if (clip.frames[size_t(f + 1)].objects.size() != clip.frames[size_t(f)].objects.size() + 1)
      return "the next event is not an appearance";
    if (ans != colour_names()[size_t(added[0]->colour)]) return "wrong answer " + ans;
    if (q.frames != std::vector<int>{f - 1, f, f + 1}) return "wrong frames";
    return {};
  }

  if (q.kind == "took_cell") {
    if (w[0] != "shape" || w[1] != "took" || w[2] != "cell" || w[3] != "left" || w[4] != "by")
      return "bad took_cell words";
    // Every transition where X leaves the cell it sat in.
    std::vector<std::pair<int, std::pair<int, int>>> leaves;  // (f, cell)
    for (int t = 1; t < n; ++t) {
      const Object* before = with_pair(clip.frames[size_t(t - 1)], xc, xs);
      const Object* after = with_pair(clip.frames[size_t(t)], xc, xs);
      if (before && (!after || after->row != before->row || after->col != before->col))
        leaves.push_back({t, {before->row, before->col}});
    }
    if (leaves.size() != 1) return "X does not leave exactly one cell";
    const int f = leaves[0].first;
    const auto [r, c] = leaves[0].second;
    int g = -1;
    for (int t = f; t < n && g < 0; ++t)
      if (at_cell(clip.frames[size_t(t)], r, c)) g = t;
    if (g < 0 || g > f + 2) return "cell not re-occupied within two frames";
    const Object* occ = at_cell(clip.frames[size_t(g)], r, c);
    if (occ->colour == xc && occ->shape == xs) return "X took its own cell back";
    if (ans != shape_names()[size_t(occ->shape)]) return "wrong answer " + ans;
    if (q.frames != std::vector<int>{f - 1, f, g}) return "wrong frames";
    return {};
  }
  return "unknown kind " + q.kind;
}

}  // namespace

TEST(Clips, Vocabulary) {
  const auto& w = words();
  ASSERT_LE(int(w.size()), kVocabSize);
  EXPECT_EQ(w[0], "<pad>");
  EXPECT_EQ(w[1], "<bos>");
  EXPECT_EQ(w[2], "<eos>");
  EXPECT_EQ(bos_id(), word_id("<bos>"));
  EXPECT_EQ(word_id("nope"), -1);
  EXPECT_EQ(std::set<std::string>(w.begin(), w.end()).size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(word_id(w[i]), int32_t(i));
  for (int f = 0; f < 16; ++f) EXPECT_GE(word_id(fmt::format("f{}", f)), 0);
  EXPECT_EQ(colour_names().size(), 6u);
  EXPECT_EQ(shape_names().size(), 4u);
  for (const auto& c : colour_names()) EXPECT_GE(word_id(c), 0) << c;
  for (const auto& s : shape_names()) EXPECT_GE(word_id(s), 0) << s;
}

TEST(Clips, Deterministic) {
  for (uint64_t i : {0ull, 7ull, 123ull}) {
    for (Split s : {Split::Train, Split::Test}) {
      const Clip a = make_clip(s, i), b = make_clip(s, i);
      EXPECT_EQ(a.seed, b.seed);
      ASSERT_EQ(a.frames.size(), b.frames.size());
      for (size_t t = 0; t < a.frames.size(); ++t) {
        EXPECT_EQ(a.frames[t].rgb, b.frames[t].rgb);
        ASSERT_EQ(a.frames[t].objects.size(), b.frames[t].objects.size());
        for (size_t k = 0; k < a.frames[t].objects.size(); ++k) {
          const Object &x = a.frames[t].objects[k], &y = b.frames[t].objects[k];
          EXPECT_TRUE(x.shape == y.shape && x.colour == y.colour && x.row == y.row &&
                      x.col == y.col);
        }
      }
      ASSERT_EQ(a.questions.size(), b.questions.size());
      for (size_t k = 0; k < a.questions.size(); ++k)
        EXPECT_EQ(a.questions[k].text(), b.questions[k].text());
      EXPECT_EQ(a.events, b.events);
    }
  }
  // The same index in the two splits gives different clips, and no clip is shared by the first
  // 200 of each split.
  std::set<uint64_t> train;
  int same_index_equal = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    const Clip tr = make_clip(Split::Train, i), te = make_clip(Split::Test, i);
    EXPECT_NE(tr.seed, te.seed);
    same_index_equal += fnv1a(tr) == fnv1a(te);
    train.insert(fnv1a(tr));
  }
  EXPECT_EQ(same_index_equal, 0);
  EXPECT_GT(train.size(), 190u);  // the train clips themselves are (nearly all) distinct
  int shared = 0;
  for (uint64_t i = 0; i < 200; ++i) shared += train.count(fnv1a(make_clip(Split::Test, i))) > 0;
  EXPECT_EQ(shared, 0);
}

TEST(Clips, QuestionsCheckIndependently) {
  int checked = 0;
  for (Split s : {Split::Train, Split::Test}) {
    for (uint64_t i = 0; i < 300; ++i) {
      const Clip c = make_clip(s, i);
      ASSERT_EQ(int(c.frames.size()), ClipSpec{}.n_frames);
      std::set<std::vector<int32_t>> seen;
      for (const auto& q : c.questions) {
        EXPECT_EQ(check_question(c, q), "") << "clip " << i << ": " << q.text();
        EXPECT_TRUE(seen.insert(q.tokens).second) << "duplicate question " << q.text();
        const std::string t = q.text();
        EXPECT_NE(t.find(" -> " + word(q.answer)), std::string::npos) << t;
        ++checked;
      }
      EXPECT_LE(int(c.questions.size()), 2 * ClipSpec{}.questions_per_family);
    }
  }
  EXPECT_GE(checked, 600 * 4 * 9 / 10);
}

TEST(Clips, FramePixels) {
  std::map<int, std::vector<uint8_t>> masks;  // shape -> 8 x 8 mask of its colour's pixels
  for (uint64_t i = 0; i < 50; ++i) {
    const Clip c = make_clip(Split::Train, i);
    for (const auto& f : c.frames) {
      ASSERT_EQ(f.rgb.size(), size_t(kFramePixels * kFramePixels * 3));
      for (int r = 0; r < kGrid; ++r) {
        for (int col = 0; col < kGrid; ++col) {
          const Object* o = at_cell(f, r, col);
          std::vector<uint8_t> mask(kCellPixels * kCellPixels, 0);
          int own = 0, black = 0;
          for (int y = 0; y < kCellPixels; ++y) {
            for (int x = 0; x < kCellPixels; ++x) {
              const size_t p =
                  (size_t(r * kCellPixels + y) * kFramePixels + size_t(col * kCellPixels + x)) * 3;
              const bool is_black = !f.rgb[p] && !f.rgb[p + 1] && !f.rgb[p + 2];
              black += is_black;
              if (o) {
                const auto want = rgb_of(o->colour);
                const bool is_own =
                    f.rgb[p] == want[0] && f.rgb[p + 1] == want[1] && f.rgb[p + 2] == want[2];
                own += is_own;
                mask[size_t(y * kCellPixels + x)] = is_own;
                EXPECT_TRUE(is_own || is_black) << "stray colour";
                if (x == 0 || y == 0 || x == kCellPixels - 1 || y == kCellPixels - 1) {
                  EXPECT_TRUE(is_black) << "margin not black";
                }
              }
            }
          }
          if (!o) {
            EXPECT_EQ(black, kCellPixels * kCellPixels) << "empty cell not black, clip " << i;
            continue;
          }
          EXPECT_GE(own, 12) << "clip " << i;
          auto [it, inserted] = masks.emplace(o->shape, mask);
          if (!inserted) {
            EXPECT_EQ(it->second, mask) << "shape " << o->shape << " not constant";
          }
        }
      }
    }
  }
  ASSERT_EQ(masks.size(), 4u);
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) EXPECT_NE(masks[a], masks[b]) << a << " vs " << b;
}

TEST(Clips, OneEventPerTransition) {
  const ClipSpec spec;
  for (Split s : {Split::Train, Split::Test}) {
    for (uint64_t i = 0; i < 200; ++i) {
      const Clip c = make_clip(s, i);
      ASSERT_EQ(c.events.size(), c.frames.size() - 1);
      std::set<std::pair<int, int>> gone;
      for (size_t t = 0; t < c.frames.size(); ++t) {
        const auto& objs = c.frames[t].objects;
        EXPECT_GE(int(objs.size()), spec.min_objects);
        EXPECT_LE(int(objs.size()), spec.max_objects);
        std::set<std::pair<int, int>> cells, pairs;
        for (const auto& o : objs) {
          EXPECT_TRUE(cells.insert({o.row, o.col}).second) << "two objects in one cell";
          EXPECT_TRUE(pairs.insert({o.colour, o.shape}).second) << "pair twice in a frame";
          EXPECT_EQ(gone.count({o.colour, o.shape}), 0u) << "pair reused, clip " << i;
        }
        if (t > 0) {
          const Frame& prev = c.frames[t - 1];
          int added = 0, removed = 0, moved = 0;
          for (const auto& o : objs) {
            const Object* p = with_pair(prev, o.colour, o.shape);
            if (!p)
              ++added;
            else if (p->row != o.row || p->col != o.col)
              ++moved;
          }
          for (const auto& p : prev.objects)
            if (!with_pair(c.frames[t], p.colour, p.shape)) {
              ++removed;
              gone.insert({p.colour, p.shape});
            }
          EXPECT_EQ(added + removed + moved, 1) << "clip " << i << " frame " << t;
          EXPECT_LE(std::abs(int(objs.size()) - int(prev.objects.size())), 1);
          EXPECT_EQ(c.events[t - 1].rfind(fmt::format("f{}: ", t), 0), 0u);
        }
      }
    }
  }
}

TEST(Clips, QuestionMix) {
  std::map<std::string, int> kinds;
  std::map<std::string, std::map<int32_t, int>> answers;
  int total = 0, both = 0;
  const int n = 400;
  for (uint64_t i = 0; i < n; ++i) {
    const Clip c = make_clip(Split::Train, i);
    bool single = false, cross = false;
    for (const auto& q : c.questions) {
      ++kinds[q.kind];
      ++answers[q.kind][q.answer];
      ++total;
      (q.family == Family::SingleHop ? single : cross) = true;
    }
    both += single && cross;
  }
  ASSERT_EQ(kinds.size(), 4u);
  std::string report;
  for (const auto& [k, v] : kinds) {
    EXPECT_GE(v, total * 15 / 100) << k;
    int top = 0;
    for (const auto& [a, m] : answers[k]) top = std::max(top, m);
    EXPECT_LE(top * 100, v * 40) << k << ": one answer dominates";
    EXPECT_GE(answers[k].size(), 4u) << k;
    report += k + " " + std::to_string(100.0 * v / total).substr(0, 4) + "% ";
  }
  EXPECT_GE(both * 100, n * 90);
  std::printf("[ question mix over %d clips: %d questions; %sboth families in %d clips ]\n", n,
              total, report.c_str(), both);
}

TEST(Clips, Png) {
  const Clip c = make_clip(Split::Test, 3);
  const std::vector<Frame> frames(c.frames.begin(), c.frames.begin() + 3);
  const int scale = 3;
  const std::string path = unique_temp("kamera_clips.png");
  ASSERT_TRUE(write_frames_png(path, frames, scale).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  ASSERT_TRUE(png_image_begin_read_from_file(&img, path.c_str())) << img.message;
  img.format = PNG_FORMAT_RGB;
  EXPECT_EQ(int(img.width), (3 * (kFramePixels + 1) - 1) * scale);
  EXPECT_EQ(int(img.height), kFramePixels * scale);
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(img));
  ASSERT_TRUE(png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) << img.message;
  std::filesystem::remove(path);
  const size_t w = img.width;
  auto at = [&](size_t x, size_t y) {
    const uint8_t* p = &px[(y * w + x) * 3];
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  // A pixel inside an object of the last frame written (cell pixel (3, 3) lies in every shape).
  const Object& o = frames[2].objects.at(0);
  const size_t sx = 2 * (kFramePixels + 1) + size_t(o.col * kCellPixels + 3);
  const size_t sy = size_t(o.row * kCellPixels + 3);
  EXPECT_EQ(at(sx * scale + 1, sy * scale + 1), rgb_of(o.colour));
  // The gap between frames 0 and 1 is grey; the frame corner is black.
  EXPECT_EQ(at(kFramePixels * scale + 1, 5), (std::array<uint8_t, 3>{128, 128, 128}));
  EXPECT_EQ(at(0, 0), (std::array<uint8_t, 3>{0, 0, 0}));  // a cell margin

  // Errors name the path and leave nothing behind.
  const std::string bad = unique_temp("no_such_dir_kamera/x.png");
  const Status st = write_frames_png(bad, frames, scale);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(bad), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(bad));
  EXPECT_FALSE(write_frames_png(path, {}, scale).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

// The v1 clips (the committed mini-VL's data) are pinned: an FNV-1a hash of the frames, question
// texts, families and kinds of train and test clips 0..99, taken from the generator before the
// two-frame family was added. Adding a family must not move a single v1 clip.
TEST(Clips, V1ClipsPinned) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint8_t b) { h = (h ^ b) * 1099511628211ull; };
  for (Split s : {Split::Train, Split::Test}) {
    for (uint64_t i = 0; i < 100; ++i) {
      const Clip c = make_clip(s, i);
      for (const auto& f : c.frames)
        for (uint8_t b : f.rgb) mix(b);
      for (const auto& q : c.questions) {
        for (char ch : q.text()) mix(uint8_t(ch));
        mix(uint8_t(q.family));
        for (char ch : q.kind) mix(uint8_t(ch));
      }
    }
  }
  EXPECT_EQ(h, 0xa71a65d285fc5bcfull);
}

namespace {

// Two-frame lookups, re-derived from the objects: "shape|colour in frame f_b in cell of X in
// frame f_a ?" -> the object in X's frame-a cell in frame b, which is not X.
std::string check_two_frame(const Clip& clip, const Question& q) {
  std::vector<std::string> w;
  for (int32_t t : q.tokens) w.push_back(word(t));
  if (q.family != Family::TwoFrame || w.size() != 13) return "bad two-frame form";
  const bool shape = q.kind == "shape_in_cell";
  if (!shape && q.kind != "colour_in_cell") return "bad kind " + q.kind;
  if (w[0] != (shape ? "shape" : "colour") || w[1] != "in" || w[2] != "frame" || w[4] != "in" ||
      w[5] != "cell" || w[6] != "of" || w[9] != "in" || w[10] != "frame" || w[12] != "?")
    return "bad two-frame words";
  const int b = std::stoi(w[3].substr(1)), a = std::stoi(w[11].substr(1));
  const int n = int(clip.frames.size());
  if (a < 0 || a >= n || b < 0 || b >= n || a == b) return "bad frames";
  const Object* x = with_pair(clip.frames[size_t(a)], colour_index(w[7]), shape_index(w[8]));
  if (!x) return "X not in frame a";
  const Object* y = at_cell(clip.frames[size_t(b)], x->row, x->col);
  if (!y) return "cell empty in frame b";
  if (y->colour == x->colour && y->shape == x->shape) return "X itself in frame b";
  const std::string want =
      shape ? shape_names()[size_t(y->shape)] : colour_names()[size_t(y->colour)];
  if (word(q.answer) != want) return "wrong answer " + word(q.answer) + ", want " + want;
  if (q.frames != std::vector<int>{std::min(a, b), std::max(a, b)}) return "wrong frames";
  return {};
}

}  // namespace

TEST(Clips, TwoFrameFamily) {
  ClipSpec spec;
  spec.two_frame = true;
  std::map<std::string, int> kinds;
  std::map<int32_t, int> answers;
  int with_two = 0, n_two = 0;
  const int n = 300;
  for (uint64_t i = 0; i < n; ++i) {
    const Clip c = make_clip(Split::Train, i, spec);
    int here = 0;
    for (const auto& q : c.questions) {
      if (q.family != Family::TwoFrame) {
        EXPECT_EQ(check_question(c, q), "") << q.text();
        continue;
      }
      EXPECT_EQ(check_two_frame(c, q), "") << "clip " << i << ": " << q.text();
      ++kinds[q.kind];
      ++answers[q.answer];
      ++here;
    }
    EXPECT_LE(here, spec.questions_per_family);
    with_two += here > 0;
    n_two += here;
  }
  EXPECT_GE(with_two * 100, n * 90) << "clips with a two-frame question";
  ASSERT_EQ(kinds.size(), 2u);
  for (const auto& [k, v] : kinds) EXPECT_GE(v * 100, n_two * 30) << k;
  int top = 0;
  for (const auto& [a, m] : answers) top = std::max(top, m);
  EXPECT_LE(top * 100, n_two * 30) << "one answer dominates the two-frame family";
  // Off (the default), no clip has one.
  for (uint64_t i = 0; i < 50; ++i)
    for (const auto& q : make_clip(Split::Train, i).questions)
      EXPECT_NE(q.family, Family::TwoFrame);
}
