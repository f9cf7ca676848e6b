// A TLS client connection seen through a plain file descriptor: the Redis tier's TLS.
//
// Debian bookworm's hiredis is 0.14, which has no hiredis_ssl, but it can drive any connected
// socket (redisConnectFd). So the tier opens the TCP connection itself, runs the TLS handshake
// with OpenSSL (peer verified against the CA file or the system store, host name checked, SNI,
// optional client certificate), and hands hiredis one end of a socketpair. A pump thread moves
// bytes between the socketpair and the TLS session until either side closes.
//
//   hiredis ──plain──> fd ═socketpair═ pump thread ──TLS──> host:port
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace kamera {

struct TlsOptions {
  std::string ca_file;    // PEM bundle the server certificate must chain to; empty: system store
  std::string cert_file;  // client certificate (PEM) for servers that require one; optional
  std::string key_file;   // its private key (PEM)
};

class TlsTunnel {
 public:
  // Connects to host:port within timeout_ms (TCP and handshake each), verifies the peer and
  // starts the pump. Errors name the host and the step that failed (connect, certificate, ...).
  static Result<std::unique_ptr<TlsTunnel>> open(const std::string& host, int port,
                                                 const TlsOptions& opts, int timeout_ms);
  // Loads the CA and client certificate once, so a bad path is an error at start-up.
  static Status check(const TlsOptions& opts);
  ~TlsTunnel();  // stops the pump and closes everything but a released plain fd
  TlsTunnel(const TlsTunnel&) = delete;
  TlsTunnel& operator=(const TlsTunnel&) = delete;

  // The plain end, once: the caller owns it (hiredis closes it in redisFree).
  int release_plain_fd();

 private:
  TlsTunnel() = default;
  void pump();
  bool flush_to_tls(const char* data, size_t n);  // false: the TLS side is gone

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int tcp_ = -1;
  int plain_ = -1;  // handed to the caller
  int inner_ = -1;  // the pump's end of the socketpair
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace kamera
