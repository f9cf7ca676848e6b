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
#include "server/answer_parser.h"
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
// Json: the type its answers are built in.
template <class Derived, class Json = nlohmann::json>
class SerialSink : public std::enable_shared_from_this<Derived> {
 public:
  // Answers a whole body (or an error before a stream began).
  using Respond = std::function<void(int status, const Json& body)>;

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

// The base of the sinks that answer in another API's shape (Responses, Messages): answers built
// as ordered_json (keys in the order the API documents), the request's Meta (id, tool_calls,
// reasoning), the parser of the generated text, the usage, and whether the stream began and the
// answer ended. on(Event&) hands each event to Derived's on_admitted, on_piece (the parsed text,
// after start()), on_end (after start()) and on_error; none after the answer ended. Derived
// befriends SerialSink<Derived, ordered_json> and TranslatorSink<Derived, Meta, Kind>; Kind names
// the kinds of its parts.
template <class Derived, class Meta, class Kind>
class TranslatorSink : public SerialSink<Derived, nlohmann::ordered_json> {
 protected:
  using ojson = nlohmann::ordered_json;
  using Base = SerialSink<Derived, ojson>;
  // A part of the answer (a Messages content block, a Responses output item): its body as the
  // answer lists it, the text it gathers, and whether it is still open.
  struct Part {
    Kind kind;
    ojson body;
    std::string text;
    bool open = true;
  };
  // Its tool calls' ids: call_prefix, meta.id past its first `skip` characters, "_", the number.
  TranslatorSink(Meta meta, const std::string& call_prefix, size_t skip,
                 std::shared_ptr<Responder> out, typename Base::Respond respond,
                 std::shared_ptr<std::atomic<bool>> cancel,
                 std::shared_ptr<AnswerThreads::Serial> serial)
      : Base(std::move(out), std::move(respond), std::move(cancel), std::move(serial)),
        meta_(std::move(meta)),
        parser_(meta_.tool_calls, meta_.reasoning, call_prefix + meta_.id.substr(skip) + "_") {}

  void on(Event& e) {
    if (ended_) return;
    Derived& d = static_cast<Derived&>(*this);
    if (auto* a = std::get_if<PromptAdmitted>(&e)) return d.on_admitted(*a);
    if (auto* t = std::get_if<TextDelta>(&e)) {
      d.start();
      return d.on_piece(parser_.feed(std::move(t->text), t->tokens));
    }
    if (auto* end = std::get_if<GenerationEnd>(&e)) {
      d.start();
      return d.on_end(*end);
    }
    if (auto* f = std::get_if<GenerationFailed>(&e)) return d.on_error(f->error);
  }

  Meta meta_;
  AnswerParser parser_;
  ojson usage_;
  bool started_ = false, ended_ = false;
};

}  // namespace kamera
