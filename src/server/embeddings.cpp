#include "server/embeddings.h"

#include <cmath>

#include "media/data_url.h"
#include "model/forward.h"

namespace kamera {

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit

HttpError bad(const std::string& param, const std::string& message,
              const char* code = "invalid_value") {
  return {400, message, "invalid_request_error", code, param};
}

// The inputs as token ids: strings are tokenized (at most one token past the context, which is
// enough to refuse them), token arrays checked against the vocabulary.
std::optional<std::vector<std::vector<int32_t>>> input_ids(const json& input, const Model& model,
                                                           size_t max_bytes, HttpError& refusal) {
  const bool tokens = input.is_array() && !input.empty() && input[0].is_number();
  const json list = input.is_string() || tokens ? json::array({input}) : input;
  if (!list.is_array() || list.empty() || list.size() > kMaxInputs)
    return refusal = bad("input", fmt::format("\"input\" must be a string, token ids, or a "
                                              "non-empty array of up to {} of them",
                                              kMaxInputs)),
           std::nullopt;
  std::vector<std::vector<int32_t>> out;
  const Tokenizer* tok = model.tokenizer ? &*model.tokenizer : nullptr;
  const int ctx_len = model.cfg.ctx_len;
  for (const json& x : list) {
    std::vector<int32_t> ids;
    if (x.is_string() && tok && x.get_ref<const std::string&>().size() <= max_bytes) {
      // Literal, as every client text: control tokens come only from templates.
      ids = tok->encode_marked(x.get_ref<const std::string&>(), {}, true, size_t(ctx_len) + 1);
      if (tok->add_bos()) ids.insert(ids.begin(), tok->bos());
    } else if (x.is_string()) {
      return refusal = tok ? bad("input", "an input cannot fit the model's context",
                                 "context_length_exceeded")
                           : bad("input", "this model has no tokenizer: send token ids"),
             std::nullopt;
    } else if (x.is_array()) {
      for (const json& t : x) {
        auto v = int_value(t, "a token id", 0, model.cfg.n_vocab - 1);
        if (!v.ok()) return refusal = bad("input", v.message()), std::nullopt;
        ids.push_back(int32_t(*v));
      }
    } else {
      return refusal = bad("input", "each input must be a string or an array of token ids"),
             std::nullopt;
    }
    if (ids.empty()) return refusal = bad("input", "an input is empty"), std::nullopt;
    if (int(ids.size()) > ctx_len)
      return refusal = bad("input",
                           fmt::format("an input has {} tokens; the model's context is {}",
                                       ids.size(), ctx_len),
                           "context_length_exceeded"),
             std::nullopt;
    out.push_back(std::move(ids));
  }
  return out;
}

// The pooled, L2-normalized vector of one input. The forward is the chunk cache's, paced as every
// prefill of the scheduler (serve/sliced_task.h): in slices between decode steps, so a long input
// does not hold other clients' streams.
Result<std::vector<float>> embed_one(Context& ctx, const std::vector<int32_t>& ids, bool last) {
  const int d = ctx.model().cfg.dim;
  std::vector<float> hidden;
  const SeqId seq = ctx.pool().create_sequence();
  auto r = ctx.cache().forward_chunk(seq, ChunkContent::from_tokens(ids), 0, LogitsMode::None,
                                     nullptr, nullptr, &hidden);
  ctx.pool().free_sequence(seq);
  if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
  std::vector<float> v(size_t(d), 0.0f);
  const size_t n = ids.size();
  for (size_t t = last ? n - 1 : 0; t < n; ++t)
    for (int j = 0; j < d; ++j) v[size_t(j)] += hidden[t * size_t(d) + size_t(j)];
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  const float inv = norm > 0 ? float(1.0 / std::sqrt(norm)) : 0.0f;
  for (float& x : v) x *= inv;  // the mean's scale cancels in the normalization
  return v;
}

}  // namespace

std::optional<EmbedRequest> parse_embeddings(const json& body, const Model& model,
                                             size_t max_text_bytes, HttpError& refusal) {
  for (const auto& [k, v] : body.items()) {
    if (k == "input" || k == "model" || k == "encoding_format" || k == "dimensions" ||
        k == "user" || k == "pooling")
      continue;
    refusal = bad(k, fmt::format("\"{}\" is not a field of /v1/embeddings kamera knows", k),
                  "unknown_field");
    return std::nullopt;
  }
  EmbedRequest r;
  const json fmt_v = body.value("encoding_format", json("float"));
  if (fmt_v != "float" && fmt_v != "base64")
    return refusal = bad("encoding_format", "\"encoding_format\" must be float or base64"),
           std::nullopt;
  r.base64 = fmt_v == "base64";
  const json pool_v = body.value("pooling", json("mean"));
  if (pool_v != "mean" && pool_v != "last")
    return refusal = bad("pooling", "\"pooling\" must be mean or last"), std::nullopt;
  r.last_token = pool_v == "last";
  if (body.contains("dimensions") && !body["dimensions"].is_null() &&
      body["dimensions"] != model.cfg.dim)
    return refusal = bad("dimensions",
                         fmt::format("\"dimensions\": this model's embeddings have {} (no "
                                     "shortening)",
                                     model.cfg.dim),
                         "unsupported_field"),
           std::nullopt;
  if (!body.contains("input")) return refusal = bad("input", "missing \"input\""), std::nullopt;
  auto ids = input_ids(body["input"], model, max_text_bytes, refusal);
  if (!ids) return std::nullopt;
  r.inputs = std::move(*ids);
  return r;
}

Result<std::vector<std::vector<float>>> run_embeddings(Context& ctx, const EmbedRequest& r,
                                                       const std::function<bool()>& stop) {
  std::vector<std::vector<float>> out;
  for (const std::vector<int32_t>& ids : r.inputs) {
    if (stop && stop())
      return make_error(ErrorCode::InvalidArgument, "the client left before its embeddings ran");
    KAMERA_ASSIGN_OR_RETURN(std::vector<float> v, embed_one(ctx, ids, r.last_token));
    out.push_back(std::move(v));
  }
  return out;
}

json embeddings_json(const EmbedRequest& r, const std::vector<std::vector<float>>& vectors,
                     const std::string& model_name) {
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    tokens += int64_t(r.inputs[i].size());
    data.push_back(
        {{"object", "embedding"},
         {"index", i},
         {"embedding", r.base64 ? json(base64_encode(v.data(), v.size() * 4)) : json(v)}});
  }
  return json{{"object", "list"},
              {"data", data},
              {"model", model_name},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

}  // namespace kamera
