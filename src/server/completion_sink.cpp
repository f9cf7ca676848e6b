#include "server/completion_sink.h"

#include "server/openai.h"
#include "tokenizer/utf8.h"
#include "toolcall/request.h"

namespace kamera {

namespace {

json byte_values(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

}  // namespace

json chat_logprobs(const std::vector<TokenLogprob>& lp) {
  json content = json::array();
  for (const TokenLogprob& e : lp) {
    json top = json::array();
    for (const TokenLogprob::Alt& a : e.top)
      top.push_back({{"token", utf8_repair(a.bytes)},
                     {"logprob", a.logprob},
                     {"bytes", byte_values(a.bytes)}});
    content.push_back({{"token", utf8_repair(e.bytes)},
                       {"logprob", e.logprob},
                       {"bytes", byte_values(e.bytes)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const std::vector<TokenLogprob>& lp, size_t& offset) {
  json tokens = json::array(), logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& e : lp) {
    tokens.push_back(utf8_repair(e.bytes));
    logprobs.push_back(e.logprob);
    json alts = json::object();
    for (const TokenLogprob::Alt& a : e.top) alts[utf8_repair(a.bytes)] = a.logprob;
    top.push_back(alts);
    offsets.push_back(offset);
    offset += e.bytes.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

CompletionSink::CompletionSink(CompletionMeta meta, std::shared_ptr<Responder> out, Respond respond,
                               std::shared_ptr<std::atomic<bool>> cancel,
                               std::shared_ptr<AnswerThreads::Serial> serial)
    : SerialSink(std::move(out), std::move(respond), std::move(cancel), std::move(serial)),
      meta_(std::move(meta)) {}

void CompletionSink::write(const json& j) {
  if (!streaming_) {
    out_->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    streaming_ = true;
  }
  out_->write("data: " + dump(j) + "\n\n");
}

json CompletionSink::chunk(json choices) const {
  return {{"id", meta_.id},
          {"object", meta_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"choices", std::move(choices)}};
}

json CompletionSink::stream_choice(int index, const Piece& p, const std::vector<TokenLogprob>* lp,
                                   const json& finish) {
  Choice& c = choices_[index];
  const toolcall::Delta& d = p.d;
  json logprobs = nullptr;
  if (meta_.logprobs && lp)
    logprobs = meta_.chat ? chat_logprobs(*lp) : completion_logprobs(*lp, c.offset);
  if (!meta_.chat)
    return {
        {"index", index}, {"text", d.content}, {"logprobs", logprobs}, {"finish_reason", finish}};
  json delta = json::object();
  if (!c.started) delta["role"] = "assistant";
  if (!p.reasoning.empty()) delta["reasoning_content"] = p.reasoning;
  if ((finish.is_null() || !c.started) &&
      (!d.content.empty() || (d.calls.empty() && p.reasoning.empty())))
    delta["content"] = d.content;
  if (!d.calls.empty()) delta["tool_calls"] = toolcall::delta_calls_json(d.calls);
  c.started = true;
  return {{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}};
}

// The choice's next text: a thinking model's reasoning split out, the rest through its tool-call
// parser when the request has tools.
CompletionSink::Piece CompletionSink::parse(int index, std::string text, bool final,
                                            int64_t tokens) {
  Choice& c = choices_[index];
  if (!c.parser)  // call ids unique to the completion and the choice
    c.parser = std::make_unique<AnswerParser>(
        meta_.tool_calls, meta_.reasoning, fmt::format("call_{}_{}_", meta_.id.substr(5), index));
  return final ? c.parser->finish() : c.parser->feed(std::move(text), tokens);
}

void CompletionSink::on_text(TextDelta& e) {
  Piece p = parse(e.index, std::move(e.text), false, e.tokens);
  if (meta_.stream) {
    if (p.empty() && e.logprobs.empty()) return;  // held back by the parsers
    return write(chunk(json::array({stream_choice(e.index, p, &e.logprobs, nullptr)})));
  }
  Choice& c = choices_[e.index];
  c.text += p.d.content;
  c.reasoning += p.reasoning;
  for (TokenLogprob& t : e.logprobs) c.logprobs.push_back(std::move(t));
}

void CompletionSink::add_usage(const json& usage) {
  if (usage_.is_null()) {
    usage_ = usage;
  } else {
    for (const char* k : {"prompt_tokens", "completion_tokens", "total_tokens"})
      usage_[k] = usage_.value(k, int64_t(0)) + usage.value(k, int64_t(0));
    const json none = json::object();
    usage_["prompt_tokens_details"]["cached_tokens"] =
        usage_.value("prompt_tokens_details", none).value("cached_tokens", int64_t(0)) +
        usage.value("prompt_tokens_details", none).value("cached_tokens", int64_t(0));
  }
  kamera_.push_back(usage.value("kamera", json(nullptr)));
  if (kamera_.size() > 1) usage_["kamera"] = {{"prompts", kamera_}};
}

// A choice ended; `usage` set: its generation's last choice.
void CompletionSink::on_finish(int index, FinishReason reason, const Usage* usage) {
  Choice& choice = choices_[index];
  json finish = finish_reason_name(reason);
  if (meta_.tool_calls || meta_.reasoning) {
    Piece rest = parse(index, "", true);
    if (meta_.stream && !rest.empty())
      write(chunk(json::array({stream_choice(index, rest, nullptr, nullptr)})));
    choice.text += rest.d.content;
    choice.reasoning += rest.reasoning;
    if (!choice.parser->calls().empty() && reason == FinishReason::Stop) finish = "tool_calls";
  }
  choice.finish_reason = finish;
  const bool last = usage && done_ + 1 == meta_.generations;
  if (usage) {
    add_usage(usage_json(*usage, meta_.media.get()));
    ++done_;
  }
  if (last && meta_.chat) {  // the tokens generated inside <think> blocks, every choice's
    int64_t reasoning = 0;
    for (const auto& [i, c] : choices_) reasoning += c.parser ? c.parser->reasoning_tokens() : 0;
    usage_["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
  }
  if (meta_.stream) {
    json c = chunk(json::array({stream_choice(index, Piece{}, nullptr, finish)}));
    if (last && !meta_.include_usage) c["usage"] = usage_;  // kamera's: with the last finish
    write(c);
  }
  if (!last) return;
  ended_ = true;
  if (!meta_.stream) return respond_(200, whole_body());
  if (meta_.include_usage) {
    json u = chunk(json::array());
    u["usage"] = usage_;
    write(u);
  }
  out_->write("data: [DONE]\n\n");
  out_->end();
}

// A chat choice's message: its text, and its tool calls when it made some (content null when it
// wrote nothing else, as OpenAI sends it).
json CompletionSink::message(const Choice& c) const {
  json m = {{"role", "assistant"}, {"content", c.text}};
  if (!c.reasoning.empty()) m["reasoning_content"] = c.reasoning;
  if (!c.parser || c.parser->calls().empty()) return m;
  if (c.text.empty()) m["content"] = nullptr;
  m["tool_calls"] = toolcall::tool_calls_json(c.parser->calls());
  return m;
}

json CompletionSink::whole_body() const {
  json choices = json::array();
  for (const auto& [index, c] : choices_) {
    size_t offset = 0;
    json lp = !meta_.logprobs ? json(nullptr)
              : meta_.chat    ? chat_logprobs(c.logprobs)
                              : completion_logprobs(c.logprobs, offset);
    choices.push_back(meta_.chat ? json{{"index", index},
                                        {"message", message(c)},
                                        {"logprobs", lp},
                                        {"finish_reason", c.finish_reason}}
                                 : json{{"index", index},
                                        {"text", c.text},
                                        {"logprobs", lp},
                                        {"finish_reason", c.finish_reason}});
  }
  return {
      {"id", meta_.id},           {"object", meta_.chat ? "chat.completion" : "text_completion"},
      {"created", meta_.created}, {"model", meta_.model},
      {"choices", choices},       {"usage", usage_}};
}

HttpError serve_http_error(const ServeError& e) {
  switch (e.kind) {
    case ServeError::Kind::ContextLength:
      return {400, e.error.message, "invalid_request_error", "context_length_exceeded", e.param};
    case ServeError::Kind::Stopping:
      return {503, e.error.message, "server_error", "stopping"};
    case ServeError::Kind::Failed:
      break;
  }
  HttpError h = http_error(e.error);
  h.param = e.param;
  return h;
}

void CompletionSink::on_error(const ServeError& e) {
  ended_ = true;
  cancel_->store(true);  // the request failed: its other generations stop
  const HttpError h = serve_http_error(e);
  if (!streaming_) return respond_(h.status, error_body(h));
  out_->write("data: " + dump(error_body(h)) + "\n\n");
  out_->write("data: [DONE]\n\n");
  out_->end();
}

void CompletionSink::on(Event& e) {
  if (ended_) return;
  if (auto* t = std::get_if<TextDelta>(&e)) return on_text(*t);
  if (auto* c = std::get_if<ChoiceEnd>(&e)) return on_finish(c->index, c->reason, nullptr);
  if (auto* d = std::get_if<GenerationEnd>(&e)) return on_finish(d->index, d->reason, &d->usage);
  if (auto* f = std::get_if<GenerationFailed>(&e)) return on_error(f->error);
}

}  // namespace kamera
