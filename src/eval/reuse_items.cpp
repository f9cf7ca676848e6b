// Loading the reuse protocol's items (JSONL) and sizing the harness's KV pool.
#include <algorithm>
#include <fstream>

#include "eval/reuse_bench.h"

namespace kamera {

namespace {

Result<ChunkContent> field_content(const nlohmann::json& j, const char* key, const Model& m,
                                   const std::string& where) {
  if (!j.contains(key))
    return make_error(ErrorCode::InvalidArgument, "{}: missing \"{}\"", where, key);
  const auto& v = j[key];
  std::vector<int32_t> ids;
  if (v.is_string()) {
    if (!m.tokenizer)
      return make_error(
          ErrorCode::InvalidArgument,
          "{}: \"{}\" is text but the model has no tokenizer (pass -z or use id arrays)", where,
          key);
    ids = m.tokenizer->encode_raw(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_number_integer())
        return make_error(ErrorCode::InvalidArgument, "{}: \"{}\" must hold integer token ids",
                          where, key);
      const int64_t t = x.get<int64_t>();
      if (t < 0 || t >= m.cfg.n_vocab)
        return make_error(ErrorCode::InvalidArgument,
                          "{}: token id {} in \"{}\" is outside the vocabulary [0, {})", where, t,
                          key, m.cfg.n_vocab);
      ids.push_back(int32_t(t));
    }
  } else {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: \"{}\" must be a string or an array of token ids", where, key);
  }
  if (ids.empty())
    return make_error(ErrorCode::InvalidArgument, "{}: \"{}\" is empty after tokenization", where,
                      key);
  return ChunkContent::from_tokens(std::move(ids));
}

}  // namespace

Result<std::vector<ReuseItem>> load_reuse_items(const std::string& path, const Model& model) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::Io, "{}: cannot open", path);
  std::vector<ReuseItem> items;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      return make_error(ErrorCode::InvalidArgument, "{}: not valid JSON ({})", where, e.what());
    }
    if (!j.is_object())
      return make_error(ErrorCode::InvalidArgument, "{}: each line must be a JSON object", where);
    ReuseItem it;
    it.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>()
                                                          : fmt::format("line{}", lineno);
    auto a = field_content(j, "antecedent", model, where);
    if (!a.ok()) return a.error();
    auto b = field_content(j, "chunk", model, where);
    if (!b.ok()) return b.error();
    auto q = field_content(j, "query", model, where);
    if (!q.ok()) return q.error();
    it.antecedent = std::move(a.value());
    it.chunk = std::move(b.value());
    it.query = std::move(q.value());
    const int64_t total = 1 + it.antecedent.extent() + it.chunk.extent() + it.query.extent();
    if (total > model.cfg.ctx_len)
      return make_error(ErrorCode::InvalidArgument,
                        "{}: the item needs {} positions, more than the model's context {}", where,
                        total, model.cfg.ctx_len);
    items.push_back(std::move(it));
  }
  if (items.empty()) return make_error(ErrorCode::InvalidArgument, "{}: no items", path);
  return items;
}

int64_t harness_kv_tokens(const std::vector<ReuseItem>& items) {
  int max_tokens = 0;
  for (const auto& it : items)
    max_tokens = std::max(max_tokens, 1 + it.antecedent.n() + it.chunk.n() + it.query.n());
  return 8 * (int64_t(max_tokens) + 32);  // a few live sequences (forks) at a time
}

ChunkContent truncated(const ChunkContent& c, int cap) {
  if (c.n() <= cap) return c;
  return ChunkContent::from_tokens(std::vector<int32_t>(c.tokens.begin(), c.tokens.begin() + cap));
}

std::vector<ReuseItem> picture_items(std::vector<ReuseItem> items,
                                     const std::vector<ChunkContent>& pictures,
                                     const std::vector<int32_t>& open,
                                     const std::vector<int32_t>& close) {
  if (pictures.empty()) return items;
  for (size_t i = 0; i < items.size(); ++i) {
    ReuseItem& it = items[i];
    std::vector<int32_t> a = it.antecedent.tokens, q = close;
    a.insert(a.end(), open.begin(), open.end());
    q.insert(q.end(), it.query.tokens.begin(), it.query.tokens.end());
    it.antecedent = ChunkContent::from_tokens(std::move(a));
    it.chunk = pictures[i % pictures.size()];
    it.query = ChunkContent::from_tokens(std::move(q));
  }
  return items;
}

}  // namespace kamera
