// JSON at the HTTP edge: request bodies parsed under limits, their fields read with every type and
// range checked, and errors answered as OpenAI does. Shared by every route and API translator.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kamera {

using json = nlohmann::json;
// A request body as parse_body parsed it, in the client's order (a JSON Schema's properties, a
// tool's parameters): what the prompt code reads, never copied into json.
using ojson = nlohmann::ordered_json;

// An HTTP-level failure: status code and message, answered as OpenAI does:
// {"error": {"message", "type", "param", "code"}}. `code` is stable, for programs
// ("invalid_value", "not_found", "quota_exceeded", "context_length_exceeded", ...); `param`
// names the request field at fault (null when none is).
struct HttpError {
  int status = 0;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code = "invalid_value";
  std::string param = {};
};

// The HTTP status of a failed operation, from its error code.
int http_status(ErrorCode code);
HttpError http_error(const Error& e);
json error_body(const HttpError& e);

// JSON text of a response (invalid UTF-8 replaced, never thrown); ordered_json's keys in order.
std::string dump(const json& j);
std::string dump(const nlohmann::ordered_json& j);

// A json value (an answer's part) in ordered_json, node by node (no text in between; nlohmann's
// converting constructor): the keys in json's order (sorted); numbers keep their kind.
nlohmann::ordered_json to_ordered(const json& from);

// What a request body may hold, enforced while it is parsed (before any value is copied): the
// nesting of arrays and objects, and the number of values (scalars, arrays, objects and keys).
struct JsonLimits {
  int max_depth = 64;
  int64_t max_values = int64_t(1) << 21;
};

// The body as a JSON object into `out`, or the refusal: 400 invalid_json (malformed, or not an
// object), json_too_deep or json_too_many_values (the limit named in the message).
std::optional<HttpError> parse_body(std::string_view body, const JsonLimits& limits, json& out);
// The same, in the body's order (what a JSON Schema in it needs: its properties are written in
// the order it lists them). A route that needs the order parses its body this way, once.
std::optional<HttpError> parse_body(std::string_view body, const JsonLimits& limits,
                                    nlohmann::ordered_json& out);
// The request bodies parse_body has parsed in this process (both kinds; malformed ones too): a
// test's measure that a request's body is parsed once.
int64_t body_parses();

// The field readers below take either JSON type (J: json or ordered_json; both instantiated).
// A boolean field: `dflt` when absent or null, else it must be true or false (a string such as
// "true" is refused by name, never read as either).
template <class J>
Result<bool> bool_field(const J& body, const char* key, bool dflt);
// A string field: `dflt` when absent or null, else it must be a string.
template <class J>
Result<std::string> string_field(const J& body, const char* key, const std::string& dflt);

// An integer in [lo, hi], checked as 64 bits before any narrowing: a float (1.5), a value past
// int64 (2^64 - 1) or a string is refused, never wrapped. `what` names it in the message.
template <class J>
Result<int64_t> int_value(const J& v, const std::string& what, int64_t lo, int64_t hi);
// The same for a field of an object; `dflt` when absent or null.
template <class J>
Result<int64_t> int_field(const J& body, const char* key, int64_t dflt, int64_t lo, int64_t hi);
// A number field in [lo, hi], or its default when absent or null.
template <class J>
Result<double> number_field(const J& body, const char* key, double dflt, double lo, double hi);

}  // namespace kamera
