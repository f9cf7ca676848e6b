#include "server/json_fields.h"

#include <fmt/format.h>

#include <atomic>

namespace kamera {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::CorruptData:
      return 400;
    case ErrorCode::NotFound:
      return 404;
    case ErrorCode::Unsupported:
      return 501;
    case ErrorCode::OutOfMemory:
      return 503;
    case ErrorCode::Internal:
    case ErrorCode::Io:
      return 500;
  }
  return 500;
}

namespace {

// The documented error.code of a failed operation (docs/SERVER.md, "Validation").
const char* api_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::CorruptData:  // what the client sent is malformed: its argument is invalid
      return "invalid_argument";
    case ErrorCode::NotFound:
      return "not_found";
    case ErrorCode::OutOfMemory:
      return "capacity";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::Internal:
    case ErrorCode::Io:
      return "internal";
  }
  return "internal";
}

}  // namespace

HttpError http_error(const Error& e) {
  const int status = http_status(e.code);
  return {status, e.message,
          status == 404  ? "not_found_error"
          : status < 500 ? "invalid_request_error"
                         : "server_error",
          api_code(e.code)};
}

json error_body(const HttpError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

// Thrown from the parser's callback to stop at the first value past a limit.
struct JsonLimitHit {
  HttpError error;
};

std::atomic<int64_t> parses{0};

template <class J>
std::optional<HttpError> parse_limited(std::string_view body, const JsonLimits& limits, J& out) {
  parses.fetch_add(1, std::memory_order_relaxed);
  int64_t values = 0;
  // depth: the containers open around the event (0 for the top-level value).
  auto bounded = [&](int depth, typename J::parse_event_t event, J&) {
    const bool opens =
        event == J::parse_event_t::object_start || event == J::parse_event_t::array_start;
    if (opens && depth + 1 > limits.max_depth)
      throw JsonLimitHit{{400,
                          fmt::format("the JSON body nests arrays and objects deeper than {} "
                                      "levels (the limit)",
                                      limits.max_depth),
                          "invalid_request_error", "json_too_deep"}};
    if (event != J::parse_event_t::object_end && event != J::parse_event_t::array_end &&
        ++values > limits.max_values)
      throw JsonLimitHit{
          {400,
           fmt::format("the JSON body holds more than {} values (the limit)", limits.max_values),
           "invalid_request_error", "json_too_many_values"}};
    return true;
  };
  try {
    out = J::parse(body, bounded);
  } catch (const JsonLimitHit& hit) {
    return hit.error;
  } catch (const std::exception& e) {
    return HttpError{400, fmt::format("malformed JSON: {}", e.what()), "invalid_request_error",
                     "invalid_json"};
  }
  if (!out.is_object())
    return HttpError{400, "the request body must be a JSON object", "invalid_request_error",
                     "invalid_json"};
  return std::nullopt;
}

}  // namespace

// nlohmann's converting constructor: node by node, each value's kind kept.
nlohmann::ordered_json to_ordered(const json& from) {
  return nlohmann::ordered_json(from);
}

std::optional<HttpError> parse_body(std::string_view body, const JsonLimits& limits, json& out) {
  return parse_limited(body, limits, out);
}

std::optional<HttpError> parse_body(std::string_view body, const JsonLimits& limits,
                                    nlohmann::ordered_json& out) {
  return parse_limited(body, limits, out);
}

int64_t body_parses() {
  return parses.load(std::memory_order_relaxed);
}

template <class J>
Result<bool> bool_field(const J& body, const char* key, bool dflt) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  if (!body[key].is_boolean())
    return make_error(ErrorCode::InvalidArgument, "\"{}\" must be true or false, not {}", key,
                      body[key].type_name());
  return body[key].template get<bool>();
}

template <class J>
Result<std::string> string_field(const J& body, const char* key, const std::string& dflt) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  if (!body[key].is_string())
    return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a string, not {}", key,
                      body[key].type_name());
  return body[key].template get<std::string>();
}

template <class J>
Result<int64_t> int_value(const J& v, const std::string& what, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      return make_error(ErrorCode::InvalidArgument, "{} = {} is outside [{}, {}]", what, u, lo, hi);
    x = int64_t(u);
  } else if (v.is_number_integer()) {
    x = v.template get<int64_t>();
  } else {
    return make_error(ErrorCode::InvalidArgument, "{} must be an integer", what);
  }
  if (x < lo || x > hi)
    return make_error(ErrorCode::InvalidArgument, "{} = {} is outside [{}, {}]", what, x, lo, hi);
  return x;
}

template <class J>
Result<int64_t> int_field(const J& body, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  return int_value(body[key], fmt::format("\"{}\"", key), lo, hi);
}

template <class J>
Result<double> number_field(const J& body, const char* key, double dflt, double lo, double hi) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  if (!body[key].is_number())
    return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a number", key);
  const double v = body[key].template get<double>();
  if (!(v >= lo && v <= hi))
    return make_error(ErrorCode::InvalidArgument, "\"{}\" = {} is outside [{}, {}]", key, v, lo,
                      hi);
  return v;
}

template Result<bool> bool_field(const json&, const char*, bool);
template Result<bool> bool_field(const ojson&, const char*, bool);
template Result<std::string> string_field(const json&, const char*, const std::string&);
template Result<std::string> string_field(const ojson&, const char*, const std::string&);
template Result<int64_t> int_value(const json&, const std::string&, int64_t, int64_t);
template Result<int64_t> int_value(const ojson&, const std::string&, int64_t, int64_t);
template Result<int64_t> int_field(const json&, const char*, int64_t, int64_t, int64_t);
template Result<int64_t> int_field(const ojson&, const char*, int64_t, int64_t, int64_t);
template Result<double> number_field(const json&, const char*, double, double, double);
template Result<double> number_field(const ojson&, const char*, double, double, double);

}  // namespace kamera
