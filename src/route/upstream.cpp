#include "route/upstream.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

namespace kamera {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// What the relay saw of the backend's answer, as it arrived.
struct Seen {
  int status = 0;
  std::string ctype;
  bool streaming = false, began = false;  // began: the stream's head reached the client
  std::string body;                       // a non-streamed answer, held to be checked
  std::optional<std::string> bad;         // why the answer is refused
  Clock::time_point last;                 // the last byte from the backend (or the send)
};

std::string error_event(const std::string& message) {
  return "data: " +
         json{{"error",
               {{"message", message},
                {"type", "server_error"},
                {"code", "backend_failed"},
                {"param", nullptr}}}}
             .dump() +
         "\n\n";
}

HttpResponse bad_gateway(const UpstreamTarget& to, const std::string& why) {
  HttpResponse r;
  r.status = 502;
  r.body = json{{"error",
                 {{"message",
                   fmt::format("the backend {} answered what no server answers: {}", to.url, why)},
                  {"type", "server_error"},
                  {"code", "bad_gateway"},
                  {"param", nullptr}}}}
               .dump();
  r.headers = {{"x-kamera-backend", to.url}};
  return r;
}

// The head's checks, on the relay's thread: a refused head stops the transfer (returns false).
bool take_head(const httplib::Response& res, const HttpRequest& req, const UpstreamLimits& lim,
               const UpstreamTarget& to, Responder& out, Seen& s) {
  s.last = Clock::now();
  s.status = res.status;
  s.ctype = res.get_header_value("Content-Type");
  s.streaming = starts_with(lower(s.ctype), "text/event-stream");
  s.bad = bad_reply_head(s.status, s.ctype, req.path);
  if (!s.bad && !s.streaming && res.has_header("Content-Length")) {
    const uint64_t n = std::strtoull(res.get_header_value("Content-Length").c_str(), nullptr, 10);
    if (n > lim.max_reply_bytes)
      s.bad = fmt::format("a body of {} bytes, over the router's bound of {} (--max-reply-mb)", n,
                          lim.max_reply_bytes);
  }
  if (s.bad) return false;
  if (s.streaming) {
    out.begin_stream(s.status, s.ctype, {{"x-kamera-backend", to.url}});
    s.began = true;
  }
  return true;
}

bool take_bytes(const char* data, size_t n, const UpstreamLimits& lim, Responder& out, Seen& s) {
  s.last = Clock::now();
  if (s.streaming) {
    out.write(std::string(data, n));
  } else if (s.body.size() + n > lim.max_reply_bytes) {
    s.bad = fmt::format("a body longer than the router's bound of {} bytes (--max-reply-mb)",
                        lim.max_reply_bytes);
    return false;
  } else {
    s.body.append(data, n);
  }
  return !out.gone();
}

// A whole non-streamed answer: checked, then passed on.
template <class Finish>
Relayed answer(const UpstreamTarget& to, const HttpRequest& req, const httplib::Response& res,
               Seen& s, Responder& out, const Finish& finish) {
  if (auto why = bad_reply_body(s.ctype, s.body, req.method == "HEAD")) {
    auto v = finish(Relayed{Relayed::Outcome::BadReply, false, *why});
    out.reply(bad_gateway(to, *why));
    return v;
  }
  HttpResponse reply;
  reply.status = s.status;
  reply.content_type = s.ctype;
  reply.body = std::move(s.body);
  reply.headers = {{"x-kamera-backend", to.url}};
  for (const char* h : {"Retry-After", "WWW-Authenticate", "Allow"})
    if (res.has_header(h)) reply.headers.push_back({h, res.get_header_value(h)});
  auto v = finish(Relayed{});
  out.reply(std::move(reply));
  return v;
}

}  // namespace

std::optional<std::string> bad_reply_head(int status, std::string_view content_type,
                                          std::string_view path) {
  if (status < 200 || status > 599) return fmt::format("status {}", status);
  const std::string t = lower(content_type);
  if (starts_with(t, "application/json") || starts_with(t, "text/event-stream") ||
      (path == "/metrics" && starts_with(t, "text/plain")))
    return std::nullopt;
  return fmt::format("content type \"{}\"", content_type.substr(0, 100));
}

std::optional<std::string> bad_reply_body(std::string_view content_type, std::string_view body,
                                          bool head) {
  if (head || !starts_with(lower(content_type), "application/json")) return std::nullopt;
  if (!json::accept(body)) return fmt::format("a body of {} bytes that is not JSON", body.size());
  return std::nullopt;
}

Relayed relay(const UpstreamTarget& to, const HttpRequest& req, const HttpHeaders& headers,
              const UpstreamLimits& lim, const std::shared_ptr<Responder>& out,
              const std::function<void(const Relayed&)>& record) {
  auto cli = std::make_shared<httplib::Client>(to.host, to.port);
  cli->set_connection_timeout(lim.connect_timeout_ms / 1000,
                              (lim.connect_timeout_ms % 1000) * 1000);
  cli->set_read_timeout(lim.timeout_s, 0);
  cli->set_write_timeout(30, 0);
  // The client leaving closes the backend's connection, also while no byte is due (a
  // non-streamed answer is computed whole before it is sent).
  out->on_gone([weak = std::weak_ptr<httplib::Client>(cli)] {
    if (auto c = weak.lock()) c->stop();
  });
  httplib::Request r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  for (const auto& [k, v] : headers) r.headers.emplace(k, v);
  Seen s;
  r.response_handler = [&](const httplib::Response& res) {
    return take_head(res, req, lim, to, *out, s);
  };
  r.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    return take_bytes(data, n, lim, *out, s);
  };
  // The books are kept before the client hears the end: a client that reads the router's state
  // after its answer ended sees this relay in it.
  const auto finish = [&](Relayed v) {
    record(v);
    return v;
  };
  if (out->gone()) return finish({Relayed::Outcome::ClientGone, false, "the client left"});
  s.last = Clock::now();
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli->send(r, res, err);
  if (s.bad) {
    auto v = finish({Relayed::Outcome::BadReply, false, *s.bad});
    out->reply(bad_gateway(to, *s.bad));
    return v;
  }
  if (ok && !s.streaming) return answer(to, req, res, s, *out, finish);
  if (ok) {
    auto v = finish({});
    out->end();
    return v;
  }
  if (out->gone()) {
    auto v = finish({Relayed::Outcome::ClientGone, false, "the client left"});
    if (s.began) out->end();
    return v;
  }
  // A read that failed after the whole timeout without a byte: the backend went silent.
  const bool silent = err == httplib::Error::Read &&
                      Clock::now() - s.last >= std::chrono::milliseconds(lim.timeout_s * 900);
  const std::string why = silent ? fmt::format("no answer for {} s", lim.timeout_s)
                                 : std::string(httplib::to_string(err));
  if (!s.began)
    return finish(
        {silent ? Relayed::Outcome::TimedOut : Relayed::Outcome::Unreachable, silent, why});
  auto v = finish({Relayed::Outcome::MidStream, silent, why});
  out->write(error_event(fmt::format("the backend {} failed mid-stream ({})", to.url, why)));
  out->end();
  return v;
}

}  // namespace kamera
