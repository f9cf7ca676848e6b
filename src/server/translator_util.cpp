#include "server/translator_util.h"

#include <fmt/format.h>

#include "server/json_fields.h"

namespace kamera {

Error refuse_field(std::string* param, const std::string& field, const std::string& why,
                   ErrorCode code) {
  if (param) *param = field;
  return Error{code, fmt::format("\"{}\" {}", field, why)};
}

std::string indexed(const std::string& base, size_t i) {
  return fmt::format("{}[{}]", base, i);
}

std::string sse_event(const char* type, const nlohmann::ordered_json& data) {
  return fmt::format("event: {}\ndata: {}\n\n", type, dump(data));
}

}  // namespace kamera
