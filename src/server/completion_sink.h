// The answer to one completion request, from the events of its generations (one per prompt of a
// batch, each with its n choices): OpenAI's response body, or its SSE stream of chunks, with the
// choices in index order, their log-probabilities in OpenAI's shapes (chat's logprobs.content,
// completions' tokens / token_logprobs / top_logprobs / text_offset), and the usage summed. With
// tools, each choice's text goes through a tool-call parser (toolcall/parser.h): the message's
// tool_calls (finish_reason "tool_calls"), or the stream's tool-call deltas. A thinking model's
// reasoning is split out first (toolcall/reasoning.h): message.reasoning_content, or the stream's
// delta.reasoning_content; the tool-call parser reads the answer only.
// Events arrive on the scheduler thread, typed (serve/events.h), and are handed at once to the
// answer's Serial (server/answer_threads.h): the JSON is built and written there, in order.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/generation.h"
#include "server/answer_parser.h"
#include "server/answer_threads.h"
#include "server/http_front.h"
#include "server/json_fields.h"
#include "server/translator_util.h"

namespace kamera {

struct CompletionMeta {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage only
  bool logprobs = false;       // the request asked for them
  int generations = 1;         // prompts in the batch
  std::optional<toolcall::Format> tool_calls;  // set: parse tool calls of this format
  std::optional<bool> reasoning;  // set: split the reasoning out (true: the prompt opened it)
  std::shared_ptr<const RequestMedia> media;  // the request's images (usage.images)
};

// Log-probabilities of tokens as OpenAI writes them. Chat: {"content": [{token, logprob, bytes,
// top_logprobs}]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}, the offsets
// counted from `offset` (the choice's text so far), which is advanced.
nlohmann::json chat_logprobs(const std::vector<TokenLogprob>& lp);
nlohmann::json completion_logprobs(const std::vector<TokenLogprob>& lp, size_t& offset);

// The HTTP error of a failed generation (every API's).
HttpError serve_http_error(const ServeError& e);

class CompletionSink : public SerialSink<CompletionSink> {
 public:
  CompletionSink(CompletionMeta meta, std::shared_ptr<Responder> out, Respond respond,
                 std::shared_ptr<std::atomic<bool>> cancel,
                 std::shared_ptr<AnswerThreads::Serial> serial);

 private:
  friend class SerialSink<CompletionSink>;
  struct Choice {
    std::string text;
    nlohmann::json finish_reason = nullptr;
    std::vector<TokenLogprob> logprobs;
    size_t offset = 0;     // completions' text_offset, streamed
    bool started = false;  // chat streams: the first delta carries the role
    std::unique_ptr<AnswerParser> parser;
    std::string reasoning;
  };
  using Piece = AnswerPiece;
  void on(Event& e);
  void on_text(TextDelta& e);
  void on_finish(int index, FinishReason reason, const Usage* usage);
  void on_error(const ServeError& e);
  void add_usage(const nlohmann::json& usage);
  nlohmann::json whole_body() const;
  nlohmann::json chunk(nlohmann::json choices) const;
  nlohmann::json stream_choice(int index, const Piece& p, const std::vector<TokenLogprob>* lp,
                               const nlohmann::json& finish);
  Piece parse(int index, std::string text, bool final, int64_t tokens = 0);
  nlohmann::json message(const Choice& c) const;
  void write(const nlohmann::json& j);

  CompletionMeta meta_;
  std::map<int, Choice> choices_;
  nlohmann::json usage_;
  std::vector<nlohmann::json> kamera_;  // usage.kamera of each generation
  int done_ = 0;                        // generations finished
  bool streaming_ = false, ended_ = false;
};

}  // namespace kamera
