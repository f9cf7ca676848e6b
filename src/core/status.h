// Expected failures (bad files, full pools, bad arguments) travel as values, never as exceptions
// across a public API. Invariant breaks use KAMERA_ASSERT and abort.
//
// An Error carries a code (what kind of failure, for callers that branch on it: the server maps
// it to an HTTP status, the C API returns it) and a message (for people: names the input and
// what is wrong with it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace kamera {

// Stable numeric values: the C API (include/kamera.h) returns them as they are.
enum class ErrorCode : int32_t {
  InvalidArgument = 1,  // the caller's input is wrong (range, shape, unknown option)
  NotFound = 2,         // a named thing (file, chunk, sequence, window) does not exist
  OutOfMemory = 3,      // the KV pool or an allocation is full; recoverable, nothing changed
  CorruptData = 4,      // a file or stored entry is malformed, truncated or fails its checksum
  Unsupported = 5,      // well-formed but not implemented (a tensor type, an architecture)
  Internal = 6,         // a numerical or library failure that is not the caller's fault
  Io = 7,               // the operating system refused a read or write
};

// "invalid_argument", "not_found", ... (stable; used in JSON and metrics).
const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::Internal;
  std::string message;
};

template <class... Args>
Error make_error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Error{code, fmt::format(f, std::forward<Args>(args)...)};
}

// The same error with "context: " in front of its message (the code is kept).
inline Error with_context(const Error& e, std::string_view context) {
  return Error{e.code, fmt::format("{}: {}", context, e.message)};
}

// A value or an error (a small std::expected for C++20).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }
  ErrorCode code() const { return std::get<1>(v_).code; }
  const std::string& message() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Success or an error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  ErrorCode code() const { return error_.code; }
  const std::string& message() const { return error_.message; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "kamera: internal invariant broken: %s (%s:%d)\n", expr, file, line);
  std::abort();
}

}  // namespace kamera

#define KAMERA_ASSERT(cond) ((cond) ? (void)0 : ::kamera::assert_fail(#cond, __FILE__, __LINE__))

// Returns the error of a Result/Status-returning expression from the enclosing function.
#define KAMERA_TRY(expr)                               \
  do {                                                 \
    auto&& kamera_try_ = (expr);                       \
    if (!kamera_try_.ok()) return kamera_try_.error(); \
  } while (0)

// `KAMERA_ASSIGN_OR_RETURN(auto x, f());` declares (or assigns) x from f()'s value, or returns
// f()'s error from the enclosing function.
#define KAMERA_CONCAT_INNER_(a, b) a##b
#define KAMERA_CONCAT_(a, b) KAMERA_CONCAT_INNER_(a, b)
#define KAMERA_ASSIGN_OR_RETURN(lhs, expr) \
  KAMERA_ASSIGN_OR_RETURN_IMPL_(KAMERA_CONCAT_(kamera_aor_, __LINE__), lhs, expr)
#define KAMERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.error();                  \
  lhs = std::move(tmp).value()
