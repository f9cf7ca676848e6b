#include "demo/frames_demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/clock.h"
#include "eval/metrics.h"
#include "media/image.h"
#include "reuse/patch.h"
#include "vision/image_chunks.h"
#include "vision/vl_prompt.h"
#include "window/window.h"

namespace kamera {

namespace {

namespace fs = std::filesystem;

int32_t argmax_id(const std::vector<float>& l) {
  return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
}

// <|vision_start|> + the placed image + <|vision_end|> as one chunk of embedding rows: the
// delimiters at the positions a text run around the image takes (rope_index.h), i.e. 0 and the
// image's extent + 1.
ChunkContent delimited_image_chunk(const Model& m, int32_t vs, int32_t ve,
                                   const ChunkContent& image) {
  const int d = m.cfg.dim;
  ChunkContent c;
  c.dim = d;
  c.embeddings.resize(size_t(image.n() + 2) * size_t(d));
  m.tok_embd.rows_f32(vs, 1, c.embeddings.data());
  std::copy(image.embeddings.begin(), image.embeddings.end(), c.embeddings.begin() + d);
  m.tok_embd.rows_f32(ve, 1, c.embeddings.data() + size_t(image.n() + 1) * size_t(d));
  c.layout.push_back(Pos::linear(0));
  for (const Pos& p : image.layout) c.layout.push_back(Pos{p.t + 1, p.h + 1, p.w + 1});
  c.layout.push_back(Pos::linear(image.extent() + 1));
  return c;
}

class FramesDemo {
 public:
  FramesDemo(Context& ctx, const QwenVisionModel& tower, const FramesDemoOptions& o)
      : ctx_(ctx),
        m_(ctx.model()),
        o_(o),
        images_(tower, ctx.model().fingerprint, &ctx.engine().threads()) {}

  Status run(const std::vector<std::string>& frames, FramesDemoResult& r);

 private:
  Status step(int t, const std::string& path, FramesDemoStep& st);
  Status ask(Window& w, const std::vector<int>& view, FramesDemoQuestion& q);
  Result<std::vector<float>> reprefill(const std::vector<int>& view);
  Result<std::vector<float>> blind(const std::vector<int>& view);
  Result<std::vector<float>> after(SeqId seq, int32_t p);

  Context& ctx_;
  const Model& m_;
  const FramesDemoOptions& o_;
  ImageChunks images_;
  int32_t vs_ = -1, ve_ = -1;
  std::vector<int32_t> question_;
  std::vector<ChunkContent> chunks_;  // one per frame, in arrival order
  std::vector<ChunkId> ids_;
  std::unique_ptr<Window> win_;
  std::vector<int> view_;  // frame index of each window slot
  int questions_ = 0;
};

// The question's tokens at position p of `seq` (already holding everything before it).
Result<std::vector<float>> FramesDemo::after(SeqId seq, int32_t p) {
  std::vector<Pos> pos;
  for (size_t i = 0; i < question_.size(); ++i) pos.push_back(Pos::linear(p + int32_t(i)));
  ForwardInput in;
  in.tokens = question_;
  in.n = int(question_.size());
  in.positions = pos;
  ForwardOptions fo;
  fo.logits = LogitsMode::Last;
  return ctx_.engine().forward(ctx_.pool(), seq, in, fo);
}

// One forward over [anchor, the frames' rows, question] in a fresh sequence.
Result<std::vector<float>> FramesDemo::reprefill(const std::vector<int>& view) {
  const int d = m_.cfg.dim;
  std::vector<float> rows;
  std::vector<Pos> pos;
  int32_t p = 0;
  auto token_row = [&](int32_t id) {
    rows.resize(rows.size() + size_t(d));
    m_.tok_embd.rows_f32(id, 1, rows.data() + rows.size() - size_t(d));
    pos.push_back(Pos::linear(p++));
  };
  for (int32_t a : ctx_.cache().anchor()) token_row(a);
  for (int f : view) {
    const ChunkContent& c = chunks_[size_t(f)];
    rows.insert(rows.end(), c.embeddings.begin(), c.embeddings.end());
    const auto fp = c.positions_at(p);
    pos.insert(pos.end(), fp.begin(), fp.end());
    p += c.extent();
  }
  for (int32_t t : question_) token_row(t);
  ScopedSequence seq(ctx_.pool());
  ForwardInput in;
  in.embeddings = rows.data();
  in.n = int(pos.size());
  in.positions = pos;
  ForwardOptions fo;
  fo.logits = LogitsMode::Last;
  return ctx_.engine().forward(ctx_.pool(), seq.id(), in, fo);
}

// The same frames from their canonicals (no patch), then the question.
Result<std::vector<float>> FramesDemo::blind(const std::vector<int>& view) {
  std::vector<ChunkContent> cs;
  for (int f : view) cs.push_back(chunks_[size_t(f)]);
  ScopedSequence seq(ctx_.pool());
  ServeOptions so;
  so.policy = ServePolicy::Blind;
  if (auto rep = ctx_.cache().assemble(seq.id(), cs, so); !rep.ok()) return rep.error();
  int32_t p = ctx_.cache().anchor_extent();
  for (const auto& c : cs) p += c.extent();
  return after(seq.id(), p);
}

// The three arms; kamera and re-prefill alternate order and are timed reps times after a warm-up.
Status FramesDemo::ask(Window& w, const std::vector<int>& view, FramesDemoQuestion& q) {
  q.frames = view;
  const ChunkContent qc = ChunkContent::from_tokens(question_);
  std::vector<double> k_ms, r_ms;
  std::vector<float> k, r;
  for (int rep = -1; rep < o_.reps; ++rep)
    for (int arm = 0; arm < 2; ++arm) {
      const bool kamera_arm = (arm == 0) == ((questions_ + rep + 1) % 2 == 0);
      const double a = now_ms();
      auto l = kamera_arm ? w.query(qc, LogitsMode::Last) : reprefill(view);
      const double ms = now_ms() - a;
      if (!l.ok()) return l.error();
      if (rep < 0)
        (kamera_arm ? k : r) = std::move(*l);
      else
        (kamera_arm ? k_ms : r_ms).push_back(ms);
    }
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> b, blind(view));
  q.kamera_ms = median(k_ms);
  q.reprefill_ms = median(r_ms);
  q.kamera = argmax_id(k);
  q.reprefill = argmax_id(r);
  q.blind = argmax_id(b);
  q.kl = kl_from_logits(r, k);
  q.kl_blind = kl_from_logits(r, b);
  ++questions_;
  return Status::Ok();
}

// Frame t arrives: encode, slide, admit, and (window full) one question.
Status FramesDemo::step(int t, const std::string& path, FramesDemoStep& st) {
  st.step = t;
  st.frame = fs::path(path).filename().string();
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
  double a = now_ms();
  KAMERA_ASSIGN_OR_RETURN(auto placed, images_.image(img));
  st.encode_ms = now_ms() - a;
  chunks_.push_back(delimited_image_chunk(m_, vs_, ve_, *placed));
  ids_.push_back(chunk_id(m_.fingerprint, chunks_.back()));
  st.tokens = chunks_.back().n();
  a = now_ms();
  const auto& slots = win_->slots();
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].id == ids_.back()) {  // the same picture again: it returns at the back
      st.evicted = view_[i];
      KAMERA_TRY(win_->evict(int(i)));
      view_.erase(view_.begin() + long(i));
      break;
    }
  if (int(view_.size()) == o_.window) {
    st.evicted = view_.front();
    KAMERA_TRY(win_->evict_front());
    view_.erase(view_.begin());
  }
  KAMERA_TRY(win_->admit_back(chunks_.back()));
  view_.push_back(t);
  st.admit_ms = now_ms() - a;
  if (int(view_.size()) < o_.window) return Status::Ok();
  st.question = true;
  const int n = questions_ + 1;
  const int first = view_.front();
  if (o_.recall_every > 0 && n % o_.recall_every == 0 && first > 0) {
    // look back: a frame evicted earlier replaces the oldest one, at the front of a fork
    st.q.situation = "recall";
    st.q.recalled = (n / o_.recall_every - 1) % first;
    KAMERA_ASSIGN_OR_RETURN(auto fork, win_->fork());
    KAMERA_TRY(fork->evict_front());
    KAMERA_TRY(fork->recall(ids_[size_t(st.q.recalled)], 0, RecallMode::Fresh));
    std::vector<int> view = view_;
    view.front() = st.q.recalled;
    return ask(*fork, view, st.q);
  }
  if (o_.reorder_every > 0 && n % o_.reorder_every == 0) {
    st.q.situation = "reorder";
    std::vector<int> order(view_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(order.size() - 1 - i);
    KAMERA_ASSIGN_OR_RETURN(auto fork, win_->fork());
    KAMERA_TRY(fork->reorder(order, ReorderMode::Exact));
    return ask(*fork, std::vector<int>(view_.rbegin(), view_.rend()), st.q);
  }
  st.q.situation = "slide";
  return ask(*win_, view_, st.q);
}

void summarize(FramesDemoResult& r) {
  auto add = [](FramesDemoSummary& s, const FramesDemoQuestion& q) {
    ++s.count;
    s.flips += q.kamera != q.reprefill;
    s.blind_flips += q.blind != q.reprefill;
    s.mean_kl += q.kl;
    s.mean_kl_blind += q.kl_blind;
    s.kamera_ms += q.kamera_ms;
    s.reprefill_ms += q.reprefill_ms;
  };
  double enc = 0, adm = 0;
  for (const auto& st : r.steps) {
    enc += st.encode_ms;
    adm += st.admit_ms;
    if (!st.question) continue;
    add(r.all, st.q);
    add(st.q.situation == "recall"    ? r.recall
        : st.q.situation == "reorder" ? r.reorder
                                      : r.slide,
        st.q);
  }
  for (FramesDemoSummary* s : {&r.slide, &r.reorder, &r.recall, &r.all}) {
    if (!s->count) continue;
    for (double* v : {&s->mean_kl, &s->mean_kl_blind, &s->kamera_ms, &s->reprefill_ms})
      *v /= s->count;
    s->eta = s->mean_kl_blind > 0 ? 1 - s->mean_kl / s->mean_kl_blind : NAN;
  }
  const double n = std::max<size_t>(1, r.steps.size());
  r.encode_ms_per_frame = enc / n;
  r.admit_ms_per_frame = adm / n;
}

Status FramesDemo::run(const std::vector<std::string>& frames, FramesDemoResult& r) {
  if (o_.window < 2 || o_.window > int(frames.size()))
    return make_error(ErrorCode::InvalidArgument,
                      "demo: the window must hold 2 to {} frames (the folder's count), not {}",
                      frames.size(), o_.window);
  if (!m_.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "demo: {} has no tokenizer", m_.source);
  vs_ = find_piece(*m_.tokenizer, kVisionStart);
  ve_ = find_piece(*m_.tokenizer, kVisionEnd);
  if (vs_ < 0 || ve_ < 0)
    return make_error(ErrorCode::InvalidArgument, "demo: {} has no {} / {} tokens", m_.source,
                      kVisionStart, kVisionEnd);
  question_ = m_.tokenizer->encode(o_.question, false);
  if (question_.empty())
    return make_error(ErrorCode::InvalidArgument, "demo: the question is empty");
  WindowPolicy pol;
  pol.rank = o_.rank;
  KAMERA_ASSIGN_OR_RETURN(win_, Window::create(ctx_, pol));
  r.options = o_;
  r.threads = ctx_.engine().threads().size();
  r.n_frames = int(frames.size());
  const double t0 = now_ms();
  for (size_t t = 0; t < frames.size(); ++t) {
    FramesDemoStep st;
    if (auto s = step(int(t), frames[t], st); !s.ok())
      return with_context(s.error(), "demo: frame " + frames[t]);
    r.steps.push_back(std::move(st));
  }
  KAMERA_TRY(win_->check_invariants());
  r.wall_s = (now_ms() - t0) / 1000;
  summarize(r);
  return Status::Ok();
}

nlohmann::json summary_json(const FramesDemoSummary& s) {
  return {{"count", s.count},
          {"flips", s.flips},
          {"blind_flips", s.blind_flips},
          {"mean_kl", s.mean_kl},
          {"mean_kl_blind", s.mean_kl_blind},
          {"eta", std::isnan(s.eta) ? nlohmann::json() : nlohmann::json(s.eta)},
          {"kamera_ttft_ms", s.kamera_ms},
          {"reprefill_ttft_ms", s.reprefill_ms},
          {"speedup", s.kamera_ms > 0 ? s.reprefill_ms / s.kamera_ms : 0.0}};
}

}  // namespace

Result<std::vector<std::string>> list_frames(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(ErrorCode::NotFound, "--frames {}: not a folder", dir);
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (e.is_regular_file(ec) && (ext == ".png" || ext == ".jpg" || ext == ".jpeg"))
      out.push_back(e.path().string());
  }
  if (ec) return make_error(ErrorCode::Io, "--frames {}: {}", dir, ec.message());
  std::sort(out.begin(), out.end());
  if (out.size() < 2)
    return make_error(ErrorCode::InvalidArgument,
                      "--frames {}: {} PNG/JPEG frame(s); the demo needs at least 2", dir,
                      out.size());
  return out;
}

Result<FramesDemoResult> run_frames_demo(Context& ctx, const QwenVisionModel& tower,
                                         const std::vector<std::string>& frames,
                                         const FramesDemoOptions& opts) {
  if (ctx.model().cfg.arch != Arch::Qwen2Vl)
    return make_error(ErrorCode::InvalidArgument,
                      "demo: images need a qwen2vl (M-RoPE) decoder; {} is '{}'",
                      ctx.model().source, arch_name(ctx.model().cfg.arch));
  if (tower.cfg.out_dim != ctx.model().cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "demo: {} projects images to width {}, but the decoder is {} wide",
                      tower.source, tower.cfg.out_dim, ctx.model().cfg.dim);
  FramesDemoResult r;
  r.decoder_path = ctx.model().source;
  r.vision_path = tower.source;
  FramesDemo demo(ctx, tower, opts);
  KAMERA_TRY(demo.run(frames, r));
  return r;
}

nlohmann::json frames_demo_json(const FramesDemoResult& r) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& st : r.steps) {
    nlohmann::json j = {{"step", st.step},           {"frame", st.frame},
                        {"evicted", st.evicted},     {"tokens", st.tokens},
                        {"encode_ms", st.encode_ms}, {"admit_ms", st.admit_ms}};
    if (st.question)
      j["question"] = {{"situation", st.q.situation},
                       {"frames", st.q.frames},
                       {"recalled", st.q.recalled},
                       {"kamera", st.q.kamera},
                       {"reprefill", st.q.reprefill},
                       {"blind", st.q.blind},
                       {"kl", st.q.kl},
                       {"kl_blind", st.q.kl_blind},
                       {"flip", st.q.kamera != st.q.reprefill},
                       {"kamera_ttft_ms", st.q.kamera_ms},
                       {"reprefill_ttft_ms", st.q.reprefill_ms}};
    steps.push_back(std::move(j));
  }
  const FramesDemoOptions& o = r.options;
  return {{"config",
           {{"decoder", r.decoder_path},
            {"vision", r.vision_path},
            {"frames", r.n_frames},
            {"window", o.window},
            {"rank", o.rank == kFullRank ? nlohmann::json("full") : nlohmann::json(o.rank)},
            {"recall_every", o.recall_every},
            {"reorder_every", o.reorder_every},
            {"reps", o.reps},
            {"question", o.question},
            {"threads", r.threads}}},
          {"steps", steps},
          {"summary",
           {{"slide", summary_json(r.slide)},
            {"reorder", summary_json(r.reorder)},
            {"recall", summary_json(r.recall)},
            {"all", summary_json(r.all)}}},
          {"encode_ms_per_frame", r.encode_ms_per_frame},
          {"admit_ms_per_frame", r.admit_ms_per_frame},
          {"wall_s", r.wall_s}};
}

}  // namespace kamera
