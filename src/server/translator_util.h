// What the API translators share (chat completions' CompletionSink, Responses' and Messages'
// translators and sinks): refusals that name the request field at fault, a server-sent event in
// their wire form, and the base of an answer's event sink, which hands each event of its
// generation from the scheduler thread to the answer's Serial (server/answer_threads.h), where
// the derived sink's on(Event&) builds and writes the JSON in order.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "serve/generation.h"
#include "server/answer_threads.h"
#include "server/http_front.h"

namespace kamera {

// A refusal of `field` (written into *param when param is set): "\"field\" why".
Error refuse_field(std::string* param, const std::string& field, const std::string& why,
                   ErrorCode code = ErrorCode::InvalidArgument);
// base[i], the name of an array's element in a refusal.
std::string indexed(const std::string& base, size_t i);
// "event: TYPE\ndata: JSON\n\n" (the JSON in the server's dump, its keys in their order).
std::string sse_event(const char* type, const nlohmann::ordered_json& data);

// The base of a sink: Derived has a private `void on(Event&)` and befriends SerialSink<Derived>.
template <class Derived>
class SerialSink : public std::enable_shared_from_this<Derived> {
 public:
  // Answers a whole body (or an error before a stream began).
  using Respond = std::function<void(int status, const nlohmann::json& body)>;

  // The sink each of the request's generations sends its events to. Called on the scheduler
  // thread: the event moves to the answer's Serial, nothing else.
  EventSink sink() {
    return [self = this->shared_from_this()](Event e) {
      auto event = std::make_shared<Event>(std::move(e));
      self->serial_->post([self, event] { self->on(*event); });
    };
  }

 protected:
  // `cancel` stops the request's other generations once it failed.
  SerialSink(std::shared_ptr<Responder> out, Respond respond,
             std::shared_ptr<std::atomic<bool>> cancel,
             std::shared_ptr<AnswerThreads::Serial> serial)
      : out_(std::move(out)),
        respond_(std::move(respond)),
        cancel_(std::move(cancel)),
        serial_(std::move(serial)) {}

  std::shared_ptr<Responder> out_;
  Respond respond_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::shared_ptr<AnswerThreads::Serial> serial_;
};

}  // namespace kamera
