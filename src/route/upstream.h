// One request of `kamera route` relayed to one backend, with what a client must not pay for a
// backend's faults or its own departure:
//   - a client that leaves closes the backend's connection at once (the server cancels the work
//     there, streamed or not: it watches its sockets);
//   - a backend silent for `timeout_s` (before its answer begins, or between two of its bytes)
//     is given up: the caller marks it down;
//   - an answer is checked before any byte of it reaches the client: a status a client can take
//     (200..599), a content type the servers answer (JSON; an event stream; Prometheus text on
//     /metrics), a non-streamed body of at most `max_reply_bytes` (a larger declared length is
//     refused unread, a longer body is cut off there) that parses as JSON. Anything else is
//     answered 502 `bad_gateway`, naming the backend and the fault.
// A non-streamed answer is held (to the bound) until it is checked whole: the front has no way
// to take back an answer it began, nor to slow a backend down to what the client reads, so an
// answer passed on as it arrives could neither be refused when it turns out not to be JSON nor
// kept from piling up in memory ahead of a slow client. Streams (text/event-stream) are passed on
// as they arrive; one that breaks ends with an error event.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_front.h"

namespace kamera {

struct UpstreamTarget {
  std::string host, url;  // url: http://HOST:PORT, named in answers (x-kamera-backend)
  int port = 0;
};

struct UpstreamLimits {
  int connect_timeout_ms = 1000;
  int timeout_s = 120;                        // the longest a backend may stay silent
  size_t max_reply_bytes = size_t(64) << 20;  // a non-streamed answer
};

struct Relayed {
  enum class Outcome {
    Answered,     // the client has the backend's answer (a reply, or a whole stream)
    BadReply,     // the answer was not one a server gives: the client got 502 bad_gateway
    ClientGone,   // the client left: the backend's connection was closed
    Unreachable,  // failed before anything reached the client: another backend may answer
    TimedOut,     // silent for timeout_s before anything reached the client: likewise
    MidStream,    // failed after the stream began: the client's stream ended with an error event
  } outcome = Outcome::Answered;
  bool timed_out = false;  // the backend went silent (TimedOut, or MidStream by silence)
  std::string why;         // what went wrong, for the log and the answer
};

// Sends `req` (method, path, body) with `headers` to `to` and answers `out` with what comes back.
// `record` is called once with the outcome before the client's answer ends (the router's books
// are kept by then: a client reading the router's state after its answer sees this relay).
Relayed relay(const UpstreamTarget& to, const HttpRequest& req, const HttpHeaders& headers,
              const UpstreamLimits& limits, const std::shared_ptr<Responder>& out,
              const std::function<void(const Relayed&)>& record);

// Why an answer's head is not one a server gives (nullopt: it is): its status, its content type
// for `path`.
std::optional<std::string> bad_reply_head(int status, std::string_view content_type,
                                          std::string_view path);
// Why a non-streamed body is not one a server gives (nullopt: it is). `head`: a HEAD request.
std::optional<std::string> bad_reply_body(std::string_view content_type, std::string_view body,
                                          bool head);

}  // namespace kamera
