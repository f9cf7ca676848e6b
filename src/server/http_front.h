// The HTTP/1.1 front of the server: an event-driven server on Boost.Asio with Boost.Beast's
// parser. One I/O thread holds every connection; nothing a client does with its socket can hold a
// thread:
//   - a connection cap (over it, a connection gets 503 and is closed);
//   - a deadline for the whole request head (a client that trickles bytes is cut off), for the
//     body, and for every write; keep-alive connections wait for their next request within the
//     head deadline;
//   - the head is inspected before any body byte is read: authentication, routing (404/405),
//     content type and the declared length are decided there, and a refused request is answered
//     and closed without reading its body;
//   - the body limit holds for Content-Length and chunked bodies alike (Beast counts the decoded
//     bytes as they arrive);
//   - cheap routes (/health, /metrics) are answered on the I/O thread, so they answer while every
//     worker is busy; the rest goes to a bounded pool of worker threads, whose handlers answer
//     through a Responder (from any thread) and are told when the client goes away;
//   - under the global cap, per-peer shares (server/peer_limits.h): connections of one address
//     and of one client, and requests of one client being handled at once;
//   - malformed framing is answered 400 at once: a bare LF ending a head line, an obs-fold
//     (a header line continued on the next), a chunked body that does not parse (a chunk size
//     past 64 bits); a Transfer-Encoding other than "chunked" alone is answered 501;
//   - a client that half-closes its socket after its request (shutdown(SHUT_WR)) still gets its
//     answer; one that closed it is told apart by an interim "100 Continue" (a closed socket
//     answers it with a reset) and its request is cancelled.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kamera {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // as sent: "GET", "POST", ...
  std::string path;     // the target without its query
  HttpHeaders headers;  // names in lower case, values trimmed, in order
  // Raw values of Authorization headers, before whitespace trimming.
  std::vector<std::string> raw_authorization;
  std::string peer;  // remote address
  int version = 11;  // 10 for HTTP/1.0, 11 for HTTP/1.1
  // Who the request speaks for (an API key, or the address), set by the Inspect callback: the
  // front's per-client shares count it. Empty: none (the request is counted by address only).
  std::string client;
  // Set by the Inspect callback too: the route the request goes to (-1: none yet) and its path's
  // captures ([0]: the whole path), so that the handler's dispatch does not match it again.
  int route = -1;
  std::vector<std::string> params;
  bool has_body = false;        // a Content-Length > 0 or a chunked body follows the head
  int64_t content_length = -1;  // -1: none or chunked
  std::string body;
  // First value of a header (name in lower case); empty when absent.
  std::string header(std::string_view name) const;
  int count(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;
  bool close = false;  // close the connection after it
};

// Answers one request, from any thread. reply() or begin_stream() is called once; write() and
// end() follow begin_stream().
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void reply(HttpResponse r) = 0;
  virtual void begin_stream(int status, const std::string& content_type, HttpHeaders headers) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // The client closed its connection, or a write timed out.
  virtual bool gone() const = 0;
  // fn runs once when the client goes away (at once when it already has), on the I/O thread.
  virtual void on_gone(std::function<void()> fn) = 0;
};

struct FrontOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int max_connections = 1024;
  int workers = 8;              // threads running dispatched handlers
  int max_pending = 256;        // dispatched requests waiting for a worker before 503
  int head_timeout_ms = 10000;  // a request head, from the first wait for it (idle included)
  int body_timeout_ms = 60000;
  int write_timeout_ms = 30000;
  size_t max_head_bytes = 16 << 10;
  size_t max_body_bytes = 32 << 20;
  // Per peer, under max_connections: open connections of one address, and of one client.
  int max_peer_connections = 256;
  int max_client_inflight = 128;  // requests of one client read or handled at once
  // Told the status of every answer the front gives on its own (its refusals: 400, 413, 429,
  // 431, 501, 503), so that the server's counters include them.
  std::function<void(int status)> on_own_answer;
};

class HttpFront {
 public:
  // On the I/O thread, once a head is read: a response to answer at once (a refusal, or a cheap
  // route), or nullopt to read the body and dispatch the request.
  // It may set head.client.
  using Inspect = std::function<std::optional<HttpResponse>(HttpRequest& head)>;
  // On a worker thread, with the whole request.
  using Dispatch = std::function<void(HttpRequest req, std::shared_ptr<Responder> out)>;

  struct Stats {
    int64_t open = 0, accepted = 0, refused = 0, timeouts = 0, too_large = 0, peer_refused = 0;
  };

  static Result<std::unique_ptr<HttpFront>> bind(const FrontOptions& opts, Inspect inspect,
                                                 Dispatch dispatch);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  int port() const;
  void start();  // the I/O thread and the workers
  void stop();   // closes every connection and joins the threads
  Stats stats() const;

  struct Impl;

 private:
  explicit HttpFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reason phrase of a status ("Not Found").
const char* http_reason(int status);

// Equal strings, in a time that depends only on their lengths (API keys).
bool same_secret(std::string_view a, std::string_view b);

}  // namespace kamera
