// Expected failures (bad files, full pools, bad arguments) travel as values, never as exceptions
// across a public API. Invariant breaks use KAMERA_ASSERT and abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace kamera {

struct Error {
  std::string message;
};

template <class... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

// A value or an error message (a small std::expected for C++20).
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
  const std::string& message() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Success or an error message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
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

// Propagate an error from a Result/Status-returning expression.
#define KAMERA_TRY(expr)                               \
  do {                                                 \
    auto&& kamera_try_ = (expr);                       \
    if (!kamera_try_.ok()) return kamera_try_.error(); \
  } while (0)
