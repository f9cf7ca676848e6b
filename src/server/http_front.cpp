#include "server/http_front.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "core/log.h"
#include "server/peer_limits.h"
#include "server/worker_pool.h"

namespace kamera {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Values of `name:` lines in a raw head, untrimmed at their end.
std::vector<std::string> raw_values(std::string_view head, std::string_view name) {
  std::vector<std::string> out;
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t start = at + 2, end = head.find("\r\n", start);
    const std::string_view line = head.substr(start, end - start);
    if (line.size() > name.size() && line[name.size()] == ':' &&
        lower(line.substr(0, name.size())) == name) {
      size_t v = name.size() + 1;
      while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
      out.emplace_back(line.substr(v));
    }
    at = end;
  }
  return out;
}

// Whether a header line of the head continues the line before it (obs-fold, RFC 9112 5.2:
// refused, since proxies may join or split it otherwise).
bool has_obs_fold(std::string_view head) {
  for (size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();
       at = head.find("\r\n", at + 2))
    if (head[at + 2] == ' ' || head[at + 2] == '\t') return true;
  return false;
}

// Whether the Transfer-Encoding headers are something other than one "chunked" (gzip, a list):
// 501, since the body would be read as chunked and the other coding ignored.
bool unsupported_coding(const HttpHeaders& headers) {
  int n = 0;
  bool chunked = false;
  for (const auto& [k, v] : headers) {
    if (k != "transfer-encoding") continue;
    ++n;
    chunked = lower(v) == "chunked";
  }
  return n > 1 || (n == 1 && !chunked);
}

// A refusal decided by the front itself, as the server's JSON error.
HttpResponse front_error(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = fmt::format(R"({{"error":{{"message":"{}","type":"{}","code":"{}"}}}})", message,
                       status < 500 ? "invalid_request_error" : "server_error", code);
  if (status == 503 || status == 429) r.headers.push_back({"Retry-After", "1"});
  return r;
}

std::string serialize_head(int status, const std::string& content_type, const HttpHeaders& hs,
                           const std::string* length, bool close) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, http_reason(status));
  if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : hs) out += k + ": " + v + "\r\n";
  out += length ? "Content-Length: " + *length + "\r\n" : "Transfer-Encoding: chunked\r\n";
  if (close) out += "Connection: close\r\n";
  return out + "\r\n";
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

int HttpRequest::count(std::string_view name) const {
  int n = 0;
  for (const auto& h : headers) n += h.first == name;
  return n;
}

const char* http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Unknown";
}

namespace {
class Session;
}  // namespace

struct HttpFront::Impl {
  FrontOptions opts;
  Inspect inspect;
  Dispatch dispatch;
  std::atomic<int64_t> open{0}, accepted{0}, refused{0}, timeouts{0}, too_large{0}, peer_refused{0};
  int bound_port = 0;
  std::unique_ptr<WorkerPool> workers;
  std::unique_ptr<PeerLimits> peers;
  // The sockets of the open sessions, so that stop() can end them (a session's socket lives as
  // long as the I/O context's pending handlers hold it).
  std::mutex live_mu;
  std::unordered_set<Session*> live;

  // An answer of the front's own, counted.
  HttpResponse own(int status, const std::string& code, const std::string& message) {
    if (opts.on_own_answer) opts.on_own_answer(status);
    return front_error(status, code, message);
  }
  // Sessions die with the I/O context (its pending handlers hold them): declared after what
  // they use.
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::thread io_thread;

  void accept();
  void on_accept(beast::error_code ec, tcp::socket s);
};

namespace {

class Session;

// A Responder bound to one request of a session (a later request on the same connection is not
// answered by it).
class SessionResponder : public Responder {
 public:
  SessionResponder(std::shared_ptr<Session> s, uint64_t no) : s_(std::move(s)), no_(no) {}
  void reply(HttpResponse r) override;
  void begin_stream(int status, const std::string& content_type, HttpHeaders headers) override;
  void write(std::string data) override;
  void end() override;
  bool gone() const override;
  void on_gone(std::function<void()> fn) override;

 private:
  std::shared_ptr<Session> s_;
  uint64_t no_;
};

}  // namespace

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `peer`: the remote address, already counted in f.peers.
  Session(tcp::socket s, HttpFront::Impl& f, std::string peer)
      : stream_(std::move(s)), f_(f), peer_(std::move(peer)), gone_timer_(stream_.get_executor()) {
    ++f_.open;
    std::lock_guard<std::mutex> lock(f_.live_mu);
    f_.live.insert(this);
  }
  ~Session() {
    {
      std::lock_guard<std::mutex> lock(f_.live_mu);
      f_.live.erase(this);
    }
    --f_.open;
    end_request();
    if (!client_.empty()) f_.peers->close_client(client_);
    f_.peers->close_address(peer_);
  }
  void start() { read_head(); }
  // From HttpFront::stop(), once no thread runs the I/O context: the client reads an end of
  // stream at once (the socket itself is closed when the context drops the session).
  void end_socket() {
    beast::error_code ec;
    if (stream_.socket().is_open()) stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  // ---- called through a SessionResponder (posted to the I/O thread) ------------------------
  void post(std::function<void(Session&)> fn) {
    net::post(f_.ioc, [self = shared_from_this(), fn = std::move(fn)] { fn(*self); });
  }
  bool current(uint64_t no) const { return no == req_no_ && responding_ && !closed_; }
  void reply(uint64_t no, HttpResponse r);
  void begin_stream(uint64_t no, int status, const std::string& type, HttpHeaders hs);
  void write_chunk(uint64_t no, std::string data);
  void end_stream(uint64_t no);
  void add_on_gone(uint64_t no, std::function<void()> fn);
  std::atomic<bool> gone_{false};

 private:
  void read_head();
  void scan_head(size_t from);
  void on_head(size_t n);
  void refuse(int status, const std::string& code, const std::string& message);
  void fill_request(std::string_view head);
  bool admit_client();
  void end_request();
  void on_peer_eof(uint64_t no);
  void poll_closed(uint64_t no);
  void read_body();
  void on_body(beast::error_code ec);
  void dispatch();
  void watch_gone();
  void answer(HttpResponse r);  // on the I/O thread, for the current request
  void send(std::string bytes, bool last);
  void do_write();
  void on_write(beast::error_code ec);
  void response_done();
  void drain(size_t dropped);
  void close();

  beast::tcp_stream stream_;
  HttpFront::Impl& f_;
  std::string peer_;
  std::string client_;     // the client its first request named (its connection share)
  std::string inflight_;   // the client of the request being handled (its request share)
  bool peer_eof_ = false;  // the client sent FIN while a request was handled
  int version_ = 11;       // of the current request
  net::steady_timer gone_timer_;
  std::array<char, 4096> read_buf_;
  std::string head_buf_;
  beast::flat_buffer body_buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest req_;
  uint64_t req_no_ = 0;
  bool head_method_ = false, keep_alive_ = true, close_after_ = false;
  bool responding_ = false, streaming_ = false, last_queued_ = false, writing_ = false;
  bool closed_ = false;
  std::deque<std::string> out_;
  std::vector<std::function<void()>> on_gone_;
};

void Session::read_head() {
  head_method_ = false;
  parser_.emplace();
  parser_->header_limit(uint32_t(f_.opts.max_head_bytes));
  parser_->body_limit(f_.opts.max_body_bytes);
  // Bytes already read past the previous request (pipelining) start the next head.
  head_buf_.assign(static_cast<const char*>(body_buf_.data().data()), body_buf_.size());
  body_buf_.consume(body_buf_.size());
  stream_.expires_after(std::chrono::milliseconds(f_.opts.head_timeout_ms));
  scan_head(0);
}

// Looks for the end of the head from byte `from` on: "\r\n\r\n", or a bare LF, which is never
// valid HTTP (answered 400 at once rather than after the head deadline); reads more until the
// head limit.
void Session::scan_head(size_t from) {
  for (size_t i = from; i < head_buf_.size(); ++i) {
    if (head_buf_[i] != '\n') continue;
    if (i == 0 || head_buf_[i - 1] != '\r')
      return refuse(400, "malformed_http", "a line of the request head ends in a bare LF");
    if (i >= 3 && head_buf_[i - 2] == '\n' && head_buf_[i - 3] == '\r') return on_head(i + 1);
  }
  if (head_buf_.size() >= f_.opts.max_head_bytes)
    return refuse(431, "head_too_large", "the request head is too large");
  stream_.async_read_some(net::buffer(read_buf_),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            if (ec == beast::error::timeout) ++self->f_.timeouts;
                            if (ec) return self->close();
                            const size_t old = self->head_buf_.size();
                            self->head_buf_.append(self->read_buf_.data(), n);
                            self->scan_head(old);
                          });
}

void Session::refuse(int status, const std::string& code, const std::string& message) {
  close_after_ = true;
  answer(f_.own(status, code, message));
}

void Session::on_head(size_t n) {
  beast::error_code ec;
  parser_->put(net::buffer(head_buf_.data(), n), ec);
  if (ec == http::error::body_limit) {  // a declared Content-Length over the limit
    ++f_.too_large;
    return refuse(413, "body_too_large",
                  fmt::format("the request body exceeds {} bytes", f_.opts.max_body_bytes));
  }
  const std::string_view head(head_buf_.data(), n);
  if (ec || !parser_->is_header_done() || has_obs_fold(head))
    return refuse(400, "malformed_http", "malformed HTTP request");
  // The rest of what was read belongs to the body (or the next request).
  if (const size_t extra = head_buf_.size() - n; extra > 0) {  // (memcpy of 0 from null is UB)
    auto rest = body_buf_.prepare(extra);
    std::memcpy(rest.data(), head_buf_.data() + n, extra);
    body_buf_.commit(extra);
  }
  fill_request(head);
  if (unsupported_coding(req_.headers))
    return refuse(501, "unsupported_transfer_encoding",
                  "Transfer-Encoding other than chunked alone is not supported");
  if (auto early = f_.inspect(req_)) {
    if (req_.has_body) early->close = true;  // its body is never read
    return answer(std::move(*early));
  }
  if (!admit_client()) return;
  if (!req_.has_body) return dispatch();
  read_body();
}

// The shares of the request's client: its connections (the connection counts for the client its
// first request named) and its requests in flight.
bool Session::admit_client() {
  if (req_.client.empty()) return true;
  if (client_.empty()) {
    client_ = req_.client;
    if (!f_.peers->open_client(client_)) {
      ++f_.peer_refused;
      refuse(
          503, "too_many_connections",
          fmt::format("this client holds more than {} connections", f_.peers->max_connections()));
      return false;
    }
  }
  if (!f_.peers->begin_request(req_.client)) {
    ++f_.peer_refused;
    close_after_ = close_after_ || req_.has_body;  // its body is never read
    answer(f_.own(429, "quota_exceeded",
                  fmt::format("this client already has {} requests in flight (its share)",
                              f_.peers->max_inflight())));
    return false;
  }
  inflight_ = req_.client;
  return true;
}

void Session::end_request() {
  if (inflight_.empty()) return;
  f_.peers->end_request(inflight_);
  inflight_.clear();
}

void Session::fill_request(std::string_view head) {
  const auto& h = parser_->get();
  req_ = HttpRequest{};
  req_.method = std::string(h.method_string());
  const std::string_view target(h.target().data(), h.target().size());
  req_.path = std::string(target.substr(0, target.find('?')));
  for (const auto& field : h)
    req_.headers.emplace_back(lower({field.name_string().data(), field.name_string().size()}),
                              std::string(field.value()));
  req_.raw_authorization = raw_values(head, "authorization");
  req_.peer = peer_;
  req_.version = version_ = int(h.version());
  if (parser_->content_length()) req_.content_length = int64_t(*parser_->content_length());
  req_.has_body = parser_->chunked() || req_.content_length > 0;
  keep_alive_ = parser_->keep_alive();
  head_method_ = h.method() == http::verb::head;
  close_after_ = false;
}

void Session::read_body() {
  stream_.expires_after(std::chrono::milliseconds(f_.opts.body_timeout_ms));
  auto go = [self = shared_from_this()] {
    http::async_read(self->stream_, self->body_buf_, *self->parser_,
                     [self](beast::error_code ec, size_t) { self->on_body(ec); });
  };
  if (lower(req_.header("expect")) != "100-continue") return go();
  // The client waits for this before it sends the body.
  static const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(cont),
                   [self = shared_from_this(), go](beast::error_code ec, size_t) {
                     if (ec) return self->close();
                     go();
                   });
}

void Session::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    ++f_.too_large;
    return refuse(413, "body_too_large",
                  fmt::format("the request body exceeds {} bytes", f_.opts.max_body_bytes));
  }
  if (ec == beast::error::timeout) ++f_.timeouts;
  // A body that does not parse (a chunk size past 64 bits, a bad chunk line) is answered; a
  // connection that ended or timed out is closed.
  static const auto& http_errors = http::make_error_code(http::error::bad_chunk).category();
  if (ec && ec.category() == http_errors && ec != http::error::partial_message)
    return refuse(400, "malformed_http", "malformed HTTP body: " + ec.message());
  if (ec) return close();
  req_.body = parser_->release().body();
  dispatch();
}

}  // namespace

namespace {

void Session::dispatch() {
  ++req_no_;
  responding_ = true;
  auto out = std::make_shared<SessionResponder>(shared_from_this(), req_no_);
  watch_gone();
  auto task = [&f = f_, req = std::move(req_), out]() mutable {
    f.dispatch(std::move(req), std::move(out));
  };
  if (!f_.workers->try_post(std::move(task)))
    answer(f_.own(503, "busy", "the server is busy: every worker is taken"));
}

// While a handler works, a readable socket with nothing to read is a client that went away.
void Session::watch_gone() {
  stream_.socket().async_wait(
      tcp::socket::wait_read, [self = shared_from_this(), no = req_no_](beast::error_code ec) {
        if (ec || !self->current(no)) return;
        char c;
        const ssize_t n =
            ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) return;  // a pipelined request: read after this answer
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return self->watch_gone();
        if (n == 0) return self->on_peer_eof(no);
        self->close();
      });
}

// The client sent FIN while its request is handled: it half-closed its socket after the request
// (it still reads the answer), or it closed it. An interim "100 Continue" (which HTTP/1.1 clients
// skip) tells them apart without changing the answer: a closed socket replies with a reset, which
// poll_closed sees. HTTP/1.0 clients get no 1xx: their answer is written when it is ready.
void Session::on_peer_eof(uint64_t no) {
  peer_eof_ = true;
  if (req_no_ != no || !responding_ || version_ < 11) return;
  if (!streaming_ && !last_queued_ && out_.empty()) send("HTTP/1.1 100 Continue\r\n\r\n", false);
  poll_closed(no);
}

void Session::poll_closed(uint64_t no) {
  gone_timer_.expires_after(std::chrono::milliseconds(50));
  gone_timer_.async_wait([self = shared_from_this(), no](beast::error_code ec) {
    if (ec || !self->current(no)) return;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    const int fd = self->stream_.socket().native_handle();
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE)
      return self->close();
    self->poll_closed(no);
  });
}

void Session::answer(HttpResponse r) {
  responding_ = true;
  close_after_ = close_after_ || r.close || !keep_alive_;
  const std::string len = std::to_string(r.body.size());
  std::string bytes = serialize_head(r.status, r.content_type, r.headers, &len, close_after_);
  if (!head_method_) bytes += r.body;
  send(std::move(bytes), true);
}

void Session::reply(uint64_t no, HttpResponse r) {
  if (current(no) && !streaming_ && !last_queued_) answer(std::move(r));
}

void Session::begin_stream(uint64_t no, int status, const std::string& type, HttpHeaders hs) {
  if (!current(no) || streaming_ || last_queued_) return;
  streaming_ = true;
  close_after_ = close_after_ || !keep_alive_;
  send(serialize_head(status, type, hs, nullptr, close_after_), false);
}

void Session::write_chunk(uint64_t no, std::string data) {
  if (!current(no) || !streaming_ || last_queued_ || data.empty()) return;
  send(fmt::format("{:x}\r\n", data.size()) + data + "\r\n", false);
}

void Session::end_stream(uint64_t no) {
  if (current(no) && streaming_ && !last_queued_) send("0\r\n\r\n", true);
}

void Session::add_on_gone(uint64_t no, std::function<void()> fn) {
  if (closed_ || gone_) return fn();
  if (no == req_no_) on_gone_.push_back(std::move(fn));
}

void Session::send(std::string bytes, bool last) {
  out_.push_back(std::move(bytes));
  last_queued_ = last_queued_ || last;
  if (!writing_) do_write();
}

void Session::do_write() {
  writing_ = true;
  stream_.expires_after(std::chrono::milliseconds(f_.opts.write_timeout_ms));
  net::async_write(
      stream_, net::buffer(out_.front()),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void Session::on_write(beast::error_code ec) {
  writing_ = false;
  if (ec == beast::error::timeout) ++f_.timeouts;
  if (ec) return close();
  out_.pop_front();
  if (!out_.empty()) return do_write();
  if (last_queued_) response_done();
}

void Session::response_done() {
  responding_ = streaming_ = last_queued_ = false;
  on_gone_.clear();
  end_request();
  gone_timer_.cancel();
  if (close_after_ || peer_eof_) {  // a client that sent FIN sends no further request
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    return drain(0);
  }
  read_head();
}

// Reads and drops what the client still sends, briefly, so that the answer before a close is
// not lost to a reset; a client that keeps sending is cut off.
void Session::drain(size_t dropped) {
  if (dropped > (size_t(1) << 20)) return close();
  if (dropped == 0) stream_.expires_after(std::chrono::milliseconds(500));
  body_buf_.consume(body_buf_.size());
  stream_.async_read_some(body_buf_.prepare(64 << 10),
                          [self = shared_from_this(), dropped](beast::error_code ec, size_t n) {
                            if (ec) return self->close();
                            self->drain(dropped + n);
                          });
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  gone_ = true;
  end_request();
  gone_timer_.cancel();
  beast::error_code ec;
  stream_.socket().close(ec);
  auto fns = std::move(on_gone_);
  on_gone_.clear();
  for (auto& fn : fns) fn();
}

void SessionResponder::reply(HttpResponse r) {
  s_->post([no = no_, r = std::move(r)](Session& s) mutable { s.reply(no, std::move(r)); });
}

void SessionResponder::begin_stream(int status, const std::string& type, HttpHeaders hs) {
  s_->post([no = no_, status, type, hs = std::move(hs)](Session& s) mutable {
    s.begin_stream(no, status, type, std::move(hs));
  });
}

void SessionResponder::write(std::string data) {
  s_->post(
      [no = no_, d = std::move(data)](Session& s) mutable { s.write_chunk(no, std::move(d)); });
}

void SessionResponder::end() {
  s_->post([no = no_](Session& s) { s.end_stream(no); });
}

bool SessionResponder::gone() const {
  return s_->gone_.load();
}

void SessionResponder::on_gone(std::function<void()> fn) {
  s_->post(
      [no = no_, fn = std::move(fn)](Session& s) mutable { s.add_on_gone(no, std::move(fn)); });
}

}  // namespace

void HttpFront::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
    on_accept(ec, std::move(s));
  });
}

void HttpFront::Impl::on_accept(beast::error_code ec, tcp::socket s) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  if (!ec) {
    ++accepted;
    std::string peer = s.remote_endpoint(ec).address().to_string(ec);
    const bool full = open.load() >= opts.max_connections;
    if (full || !peers->open_address(peer)) {
      // best effort: a short answer, then the connection is closed
      ++(full ? refused : peer_refused);
      const std::string body =
          full ? R"({"error":{"message":"too many open connections","type":"server_error",)"
                 R"("code":"busy"}})"
               : R"({"error":{"message":"this address holds too many connections","type":)"
                 R"("server_error","code":"too_many_connections"}})";
      const std::string busy = fmt::format(
          "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: "
          "application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
          body.size(), body);
      if (opts.on_own_answer) opts.on_own_answer(503);
      (void)::send(s.native_handle(), busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      s.close(ec);
    } else {
      s.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(s), *this, std::move(peer))->start();
    }
  }
  accept();
}

HttpFront::HttpFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFront::~HttpFront() {
  stop();
}

Result<std::unique_ptr<HttpFront>> HttpFront::bind(const FrontOptions& opts, Inspect inspect,
                                                   Dispatch dispatch) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->inspect = std::move(inspect);
  impl->dispatch = std::move(dispatch);
  beast::error_code ec;
  const auto addr = net::ip::make_address(opts.host, ec);
  if (ec)
    return make_error(ErrorCode::InvalidArgument, "serve: '{}' is not an IP address", opts.host);
  const tcp::endpoint ep(addr, uint16_t(opts.port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(ErrorCode::InvalidArgument, "serve: cannot bind {}:{}: {}", opts.host,
                      opts.port, ec.message());
  impl->bound_port = impl->acceptor.local_endpoint().port();
  return std::unique_ptr<HttpFront>(new HttpFront(std::move(impl)));
}

int HttpFront::port() const {
  return impl_->bound_port;
}

void HttpFront::start() {
  Impl& f = *impl_;
  f.workers = std::make_unique<WorkerPool>(f.opts.workers, f.opts.max_pending);
  f.peers = std::make_unique<PeerLimits>(std::max(1, f.opts.max_peer_connections),
                                         std::max(1, f.opts.max_client_inflight));
  f.accept();
  f.io_thread = std::thread([&f] { f.ioc.run(); });
}

void HttpFront::stop() {
  Impl& f = *impl_;
  if (!f.io_thread.joinable()) return;
  // The acceptor is closed on the I/O thread while it runs; the close is waited for (a stop()
  // racing ahead of it left the port listening: connections were queued by the kernel and never
  // answered).
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> done = closed->get_future();
  net::post(f.ioc, [&f, closed] {
    beast::error_code ec;
    f.acceptor.close(ec);
    closed->set_value();
  });
  (void)done.wait_for(std::chrono::seconds(2));  // an I/O thread stuck longer: closed below
  if (f.workers) f.workers->stop();  // handlers running finish; waiting ones are dropped
  f.ioc.stop();
  f.io_thread.join();
  // No thread runs the context now: what it holds open is ended here. The clients of open
  // sessions (keep-alive ones waiting for their next request) read an end of stream at once.
  beast::error_code ec;
  f.acceptor.close(ec);
  std::lock_guard<std::mutex> lock(f.live_mu);
  for (Session* s : f.live) s->end_socket();
}

HttpFront::Stats HttpFront::stats() const {
  const Impl& f = *impl_;
  return {f.open.load(),     f.accepted.load(),  f.refused.load(),
          f.timeouts.load(), f.too_large.load(), f.peer_refused.load()};
}

}  // namespace kamera
