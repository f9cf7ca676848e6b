#include "server/request_fields.h"

#include <charconv>
#include <set>

namespace kamera {

namespace {

const std::set<std::string>& common_fields() {
  static const std::set<std::string> f = {"model",
                                          "stream",
                                          "stream_options",
                                          "max_tokens",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "n",
                                          "stop",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "repeat_penalty",
                                          "logit_bias",
                                          "logprobs",
                                          "seed",
                                          "user",
                                          "reuse",
                                          "reuse_budget",
                                          "rank",
                                          "deep_half",
                                          "metadata",
                                          "service_tier",
                                          "safety_identifier",
                                          "prompt_cache_key",
                                          "store",
                                          "parallel_tool_calls"};
  return f;
}

HttpError refuse(const std::string& field, const std::string& why, const char* code) {
  return {400, fmt::format("\"{}\" {}", field, why), "invalid_request_error", code, field};
}

HttpError not_yet(const std::string& field) {
  return refuse(field, "is not supported yet: kamera would ignore it, so it refuses it",
                "unsupported_field");
}

// Fields kamera knows but does not do: refused unless their value changes nothing.
std::optional<HttpError> check_known(const ojson& body, const std::string& k, Endpoint e) {
  const ojson& v = body[k];
  if (v.is_null()) return std::nullopt;
  // response_format, tools, tool_choice: planned (and refused by name) by toolcall/request.h.
  if (k == "response_format" || k == "tools" || k == "tool_choice") return std::nullopt;
  if (k == "functions" || k == "function_call")
    return refuse(k, "(deprecated by OpenAI) is not supported: send \"tools\" and \"tool_choice\"",
                  "unsupported_field");
  if (k == "grammar" || k == "json_schema")
    return refuse(k,
                  "is not supported: kamera constrains output through \"response_format\" "
                  "(json_object, json_schema) and \"tools\"",
                  "unsupported_field");
  if (k == "store" && !v.is_boolean()) return refuse(k, "must be a boolean", "invalid_value");
  if (k == "verbosity" && v != "medium")
    return refuse(k,
                  "other than \"medium\" is not supported: kamera cannot make the answer "
                  "shorter or longer than the model writes it",
                  "unsupported_field");
  if (k == "prompt_cache_retention" && v != "in_memory" && v != "24h")
    return refuse(k, "must be \"in_memory\" or \"24h\"", "invalid_value");
  if (k == "modalities" && v != ojson::array({"text"}))
    return refuse(k, "supports only [\"text\"]", "unsupported_field");
  if (k == "echo" && v == true) return not_yet(k);
  if (k == "best_of" && v != 1) return refuse(k, "must be 1", "unsupported_field");
  if (k == "suffix" && v != "") return not_yet(k);
  if (k == "stream_options") {
    const ojson s = body.value("stream", ojson(false));
    if (s != true) return refuse(k, "is only allowed with \"stream\": true", "invalid_value");
    if (!v.is_object()) return refuse(k, "must be an object", "invalid_value");
    for (const auto& [sk, sv] : v.items()) {
      if ((sk == "include_usage" || sk == "include_obfuscation") && sv.is_boolean()) continue;
      return refuse(fmt::format("{}.{}", k, sk), "is not known (include_usage)", "unknown_field");
    }
  }
  (void)e;
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> check_fields(const ojson& body, Endpoint e) {
  static const std::set<std::string> not_done = {
      "response_format", "tools",       "tool_choice",    "functions",  "function_call",
      "grammar",         "json_schema", "store",          "modalities", "echo",
      "best_of",         "suffix",      "stream_options", "verbosity",  "prompt_cache_retention"};
  static const std::set<std::string> refused_always = {"audio", "prediction", "web_search_options"};
  for (const auto& [k, v] : body.items()) {
    // chat_template_kwargs and reasoning_effort: checked against the template where the
    // messages are rendered (server/prompt_parts.h)
    if (e == Endpoint::Chat
            ? k == "messages" || k == "max_completion_tokens" || k == "top_logprobs" ||
                  k == "chat_template_kwargs" || k == "reasoning_effort"
            : k == "prompt")
      continue;
    if (refused_always.count(k)) return refuse(k, "is not supported", "unsupported_field");
    const bool chat_only = k == "response_format" || k == "tools" || k == "tool_choice" ||
                           k == "functions" || k == "function_call" || k == "modalities" ||
                           k == "verbosity";
    const bool completions_only = k == "echo" || k == "best_of" || k == "suffix";
    if (not_done.count(k) && (chat_only          ? e == Endpoint::Chat
                              : completions_only ? e != Endpoint::Chat
                                                 : true)) {
      if (auto r = check_known(body, k, e)) return r;
      continue;
    }
    if (common_fields().count(k)) continue;
    return refuse(k, "is not a field kamera knows (docs/SERVER.md lists them)", "unknown_field");
  }
  return std::nullopt;
}

bool include_usage(const ojson& body) {
  if (!body.contains("stream_options") || !body["stream_options"].is_object()) return false;
  const ojson& s = body["stream_options"];
  return s.contains("include_usage") && s["include_usage"] == true;
}

}  // namespace kamera

namespace kamera {

namespace {

// The error, with `field` as the request field at fault.
Error at_field(const char*& param, const char* field, Error e) {
  param = field;
  return e;
}

// "stop": a string or an array of at most 4 non-empty strings.
Status stop_field(const ojson& body, std::vector<std::string>& out) {
  if (!body.contains("stop") || body["stop"].is_null()) return Status::Ok();
  const ojson& v = body["stop"];
  const ojson list = v.is_string() ? ojson::array({v}) : v;
  if (!list.is_array() || list.size() > 4)
    return make_error(ErrorCode::InvalidArgument,
                      "\"stop\" must be a string or an array of at most 4 strings");
  for (const ojson& s : list) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty() ||
        s.get_ref<const std::string&>().size() > 1024)
      return make_error(ErrorCode::InvalidArgument,
                        "each stop string must be a non-empty string of at most 1024 bytes");
    out.push_back(s.get<std::string>());
  }
  return Status::Ok();
}

// "logit_bias": {"token id": bias in [-100, 100]}.
Status bias_field(const ojson& body, int n_vocab, std::vector<std::pair<int32_t, float>>& out) {
  if (!body.contains("logit_bias") || body["logit_bias"].is_null()) return Status::Ok();
  const ojson& v = body["logit_bias"];
  if (!v.is_object())
    return make_error(ErrorCode::InvalidArgument,
                      "\"logit_bias\" must map token ids (as strings) to numbers");
  for (const auto& [k, b] : v.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), id);
    if (ec != std::errc() || end != k.data() + k.size() || id < 0 || id >= n_vocab)
      return make_error(ErrorCode::InvalidArgument,
                        "\"logit_bias\" key '{}' is not a token id in [0, {})", k, n_vocab);
    if (!b.is_number() || !(b.get<double>() >= -100 && b.get<double>() <= 100))
      return make_error(ErrorCode::InvalidArgument,
                        "\"logit_bias\" of token {} must be a number in [-100, 100]", id);
    out.push_back({int32_t(id), float(b.get<double>())});
  }
  return Status::Ok();
}

// max_tokens / max_completion_tokens (0 when neither: to the end of the context).
Status limit_fields(const ojson& body, Endpoint e, const ServerOptions& opts,
                    const ModelConfig& cfg, GenRequest& r, const char*& param) {
  const int64_t dflt = opts.default_max_tokens;
  r.gen.max_tokens = 0;  // none named
  for (const char* k : {"max_tokens", "max_completion_tokens"}) {
    if (e != Endpoint::Chat && std::string_view(k) == "max_completion_tokens") continue;
    if (!body.contains(k) || body[k].is_null()) continue;
    auto v = int_field(body, k, 0, 1, cfg.ctx_len);
    if (!v.ok()) return at_field(param, k, v.error());
    if (r.gen.max_tokens > 0 && r.gen.max_tokens != *v)
      return at_field(param, k,
                      make_error(ErrorCode::InvalidArgument,
                                 "\"max_tokens\" and \"max_completion_tokens\" disagree"));
    r.gen.max_tokens = int(*v);
    r.max_tokens_field = k;
  }
  r.default_max_tokens = int(std::min<int64_t>(std::max<int64_t>(dflt, 0), cfg.ctx_len));
  return Status::Ok();
}

// logprobs: chat's boolean with top_logprobs in [0, 20]; completions' number in [0, 5].
Status logprob_fields(const ojson& body, Endpoint e, GenRequest& r, const char*& param) {
  if (e == Endpoint::Chat) {
    const ojson lp = body.value("logprobs", ojson(nullptr));
    if (!lp.is_null() && !lp.is_boolean())
      return at_field(param, "logprobs",
                      make_error(ErrorCode::InvalidArgument, "\"logprobs\" must be true or false"));
    auto top = int_field(body, "top_logprobs", -1, 0, 20);
    if (!top.ok()) return at_field(param, "top_logprobs", top.error());
    if (*top >= 0 && lp != true)
      return at_field(
          param, "top_logprobs",
          make_error(ErrorCode::InvalidArgument, "\"top_logprobs\" needs \"logprobs\": true"));
    if (lp == true) r.gen.logprobs = int(std::max<int64_t>(0, *top));
    return Status::Ok();
  }
  auto lp = int_field(body, "logprobs", -1, 0, 5);
  if (!lp.ok()) return at_field(param, "logprobs", lp.error());
  r.gen.logprobs = int(*lp);
  return Status::Ok();
}

}  // namespace

Status generation_fields(const ojson& body, Endpoint e, const ServerOptions& opts,
                         const ModelConfig& cfg, GenRequest& r, const char*& param) {
  KAMERA_TRY(limit_fields(body, e, opts, cfg, r, param));
  KAMERA_TRY(logprob_fields(body, e, r, param));
  auto n = int_field(body, "n", 1, 1, std::max(1, opts.max_active));
  if (!n.ok()) return at_field(param, "n", n.error());
  r.n = int(*n);
  struct IntField {
    const char* key;
    int64_t dflt, lo, hi;
  };
  for (const IntField& f : {IntField{"top_k", 0, 0, cfg.n_vocab}, {"seed", 0, 0, INT64_MAX}}) {
    auto v = int_field(body, f.key, f.dflt, f.lo, f.hi);
    if (!v.ok()) return at_field(param, f.key, v.error());
    if (std::string_view(f.key) == "top_k") r.gen.sampling.top_k = int(*v);
    if (std::string_view(f.key) == "seed") r.gen.sampling.seed = uint64_t(*v);
  }
  struct NumField {
    const char* key;
    double dflt, lo, hi;
    float* to;
  };
  const NumField nums[] = {{"temperature", 0.0, 0.0, 100.0, &r.gen.sampling.temperature},
                           {"top_p", 1.0, 0.0, 1.0, &r.gen.sampling.top_p},
                           {"min_p", 0.0, 0.0, 1.0, &r.gen.sampling.min_p},
                           {"presence_penalty", 0.0, -2.0, 2.0, &r.gen.penalties.presence},
                           {"frequency_penalty", 0.0, -2.0, 2.0, &r.gen.penalties.frequency},
                           {"repeat_penalty", 1.0, 0.01, 100.0, &r.gen.penalties.repeat}};
  for (const NumField& f : nums) {
    auto v = number_field(body, f.key, f.dflt, f.lo, f.hi);
    if (!v.ok()) return at_field(param, f.key, v.error());
    *f.to = float(*v);
  }
  Status st = stop_field(body, r.gen.stop);
  if (!st.ok()) return at_field(param, "stop", st.error());
  st = bias_field(body, cfg.n_vocab, r.gen.logit_bias);
  if (!st.ok()) return at_field(param, "logit_bias", st.error());
  return Status::Ok();
}

}  // namespace kamera
