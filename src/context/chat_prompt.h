// Chat messages as token ids for callers that do not render templates themselves (the C API's
// kamera_chat_tokenize): the template chosen by name or source, or the model's own, rendered
// as ChatSession renders it (chat_prompt_ids). No template type in this header: a JSON-free room
// may include it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace kamera {

struct ChatTurn {
  std::string role, content;
};

// tmpl: a built-in name, a file or a Jinja source ("" : the model's own, chatml when it has none).
Result<std::vector<int32_t>> chat_turn_ids(const Model& model, const std::string& tmpl,
                                           std::span<const ChatTurn> turns,
                                           bool add_generation_prompt);

}  // namespace kamera
