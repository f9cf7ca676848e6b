// The answer to a Messages request (server/messages_api.h) from its generation's events: the
// Message object (content blocks: thinking, text, tool_use; stop_reason end_turn, max_tokens,
// stop_sequence or tool_use; usage with cache_read_input_tokens), or, streamed, Anthropic's event
// sequence: message_start, then per block content_block_start, its deltas (thinking_delta,
// text_delta, input_json_delta) and content_block_stop, then message_delta (stop_reason and the
// usage) and message_stop (or an error event on an error after the stream began). Events arrive
// on the scheduler thread and are handled on the answer's Serial, as ResponsesSink's are.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/generation.h"
#include "server/answer_parser.h"
#include "server/answer_threads.h"
#include "server/http_front.h"
#include "server/translator_util.h"

namespace kamera {

struct MessagesMeta {
  std::string id, model;
  bool stream = false;
  std::optional<toolcall::Format> tool_calls;
  std::optional<bool> reasoning;
};

enum class MessagesBlock { Thinking, Text, ToolUse };

class MessagesSink : public TranslatorSink<MessagesSink, MessagesMeta, MessagesBlock> {
 public:
  MessagesSink(MessagesMeta meta, std::shared_ptr<Responder> out, Respond respond,
               std::shared_ptr<std::atomic<bool>> cancel,
               std::shared_ptr<AnswerThreads::Serial> serial);

 private:
  friend class SerialSink<MessagesSink, nlohmann::ordered_json>;
  friend class TranslatorSink<MessagesSink, MessagesMeta, MessagesBlock>;
  using Kind = MessagesBlock;
  using Block = Part;  // body: the block as the Message lists it
  void start();
  void on_admitted(const PromptAdmitted& a);
  void on_piece(const AnswerPiece& p);
  void on_end(const GenerationEnd& end);
  void on_error(const ServeError& e);
  Block& open_block(Kind kind, ojson body);
  void delta(const char* type, const char* key, const std::string& text);
  void close_all();
  void emit(const char* type, ojson payload);
  ojson message() const;

  std::vector<Block> blocks_;
  ojson stop_reason_ = nullptr, stop_sequence_ = nullptr;
};

}  // namespace kamera
