// A multi-turn chat with images (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, or Kimi-VL) over one KV sequence
// of a Context, as ChatSession (context/chat_session.h) does for text: every turn renders the whole
// conversation with the chat template, and the cached prefix it shares with what the sequence holds
// is kept; only the rest is prefilled. Here the prefix is compared in units of tokens and whole
// images (an image is equal when its image key is: same pixels, preprocessing and models), so a
// follow-up question about a picture forwards neither the picture nor the tower again.
//
// Images attached before a user message (attach_image) go with it, before its text, each as
// <|vision_start|> image <|vision_end|> (ids written around the image rows, whatever the
// vocabulary kind), placed as get_rope_index places them (vision/rope_index.h). Each distinct
// picture is encoded once per session (vision/image_chunks.h). A Kimi-VL tower's pictures sit on
// linear positions between <|media_start|>image<|media_content|> and <|media_end|> where the
// vocabulary has them, bare otherwise (vision/kimi_chunks.h). Any other family's tower comes as a
// MediaTower (vision/media_tower.h), its pictures placed with its own delimiters. An audio tower
// (MediaTower::takes_audio: Qwen2.5-Omni's) takes clips the same way (attach_audio): each goes
// with the next user message, in attachment order with its pictures, between the tower's audio
// delimiters (<|audio_bos|> clip <|audio_eos|>), and is kept across turns as a picture is.
//
//   auto chat = VlChatSession::create(ctx, tmpl, opts, tower, &threads);
//   chat->attach_image("cat.png");
//   auto reply = chat->reply("What is this?", print);
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "context/chat_session.h"
#include "vision/image_chunks.h"
#include "vision/kimi_chunks.h"
#include "vision/media_tower.h"

namespace kamera {

class VlChatSession {
 public:
  // The decoder must be qwen2vl with the vision delimiters in its vocabulary, and the tower's
  // projection as wide as the decoder. Takes one sequence of ctx's pool for its lifetime.
  static Result<std::unique_ptr<VlChatSession>> create(Context& ctx, ChatTemplate tmpl,
                                                       ChatOptions opts,
                                                       const QwenVisionModel& tower,
                                                       ThreadPool* pool);
  // The same with Kimi-VL's tower beside a deepseek2 decoder of its width.
  static Result<std::unique_ptr<VlChatSession>> create(Context& ctx, ChatTemplate tmpl,
                                                       ChatOptions opts,
                                                       const KimiVisionModel& tower,
                                                       ThreadPool* pool);
  // The same with any family's tower loaded beside ctx's decoder (vision/media_tower.h: Qwen,
  // Kimi-VL, SmolVLM, Gemma 3, InternVL, LLaVA), which the session owns; its delimiters go around
  // each picture. The mini-VL's tower is refused (its prompt is words, not a chat template's).
  static Result<std::unique_ptr<VlChatSession>> create(Context& ctx, ChatTemplate tmpl,
                                                       ChatOptions opts,
                                                       std::unique_ptr<MediaTower> tower);
  ~VlChatSession();
  VlChatSession(const VlChatSession&) = delete;
  VlChatSession& operator=(const VlChatSession&) = delete;

  void set_system(std::string text) { system_ = std::move(text); }
  // Forgets the turns and any attached image; the system message stays.
  void reset();
  // Decodes and encodes the image now (errors now); it goes with the next user message.
  // encoded (optional): whether the tower ran (false: the session had seen this picture).
  Status attach_image(const std::string& path, bool* encoded = nullptr);
  // A clip of 16 kHz mono samples through the tower's audio path (MediaTower::audio_chunk), for
  // the next user message. Errors: a tower that reads no audio, the tower's errors.
  Status attach_audio(std::span<const float> samples, bool* encoded = nullptr);
  size_t pending_images() const { return pending_.size(); }
  // Whether the tower reads audio clips (attach_audio).
  bool takes_audio() const { return tower_ && tower_->takes_audio(); }

  // As ChatSession::reply; the attached images go with `user`. On failure the conversation and
  // the attached images are as before the call.
  Result<std::string> reply(std::string user,
                            const std::function<void(std::string_view)>& on_text = {},
                            TurnStats* stats = nullptr);

  ImageChunks::Stats image_stats() const {
    return qwen_ ? qwen_->stats() : kimi_ ? kimi_->stats() : tower_->stats();
  }
  // The conversation's text, system message first when set (images are not in it), and how many
  // images and audio clips it holds.
  std::vector<ChatMessage> messages() const;
  int images_in_conversation() const;
  // Replaces the conversation with text turns (a leading system message becomes the system
  // message); attached images are dropped.
  void set_messages(std::vector<ChatMessage> messages);

 private:
  using ImagePtr = std::shared_ptr<const ChunkContent>;
  struct Media {  // a picture's or a clip's placed chunk
    ImagePtr chunk;
    bool audio = false;
  };
  struct Turn {
    std::string role, text;
    std::vector<Media> images;
  };
  // One unit of the prompt: a token, or a whole image.
  struct Unit {
    int32_t token = -1;
    ImagePtr image;
    bool operator==(const Unit& o) const { return token == o.token && image == o.image; }
  };
  struct Cached {
    Unit unit;
    int32_t rows_after = 0, next_pos = 0;  // KV rows and next position once this unit is in
  };

  VlChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts, VisionDelimiters delimiters);
  // The checks and render options both towers share.
  static Status prepare(const Context& ctx, ChatOptions& opts);
  Result<std::vector<Unit>> render_units() const;
  Status prefill(const std::vector<Unit>& units, TurnStats& st, std::vector<float>& logits);
  Result<std::string> generate(std::vector<float> logits,
                               const std::function<void(std::string_view)>& on_text, TurnStats& st);

  Context& ctx_;
  ChatTemplate tmpl_;
  ChatOptions opts_;
  std::unique_ptr<ImageChunks> qwen_;      // the tower's picture cache: Qwen's, or
  std::unique_ptr<KimiImageChunks> kimi_;  // Kimi-VL's, or
  std::unique_ptr<MediaTower> tower_;      // any family's tower with its own cache
  SeqId seq_;
  VisionDelimiters delimiters_, audio_delimiters_;  // around a picture, a clip
  std::string system_;
  std::vector<Turn> turns_;
  std::vector<Media> pending_;
  std::vector<Cached> cached_;
};

}  // namespace kamera
