#include "store/tls_tunnel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace kamera {

namespace {

using Clock = std::chrono::steady_clock;

std::string ssl_error_text() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return errno ? std::strerror(errno) : "connection closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, ms_left(deadline)) == 1;
}

// A non-blocking TCP connection to host:port, made within the deadline; -1 with why on failure.
int tcp_connect(const std::string& host, int port, Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    *why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    set_nonblocking(fd);
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      socklen_t len = sizeof err;
      err = wait_fd(fd, POLLOUT, deadline) ? 0 : ETIMEDOUT;
      if (err == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      *why = std::strerror(err);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The client context: TLS 1.2 or later, the peer verified, an optional client certificate.
Result<SSL_CTX*> client_context(const TlsOptions& o) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) return make_error(ErrorCode::Internal, "TLS: {}", ssl_error_text());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const bool ca = o.ca_file.empty()
                      ? SSL_CTX_set_default_verify_paths(ctx) == 1
                      : SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) == 1;
  std::string bad = ca ? "" : "CA file '" + o.ca_file + "'";
  if (bad.empty() && !o.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(ctx) != 1))
    bad = "client certificate '" + o.cert_file + "' / key '" + o.key_file + "'";
  if (!bad.empty()) {
    const std::string why = ssl_error_text();
    SSL_CTX_free(ctx);
    return make_error(ErrorCode::InvalidArgument, "TLS: cannot load the {}: {}", bad, why);
  }
  return ctx;
}

}  // namespace

Status TlsTunnel::check(const TlsOptions& opts) {
  KAMERA_ASSIGN_OR_RETURN(SSL_CTX * ctx, client_context(opts));
  SSL_CTX_free(ctx);
  return Status::Ok();
}

Result<std::unique_ptr<TlsTunnel>> TlsTunnel::open(const std::string& host, int port,
                                                   const TlsOptions& opts, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_ptr<TlsTunnel> t(new TlsTunnel());
  KAMERA_ASSIGN_OR_RETURN(t->ctx_, client_context(opts));
  std::string why;
  t->tcp_ = tcp_connect(host, port, deadline, &why);
  if (t->tcp_ < 0) return make_error(ErrorCode::Io, "TLS {}:{}: connect: {}", host, port, why);
  t->ssl_ = SSL_new(t->ctx_);
  SSL_set_fd(t->ssl_, t->tcp_);
  SSL_set_mode(t->ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  X509_VERIFY_PARAM* param = SSL_get0_param(t->ssl_);
  if (is_ip_literal(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    SSL_set_tlsext_host_name(t->ssl_, host.c_str());
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  for (;;) {
    const int r = SSL_connect(t->ssl_);
    if (r == 1) break;
    const int e = SSL_get_error(t->ssl_, r);
    const short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev && wait_fd(t->tcp_, ev, deadline)) continue;
    const long v = SSL_get_verify_result(t->ssl_);
    if (v != X509_V_OK)
      return make_error(ErrorCode::Io, "TLS {}:{}: certificate refused: {}", host, port,
                        X509_verify_cert_error_string(v));
    return make_error(ErrorCode::Io, "TLS {}:{}: handshake: {}", host, port,
                      ev ? std::string("timed out") : ssl_error_text());
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0 ||
      ::pipe2(t->wake_, O_CLOEXEC) != 0)
    return make_error(ErrorCode::Io, "TLS {}:{}: socketpair: {}", host, port, std::strerror(errno));
  t->plain_ = pair[0];
  t->inner_ = pair[1];
  set_nonblocking(t->inner_);
  t->thread_ = std::thread([p = t.get()] { p->pump(); });
  return t;
}

int TlsTunnel::release_plain_fd() {
  const int fd = plain_;
  plain_ = -1;
  return fd;
}

TlsTunnel::~TlsTunnel() {
  if (thread_.joinable()) {
    const char c = 0;
    [[maybe_unused]] const ssize_t n = ::write(wake_[1], &c, 1);
    thread_.join();
  }
  if (ssl_) {
    if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);  // best effort close_notify
    SSL_free(ssl_);
  }
  if (ctx_) SSL_CTX_free(ctx_);
  for (int fd : {tcp_, plain_, inner_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
}

// Moves bytes both ways until hiredis closes its end, the server closes, or the destructor
// wakes it. Plain bytes are read only when the previous ones are written to TLS (and the other
// way round, up to 1 MiB), so memory stays bounded.
void TlsTunnel::pump() {
  std::string to_plain;
  char buf[16384];
  bool tls_wants_write = false, tls_open = true;
  while (tls_open || !to_plain.empty()) {
    pollfd p[3] = {{wake_[0], POLLIN, 0},
                   {inner_, short((tls_open ? POLLIN : 0) | (to_plain.empty() ? 0 : POLLOUT)), 0},
                   {tcp_, short(tls_wants_write ? POLLIN | POLLOUT : POLLIN), 0}};
    const bool pending = tls_open && to_plain.size() < (1u << 20) && SSL_pending(ssl_) > 0;
    if (::poll(p, tls_open ? 3 : 2, pending ? 0 : -1) < 0 && errno != EINTR) return;
    if (p[0].revents) return;
    if (tls_open && (p[1].revents & (POLLIN | POLLHUP))) {
      const ssize_t n = ::read(inner_, buf, sizeof buf);
      if (n == 0) return;  // hiredis closed its end
      if (n > 0 && !flush_to_tls(buf, size_t(n))) tls_open = false;
    }
    while (tls_open && to_plain.size() < (1u << 20)) {
      const int r = SSL_read(ssl_, buf, sizeof buf);
      if (r > 0) {
        to_plain.append(buf, size_t(r));
        continue;
      }
      const int e = SSL_get_error(ssl_, r);
      tls_wants_write = e == SSL_ERROR_WANT_WRITE;
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) tls_open = false;
      break;
    }
    if (!to_plain.empty()) {
      const ssize_t n = ::write(inner_, to_plain.data(), to_plain.size());
      if (n > 0) to_plain.erase(0, size_t(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    }
  }
  ::shutdown(inner_, SHUT_RDWR);  // the server closed: hiredis sees end of file
}

bool TlsTunnel::flush_to_tls(const char* data, size_t n) {
  while (n > 0) {
    const int r = SSL_write(ssl_, data, int(n));
    if (r > 0) {
      data += r;
      n -= size_t(r);
      continue;
    }
    const int e = SSL_get_error(ssl_, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
    pollfd p[2] = {{tcp_, short(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0},
                   {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return false;
    if (p[1].revents) return false;
  }
  return true;
}

}  // namespace kamera
