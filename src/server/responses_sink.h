// The answer to a Responses request (server/responses_api.h) from its generation's events: the
// Response object (output items: a reasoning item with the reasoning_text, a message with the
// output_text, function_call items; status completed, or incomplete at max_output_tokens; usage
// with input_tokens_details.cached_tokens), or, streamed, the Responses event sequence:
// response.created, response.in_progress, then per item response.output_item.added, its deltas
// (response.reasoning_text.delta, response.content_part.added + response.output_text.delta,
// response.function_call_arguments.delta) and its .done events, then response.completed (or
// response.incomplete, or response.failed on an error after the stream began). Events arrive on
// the scheduler thread and are handled on the answer's Serial, as CompletionSink's are. A finished
// Response (completed or incomplete) is stored when the request asked for it (meta.store).
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
#include "server/response_store.h"
#include "server/translator_util.h"

namespace kamera {

struct ResponsesMeta {
  std::string id, model;
  int64_t created = 0;
  bool stream = false;
  nlohmann::ordered_json echo;  // ResponsesRequest::echo
  std::optional<toolcall::Format> tool_calls;
  std::optional<bool> reasoning;
  std::shared_ptr<const RequestMedia> media;
  // Set (store: true): the finished Response is kept there with its conversation's input items,
  // for the client `owner` (server/response_store.h); a failed one is not.
  std::shared_ptr<ResponseStore> store;
  std::string owner;
  nlohmann::ordered_json input;
};

enum class ResponsesItem { Reasoning, Message, Call };

class ResponsesSink : public TranslatorSink<ResponsesSink, ResponsesMeta, ResponsesItem> {
 public:
  ResponsesSink(ResponsesMeta meta, std::shared_ptr<Responder> out, Respond respond,
                std::shared_ptr<std::atomic<bool>> cancel,
                std::shared_ptr<AnswerThreads::Serial> serial);

 private:
  friend class SerialSink<ResponsesSink, nlohmann::ordered_json>;
  friend class TranslatorSink<ResponsesSink, ResponsesMeta, ResponsesItem>;
  using Kind = ResponsesItem;
  using Item = Part;  // body: the item as the Response lists it
  void start();
  void on_admitted(const PromptAdmitted&) {}  // the stream begins with the first text
  void on_piece(const AnswerPiece& p);
  void on_end(const GenerationEnd& end);
  void on_error(const ServeError& e);
  Item* open_item(Kind kind);
  // A message item opened (its added and content_part.added events sent).
  void open_message();
  // status: "completed", or "incomplete" for the item max_output_tokens cut.
  void close_item(Item& item, const char* status = "completed");
  void close_all(bool cut = false);  // cut: the last item was cut by max_output_tokens
  void emit(const char* type, ojson payload);
  ojson response(const char* status) const;

  std::vector<Item> items_;
  ojson incomplete_ = nullptr, error_ = nullptr;
  int64_t sequence_ = 0;
};

}  // namespace kamera
