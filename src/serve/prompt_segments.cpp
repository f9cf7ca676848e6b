#include "serve/prompt_segments.h"

namespace kamera {

namespace {

bool is_control(const Tokenizer& tok, int32_t id) {
  const auto& types = tok.vocab().types;
  return id >= 0 && size_t(id) < types.size() && types[size_t(id)] == TokenType::Control;
}

// Where a segment may end after token i (before i + 1): at a turn's end always (a line ended by a
// control token, <|im_end|>\n; two control tokens, Llama 3's <|eot_id|><|start_header_id|>), at
// another line's end once the segment is long enough.
enum class Cut { None, Line, Turn };

Cut cut_after(const Tokenizer& tok, std::span<const int32_t> ids, size_t i) {
  if (i + 1 >= ids.size()) return Cut::None;
  if (is_control(tok, ids[i]) && is_control(tok, ids[i + 1])) return Cut::Turn;
  const std::string p = tok.piece(ids[i]);
  if (p.empty() || p.back() != '\n') return Cut::None;
  return i > 0 && is_control(tok, ids[i - 1]) ? Cut::Turn : Cut::Line;
}

}  // namespace

std::vector<TokenSpan> cut_segments(const Tokenizer& tok, std::span<const int32_t> ids,
                                    int min_tokens) {
  std::vector<TokenSpan> out;
  int begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int end = int(i) + 1;
    const Cut c = cut_after(tok, ids, i);
    if (c == Cut::None || (c == Cut::Line && end - begin < min_tokens)) continue;
    out.push_back({begin, end});
    begin = end;
  }
  if (begin < int(ids.size())) out.push_back({begin, int(ids.size())});
  return out;
}

}  // namespace kamera
