#include "server/responses_sink.h"

#include <algorithm>

#include "server/completion_sink.h"
#include "server/openai.h"
#include "server/responses_api.h"

namespace kamera {

ResponsesSink::ResponsesSink(ResponsesMeta meta, std::shared_ptr<Responder> out, Respond respond,
                             std::shared_ptr<std::atomic<bool>> cancel,
                             std::shared_ptr<AnswerThreads::Serial> serial)
    : TranslatorSink(std::move(meta), "call_", 5, std::move(out), std::move(respond),
                     std::move(cancel), std::move(serial)) {}

// The stream begins with the first event (an error before it is answered with its status).
void ResponsesSink::start() {
  if (!meta_.stream || started_) return;
  started_ = true;
  out_->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  emit("response.created", {{"response", response("in_progress")}});
  emit("response.in_progress", {{"response", response("in_progress")}});
}

void ResponsesSink::emit(const char* type, ojson payload) {
  if (!meta_.stream) return;
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [k, v] : payload.items()) e[k] = std::move(v);
  out_->write(sse_event(type, e));
}

ResponsesSink::ojson ResponsesSink::response(const char* status) const {
  ojson output = ojson::array();
  for (const Item& item : items_) output.push_back(item.body);
  ojson r = {{"id", meta_.id},
             {"object", "response"},
             {"created_at", meta_.created},
             {"status", status},
             {"background", false},
             {"error", error_},
             {"incomplete_details", incomplete_},
             {"model", meta_.model},
             {"output", output},
             {"service_tier", "default"},
             {"truncation", "disabled"},
             {"usage", usage_.is_null() ? ojson() : usage_}};
  for (const auto& [k, v] : meta_.echo.items()) r[k] = v;
  return r;
}

// A new output item of this kind, after closing the one before it.
ResponsesSink::Item* ResponsesSink::open_item(Kind kind) {
  close_all();
  const size_t index = items_.size();
  Item item{kind, {}, "", true};
  const std::string n = fmt::format("{}_{}", meta_.id.substr(5), index);
  if (kind == Kind::Reasoning) {
    item.body = {{"type", "reasoning"},
                 {"id", "rs_" + n},
                 {"summary", ojson::array()},
                 {"content", ojson::array()}};
  } else if (kind == Kind::Message) {
    item.body = {{"type", "message"},
                 {"id", "msg_" + n},
                 {"status", "in_progress"},
                 {"role", "assistant"},
                 {"content", ojson::array()}};
  } else {
    item.body = {{"type", "function_call"}, {"id", "fc_" + n}, {"status", "in_progress"}};
  }
  items_.push_back(std::move(item));
  return &items_.back();
}

void ResponsesSink::close_item(Item& item, const char* status) {
  if (!item.open) return;
  item.open = false;
  const int64_t index = &item - items_.data();
  const ojson where = {{"item_id", item.body["id"]}, {"output_index", index}};
  ojson w = where;
  if (item.kind == Kind::Reasoning) {
    item.body["content"] = ojson::array({{{"type", "reasoning_text"}, {"text", item.text}}});
    w["content_index"] = 0;
    w["text"] = item.text;
    emit("response.reasoning_text.done", w);
  } else if (item.kind == Kind::Message) {
    const ojson part = {
        {"type", "output_text"}, {"text", item.text}, {"annotations", ojson::array()}};
    item.body["content"] = ojson::array({part});
    item.body["status"] = status;
    w["content_index"] = 0;
    w["text"] = item.text;
    w["logprobs"] = ojson::array();
    emit("response.output_text.done", w);
    emit("response.content_part.done", {{"item_id", item.body["id"]},
                                        {"output_index", index},
                                        {"content_index", 0},
                                        {"part", part}});
  } else {
    item.body["arguments"] = item.text;
    item.body["status"] = status;
    w["name"] = item.body["name"];
    w["arguments"] = item.text;
    emit("response.function_call_arguments.done", w);
  }
  emit("response.output_item.done", {{"output_index", index}, {"item", item.body}});
}

void ResponsesSink::close_all(bool cut) {
  for (Item& item : items_)
    close_item(item, cut && &item == &items_.back() ? "incomplete" : "completed");
}

void ResponsesSink::open_message() {
  Item* item = open_item(Kind::Message);
  const int64_t index = int64_t(items_.size() - 1);
  emit("response.output_item.added", {{"output_index", index}, {"item", item->body}});
  emit("response.content_part.added",
       {{"item_id", item->body["id"]},
        {"output_index", index},
        {"content_index", 0},
        {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}}}});
}

void ResponsesSink::on_piece(const AnswerPiece& p) {
  auto current = [&](Kind kind) {
    return !items_.empty() && items_.back().open && items_.back().kind == kind;
  };
  auto added = [&](Item& item) {
    emit("response.output_item.added",
         {{"output_index", int64_t(items_.size() - 1)}, {"item", item.body}});
  };
  if (!p.reasoning.empty()) {
    if (!current(Kind::Reasoning)) added(*open_item(Kind::Reasoning));
    Item& item = items_.back();
    item.text += p.reasoning;
    emit("response.reasoning_text.delta", {{"item_id", item.body["id"]},
                                           {"output_index", int64_t(items_.size() - 1)},
                                           {"content_index", 0},
                                           {"delta", p.reasoning}});
  }
  if (!p.d.content.empty()) {
    if (!current(Kind::Message)) open_message();
    Item& item = items_.back();
    item.text += p.d.content;
    emit("response.output_text.delta", {{"item_id", item.body["id"]},
                                        {"output_index", int64_t(items_.size() - 1)},
                                        {"content_index", 0},
                                        {"delta", p.d.content},
                                        {"logprobs", ojson::array()}});
  }
  for (const toolcall::CallDelta& c : p.d.calls) {
    if (!c.id.empty()) {
      Item* item = open_item(Kind::Call);
      item->body["call_id"] = c.id;
      item->body["name"] = c.name;
      item->body["arguments"] = "";
      added(*item);
    }
    if (c.arguments.empty() || items_.empty() || items_.back().kind != Kind::Call) continue;
    Item& item = items_.back();
    item.text += c.arguments;
    emit("response.function_call_arguments.delta", {{"item_id", item.body["id"]},
                                                    {"output_index", int64_t(items_.size() - 1)},
                                                    {"delta", c.arguments}});
  }
}

void ResponsesSink::on_end(const GenerationEnd& end) {
  const FinishReason reason = end.reason;
  const Usage& usage = end.usage;
  on_piece(parser_.finish());
  const bool cut = reason == FinishReason::Length;
  // An answer that ended with nothing to say is still an answer: a message with empty text, as
  // OpenAI sends it (an output with no message and no call makes agent loops such as
  // @openai/agents' ask again). One cut by max_output_tokens keeps what it had.
  const auto answered = [](const Item& i) { return i.kind != Kind::Reasoning; };
  if (!cut && std::none_of(items_.begin(), items_.end(), answered)) open_message();
  close_all(cut);
  ended_ = true;
  const json u = usage_json(usage, meta_.media.get());
  usage_ = {{"input_tokens", usage.prompt.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", usage.prompt.cached_tokens}}},
            {"output_tokens", usage.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", parser_.reasoning_tokens()}}},
            {"total_tokens", usage.prompt.prompt_tokens + usage.completion_tokens},
            {"kamera", to_ordered(u["kamera"])}};
  if (cut) incomplete_ = {{"reason", "max_output_tokens"}};
  const char* status = cut ? "incomplete" : "completed";
  if (meta_.store) meta_.store->put({meta_.id, meta_.owner, meta_.input, response(status)});
  if (!meta_.stream) return respond_(200, response(status));
  emit(cut ? "response.incomplete" : "response.completed", {{"response", response(status)}});
  out_->end();
}

void ResponsesSink::on_error(const ServeError& e) {
  ended_ = true;
  cancel_->store(true);
  HttpError h = serve_http_error(e);
  h.param = responses_param(h.param);
  if (!started_) return respond_(h.status, to_ordered(error_body(h)));
  error_ = {{"code", h.code}, {"message", h.message}};
  emit("response.failed", {{"response", response("failed")}});
  out_->end();
}

}  // namespace kamera
