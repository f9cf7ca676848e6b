#include "vision/vl_chat_session.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "tokenizer/utf8.h"
#include "vision/rope_index.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

// Where an image sits in a message's template text: a byte no template or user text writes.
constexpr std::string_view kImageMark = "\x1e";

}  // namespace

Status VlChatSession::prepare(const Context& ctx, ChatOptions& opts) {
  const Model& m = ctx.model();
  if (!m.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "{}: chat needs a model with a vocabulary",
                      m.source);
  if (opts.gen.max_tokens < 0)
    return make_error(ErrorCode::InvalidArgument, "chat: max_tokens {} must be >= 0",
                      opts.gen.max_tokens);
  const Tokenizer& tok = *m.tokenizer;
  if (opts.render.bos_token.empty() && tok.bos() >= 0) opts.render.bos_token = tok.piece(tok.bos());
  if (opts.render.eos_token.empty() && tok.eos() >= 0) opts.render.eos_token = tok.piece(tok.eos());
  opts.render.add_generation_prompt = true;
  return Status::Ok();
}

Result<std::unique_ptr<VlChatSession>> VlChatSession::create(Context& ctx, ChatTemplate tmpl,
                                                             ChatOptions opts,
                                                             const QwenVisionModel& tower,
                                                             ThreadPool* pool) {
  KAMERA_TRY(prepare(ctx, opts));
  const Model& m = ctx.model();
  KAMERA_TRY(check_qwen_pair(tower.cfg, m.cfg, tower.source));
  VisionDelimiters d = qwen_delimiters(&*m.tokenizer);
  if (d.empty())
    return make_error(ErrorCode::InvalidArgument, "{} has no {} / {} tokens in its vocabulary",
                      m.source, kVisionStart, kVisionEnd);
  std::unique_ptr<VlChatSession> s(
      new VlChatSession(ctx, std::move(tmpl), std::move(opts), std::move(d)));
  s->qwen_ = std::make_unique<ImageChunks>(tower, m.fingerprint, pool);
  s->qwen_->set_store(&ctx.store());  // the context's tiers may hold the picture already
  return s;
}

Result<std::unique_ptr<VlChatSession>> VlChatSession::create(Context& ctx, ChatTemplate tmpl,
                                                             ChatOptions opts,
                                                             const KimiVisionModel& tower,
                                                             ThreadPool* pool) {
  KAMERA_TRY(prepare(ctx, opts));
  const Model& m = ctx.model();
  KAMERA_TRY(check_kimi_pair(tower.cfg, m.cfg, tower.source));
  std::unique_ptr<VlChatSession> s(
      new VlChatSession(ctx, std::move(tmpl), std::move(opts), kimi_delimiters(&*m.tokenizer)));
  s->kimi_ = std::make_unique<KimiImageChunks>(tower, m.fingerprint, pool);
  s->kimi_->set_store(&ctx.store());
  return s;
}

Result<std::unique_ptr<VlChatSession>> VlChatSession::create(Context& ctx, ChatTemplate tmpl,
                                                             ChatOptions opts,
                                                             std::unique_ptr<MediaTower> tower) {
  KAMERA_TRY(prepare(ctx, opts));
  if (!tower) return make_error(ErrorCode::InvalidArgument, "chat: no vision tower");
  if (tower->word_prompt())
    return make_error(ErrorCode::InvalidArgument,
                      "chat: the mini-VL's tower reads a word prompt, not a chat template's "
                      "(kamera demo, kamera serve)");
  std::unique_ptr<VlChatSession> s(
      new VlChatSession(ctx, std::move(tmpl), std::move(opts), tower->delimiters()));
  tower->set_store(&ctx.store());  // the context's tiers may hold the picture already
  s->audio_delimiters_ = tower->audio_delimiters();
  s->tower_ = std::move(tower);
  return s;
}

VlChatSession::VlChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts,
                             VisionDelimiters delimiters)
    : ctx_(ctx),
      tmpl_(std::move(tmpl)),
      opts_(std::move(opts)),
      seq_(ctx.pool().create_sequence()),
      delimiters_(std::move(delimiters)) {}

VlChatSession::~VlChatSession() {
  ctx_.pool().free_sequence(seq_);
}

void VlChatSession::reset() {
  turns_.clear();
  pending_.clear();
}

Status VlChatSession::attach_image(const std::string& path, bool* encoded) {
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
  KAMERA_ASSIGN_OR_RETURN(ImagePtr chunk,
                          qwen_   ? qwen_->image(img, encoded)
                          : kimi_ ? kimi_->image(img, encoded)
                                  : tower_->chunk(std::span<const Image>(&img, 1), encoded, 0, {}));
  pending_.push_back({std::move(chunk), false});
  return Status::Ok();
}

Status VlChatSession::attach_audio(std::span<const float> samples, bool* encoded) {
  if (!takes_audio())
    return make_error(ErrorCode::InvalidArgument,
                      "chat: this tower reads no audio (an audio clip needs an audio tower's "
                      "mmproj: Qwen2.5-Omni's)");
  KAMERA_ASSIGN_OR_RETURN(ImagePtr chunk, tower_->audio_chunk(samples, encoded, {}));
  pending_.push_back({std::move(chunk), true});
  return Status::Ok();
}

// The conversation rendered with the generation prompt, as units: the template's text tokenized
// (control tokens parsed, BOS as the vocabulary wants), each image mark replaced by the tower's
// delimiters around the image (<|vision_start|> image <|vision_end|> for a Qwen tower; an audio
// clip between the tower's audio delimiters).
Result<std::vector<VlChatSession::Unit>> VlChatSession::render_units() const {
  std::vector<ChatMessage> msgs;
  std::vector<Media> order;  // images and clips in the order their marks appear
  if (!system_.empty()) msgs.push_back({"system", system_});
  for (const Turn& t : turns_) {
    if (t.text.find(kImageMark) != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "chat: a message holds a reserved byte (0x1e)");
    std::string content;
    for (const Media& img : t.images) content += kImageMark, order.push_back(img);
    msgs.push_back({t.role, content + t.text});
  }
  KAMERA_ASSIGN_OR_RETURN(std::string text, tmpl_.render(msgs, opts_.render));
  const Tokenizer& tok = *ctx_.model().tokenizer;
  std::vector<Unit> units;
  size_t at = 0, next_image = 0;
  for (;;) {
    const size_t mark = text.find(kImageMark, at);
    const auto ids = tok.tokenize(
        std::string_view(text).substr(at, mark == std::string::npos ? mark : mark - at),
        {.add_special = false, .parse_special = true});
    for (int32_t id : ids) units.push_back({id, nullptr});
    if (mark == std::string::npos) break;
    if (next_image == order.size())
      return make_error(ErrorCode::InvalidArgument, "chat: the template repeated an image");
    const Media& media = order[next_image++];
    const VisionDelimiters& d = media.audio ? audio_delimiters_ : delimiters_;
    for (int32_t id : d.open) units.push_back({id, nullptr});
    units.push_back({-1, media.chunk});
    for (int32_t id : d.close) units.push_back({id, nullptr});
    at = mark + kImageMark.size();
  }
  if (next_image != order.size())
    return make_error(ErrorCode::InvalidArgument, "chat: the template dropped an image");
  if (tok.add_bos() && (units.empty() || units.front().token != tok.bos()))
    units.insert(units.begin(), Unit{tok.bos(), nullptr});
  return units;
}

// Keeps the cached units the new rendering shares, prefills the rest as pieces (token runs and
// images); logits of the last token.
Status VlChatSession::prefill(const std::vector<Unit>& units, TurnStats& st,
                              std::vector<float>& logits) {
  if (units.empty()) return make_error(ErrorCode::InvalidArgument, "chat: the prompt is empty");
  size_t keep = 0;
  if (opts_.reuse_cache)
    while (keep < cached_.size() && keep < units.size() && cached_[keep].unit == units[keep])
      ++keep;
  keep = std::min(keep, units.size() - 1);  // the last unit (text) is forwarded for the logits
  const int32_t rows = keep ? cached_[keep - 1].rows_after : 0;
  const int32_t start = keep ? cached_[keep - 1].next_pos : 0;
  KAMERA_TRY(ctx_.pool().truncate(seq_, rows));
  cached_.resize(keep);
  std::vector<ChunkContent> pieces;
  for (size_t i = keep; i < units.size(); ++i) {
    if (units[i].image) {
      pieces.push_back(*units[i].image);
    } else if (pieces.empty() || !pieces.back().is_tokens() || (i > keep && units[i - 1].image)) {
      pieces.push_back(ChunkContent::from_tokens({units[i].token}));
    } else {
      pieces.back().tokens.push_back(units[i].token);
      pieces.back().layout.push_back(Pos::linear(int32_t(pieces.back().tokens.size() - 1)));
    }
  }
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(
      logits, prefill_pieces(ctx_.engine(), ctx_.pool(), seq_, pieces, start, LogitsMode::Last));
  st.prefill_ms = now_ms() - t0;
  int32_t r = rows, p = start;
  for (size_t i = keep; i < units.size(); ++i) {
    const ChunkContent* img = units[i].image.get();
    r += img ? img->n() : 1;
    p += img ? img->extent() : 1;
    cached_.push_back({units[i], r, p});
  }
  st.prompt_tokens = r;
  st.reused_tokens = rows;
  return Status::Ok();
}

// Runs the generation loop to its end (the end-of-generation set, a stop string, max_tokens or
// the model's context).
Result<std::string> VlChatSession::generate(std::vector<float> logits,
                                            const std::function<void(std::string_view)>& on_text,
                                            TurnStats& st) {
  std::vector<int32_t> history;  // the text tokens of the conversation (penalties, spacing)
  for (const Cached& c : cached_)
    if (!c.unit.image) history.push_back(c.unit.token);
  GenerateParams gp = opts_.gen;
  gp.max_tokens = std::min(gp.max_tokens, ctx_.model().cfg.ctx_len - cached_.back().next_pos);
  gp.sampling.seed += turns_.size();  // each turn draws anew
  Generator gen(&*ctx_.model().tokenizer, gp, history, nullptr, opts_.cancel);
  auto forward = [&](int32_t next) -> Result<std::vector<float>> {
    const Pos p = Pos::linear(cached_.back().next_pos);
    KAMERA_ASSIGN_OR_RETURN(
        auto l,
        ctx_.engine().forward(ctx_.pool(), seq_, ForwardInput::from_tokens({&next, 1}, {&p, 1})));
    cached_.push_back({{next, nullptr}, cached_.back().rows_after + 1, p.t + 1});
    return l;
  };
  const double t0 = now_ms();
  auto end = run_generation(gen, std::move(logits), forward, on_text);
  st.decode_ms = now_ms() - t0;
  if (!end.ok()) return end.error();
  st.generated_tokens = int(gen.tokens().size());
  st.stopped_at_eog = *end == FinishReason::Stop;
  st.cancelled = *end == FinishReason::Cancelled;
  return utf8_repair(gen.text());
}

std::vector<ChatMessage> VlChatSession::messages() const {
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  for (const Turn& t : turns_) all.push_back({t.role, t.text});
  return all;
}

int VlChatSession::images_in_conversation() const {
  int n = 0;
  for (const Turn& t : turns_) n += int(t.images.size());
  return n;
}

void VlChatSession::set_messages(std::vector<ChatMessage> messages) {
  system_.clear();
  turns_.clear();
  pending_.clear();
  for (ChatMessage& m : messages) {
    if (m.role == "system" && turns_.empty() && system_.empty())
      system_ = std::move(m.content);
    else
      turns_.push_back({std::move(m.role), std::move(m.content), {}});
  }
}

Result<std::string> VlChatSession::reply(std::string user,
                                         const std::function<void(std::string_view)>& on_text,
                                         TurnStats* stats) {
  TurnStats st;
  turns_.push_back({"user", std::move(user), pending_});
  auto undo = [&](const Error& e) -> Result<std::string> {
    pending_ = std::move(turns_.back().images);
    turns_.pop_back();
    return e;
  };
  auto units = render_units();
  if (!units.ok()) return undo(units.error());
  int64_t extent = 0;
  for (const Unit& u : *units) extent += u.image ? u.image->extent() : 1;
  const int ctx_len = ctx_.model().cfg.ctx_len;
  if (extent >= ctx_len)
    return undo(make_error(ErrorCode::InvalidArgument,
                           "chat: the conversation takes {} positions, the model's context {}: "
                           "reset it",
                           extent, ctx_len));
  std::vector<float> logits;
  Status pre = prefill(*units, st, logits);
  if (!pre.ok()) {
    cached_.clear();  // a failed forward may leave rows behind: start over next turn
    (void)ctx_.pool().truncate(seq_, 0);
    return undo(pre.error());
  }
  pending_.clear();
  auto text = generate(std::move(logits), on_text, st);
  if (!text.ok()) return undo(text.error());
  turns_.push_back({"assistant", *text, {}});
  if (stats) *stats = st;
  return text;
}

}  // namespace kamera
