#include "server/prompt_segments.h"

namespace kamera {

namespace {

bool is_control(const Tokenizer& tok, int32_t id) {
  const auto& types = tok.vocab().types;
  return id >= 0 && size_t(id) < types.size() && types[size_t(id)] == TokenType::Control;
}

// Whether a segment may end after token i (before i + 1).
bool cut_after(const Tokenizer& tok, std::span<const int32_t> ids, size_t i) {
  if (i + 1 >= ids.size()) return false;
  if (is_control(tok, ids[i]) && is_control(tok, ids[i + 1])) return true;
  const std::string p = tok.piece(ids[i]);
  return !p.empty() && p.back() == '\n';
}

}  // namespace

std::vector<TokenSpan> cut_segments(const Tokenizer& tok, std::span<const int32_t> ids,
                                    int min_tokens) {
  std::vector<TokenSpan> out;
  int begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int end = int(i) + 1;
    if (!cut_after(tok, ids, i) || end - begin < min_tokens) continue;
    out.push_back({begin, end});
    begin = end;
  }
  if (begin < int(ids.size())) out.push_back({begin, int(ids.size())});
  return out;
}

}  // namespace kamera
