#include "server/messages_sink.h"

#include "server/completion_sink.h"
#include "server/messages_api.h"
#include "server/openai.h"

namespace kamera {

MessagesSink::MessagesSink(MessagesMeta meta, std::shared_ptr<Responder> out, Respond respond,
                           std::shared_ptr<std::atomic<bool>> cancel,
                           std::shared_ptr<AnswerThreads::Serial> serial)
    : TranslatorSink(std::move(meta), "toolu_", 4, std::move(out), std::move(respond),
                     std::move(cancel), std::move(serial)) {
  usage_ = {{"input_tokens", 0},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", 0},
            {"output_tokens", 0}};
}

// The stream begins with the first event, the prompt's admission (an error before it is answered
// with its status): message_start tells the prompt's usage, message_delta the output's too.
void MessagesSink::start() {
  if (!meta_.stream || started_) return;
  started_ = true;
  out_->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  emit("message_start", {{"message", message()}});
}

void MessagesSink::emit(const char* type, ojson payload) {
  if (!meta_.stream) return;
  ojson e = {{"type", type}};
  for (auto& [k, v] : payload.items()) e[k] = std::move(v);
  out_->write(sse_event(type, e));
}

MessagesSink::ojson MessagesSink::message() const {
  ojson content = ojson::array();
  for (const Block& b : blocks_) content.push_back(b.body);
  return {{"id", meta_.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", meta_.model},
          {"content", content},
          {"stop_reason", stop_reason_},
          {"stop_sequence", stop_sequence_},
          {"usage", usage_}};
}

// A new block of this kind, after closing the one before it.
MessagesSink::Block& MessagesSink::open_block(Kind kind, ojson body) {
  close_all();
  emit("content_block_start", {{"index", int64_t(blocks_.size())}, {"content_block", body}});
  blocks_.push_back({kind, std::move(body), "", true});
  return blocks_.back();
}

void MessagesSink::delta(const char* type, const char* key, const std::string& text) {
  Block& b = blocks_.back();
  b.text += text;
  emit("content_block_delta",
       {{"index", int64_t(blocks_.size() - 1)}, {"delta", {{"type", type}, {key, text}}}});
}

void MessagesSink::close_all() {
  for (Block& b : blocks_) {
    if (!b.open) continue;
    b.open = false;
    if (b.kind == Kind::Thinking) {
      b.body["thinking"] = b.text;
    } else if (b.kind == Kind::Text) {
      b.body["text"] = b.text;
    } else {  // the arguments as an object (the grammar made them one; else as sent: a string)
      b.body["input"] = ojson::parse(b.text.empty() ? "{}" : b.text, nullptr, false);
      if (b.body["input"].is_discarded()) b.body["input"] = b.text;
    }
    emit("content_block_stop", {{"index", int64_t(&b - blocks_.data())}});
  }
}

void MessagesSink::on_piece(const AnswerPiece& p) {
  auto current = [&](Kind kind) {
    return !blocks_.empty() && blocks_.back().open && blocks_.back().kind == kind;
  };
  if (!p.reasoning.empty()) {
    if (!current(Kind::Thinking))
      open_block(Kind::Thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    delta("thinking_delta", "thinking", p.reasoning);
  }
  if (!p.d.content.empty()) {
    if (!current(Kind::Text)) open_block(Kind::Text, {{"type", "text"}, {"text", ""}});
    delta("text_delta", "text", p.d.content);
  }
  for (const toolcall::CallDelta& c : p.d.calls) {
    if (!c.id.empty())
      open_block(
          Kind::ToolUse,
          {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", ojson::object()}});
    if (c.arguments.empty() || !current(Kind::ToolUse)) continue;
    delta("input_json_delta", "partial_json", c.arguments);
  }
}

void MessagesSink::on_end(const GenerationEnd& end) {
  on_piece(parser_.finish());
  close_all();
  ended_ = true;
  const bool calls = std::any_of(blocks_.begin(), blocks_.end(),
                                 [](const Block& b) { return b.kind == Kind::ToolUse; });
  if (end.reason == FinishReason::Length) {
    stop_reason_ = "max_tokens";
  } else if (!end.stop_sequence.empty()) {
    stop_reason_ = "stop_sequence";
    stop_sequence_ = end.stop_sequence;
  } else {
    stop_reason_ = calls ? "tool_use" : "end_turn";
  }
  const PromptUsage& u = end.usage.prompt;
  // Anthropic's accounting: input_tokens are those the cache did not serve; the prompt is
  // input_tokens + cache_creation_input_tokens + cache_read_input_tokens.
  usage_ = {{"input_tokens", u.prompt_tokens - u.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", u.cached_tokens},
            {"output_tokens", end.usage.completion_tokens}};
  if (!meta_.stream) return respond_(200, message());
  emit("message_delta",
       {{"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
        {"usage", usage_}});
  emit("message_stop", ojson::object());
  out_->end();
}

void MessagesSink::on_error(const ServeError& e) {
  ended_ = true;
  cancel_->store(true);
  HttpError h = serve_http_error(e);
  h.param = messages_param(h.param);
  const ojson body = to_ordered(anthropic_error(h.status, error_body(h)));
  if (!started_) return respond_(h.status, body);
  emit("error", body);
  out_->end();
}

void MessagesSink::on_admitted(const PromptAdmitted& a) {
  usage_["input_tokens"] = a.prompt_tokens - a.cached_tokens;
  usage_["cache_read_input_tokens"] = a.cached_tokens;
  start();
}

}  // namespace kamera
