#include "server/request_segments.h"

#include "core/log.h"
#include "server/prompt_tokens.h"

namespace kamera {

namespace {

bool asks_for_decoding(const nlohmann::ordered_json& body) {
  for (const char* k : {"response_format", "tools", "tool_choice", "parallel_tool_calls"})
    if (body.contains(k) && !body[k].is_null()) return true;
  return false;
}

}  // namespace

size_t longest_piece_bytes(const Model& m) {
  size_t n = 4;
  if (m.tokenizer)
    for (const auto& p : m.tokenizer->vocab().pieces) n = std::max(n, p.size());
  return n;
}

size_t max_prompt_bytes(const Model& m) {
  return size_t(m.cfg.ctx_len) * longest_piece_bytes(m);
}

Result<std::optional<ChatTemplate>> chat_template_for(const Model& model, const ServerOptions& o) {
  std::optional<ChatTemplate> t;
  if (!o.chat_template.empty()) {
    KAMERA_ASSIGN_OR_RETURN(t, ChatTemplate::from_arg(o.chat_template));
  } else if (model.tokenizer && !model.tokenizer->vocab().chat_template.empty()) {
    KAMERA_ASSIGN_OR_RETURN(t, ChatTemplate::from_gguf(model.tokenizer->vocab().chat_template));
  } else if (model.tokenizer && model.cfg.arch == Arch::Phi3) {
    // a Phi-3 / Phi-4-mini file without its template: the format all of them were trained on
    log().info("serve: the phi3 file carries no chat template; using the built-in 'phi3'");
    KAMERA_ASSIGN_OR_RETURN(t, ChatTemplate::named("phi3"));
  }
  return t;
}

std::variant<toolcall::DecodePlan, HttpError> plan_chat_fields(
    const nlohmann::ordered_json& body, const std::optional<toolcall::Format>& tool_format,
    grammar::Budget* budget) {
  if (!body.is_object()) return HttpError{400, "the request body must be a JSON object"};
  if (!asks_for_decoding(body)) {
    toolcall::DecodePlan plan;  // harmony's output is parsed even so (tool_requests.cpp)
    plan.format = tool_format;
    return plan;
  }
  auto plan = toolcall::plan_decoding(body, tool_format, budget);
  if (auto* e = std::get_if<toolcall::PlanError>(&plan))  // the request's fault: 400, by name
    return HttpError{
        400, e->error.message, "invalid_request_error",
        e->error.code == ErrorCode::Unsupported ? "unsupported_field" : "invalid_value", e->param};
  return std::get<toolcall::DecodePlan>(std::move(plan));
}

Result<std::unique_ptr<RequestSegmenter>> RequestSegmenter::create(
    std::shared_ptr<const Model> model, const ServerOptions& opts) {
  std::unique_ptr<RequestSegmenter> s(new RequestSegmenter());
  s->opts_ = opts;
  KAMERA_ASSIGN_OR_RETURN(s->tmpl_, chat_template_for(*model, opts));
  if (s->tmpl_) s->tool_format_ = toolcall::detect_format(s->tmpl_->source());
  ContextOptions co;
  co.n_threads = 1;
  co.kv_tokens = 256;  // the anchor only
  co.store_bytes = size_t(1) << 20;
  KAMERA_ASSIGN_OR_RETURN(s->ctx_, Context::create(model, co));
  s->row_bytes_ = model->kv_layout().floats_per_token() * sizeof(float);
  s->model_ = std::move(model);
  return s;
}

Result<std::vector<GenRequest>> RequestSegmenter::requests(const nlohmann::ordered_json& body,
                                                           bool chat) const {
  toolcall::DecodePlan plan;
  if (chat) {
    auto p = plan_chat_fields(body, tool_format_);
    if (auto* e = std::get_if<HttpError>(&p))
      return make_error(ErrorCode::InvalidArgument, "{}", e->message);
    plan = std::get<toolcall::DecodePlan>(std::move(p));
  }
  const ChatTools tools{plan.render_tools, tool_format_};
  return gen_requests(body, chat, opts_, model_->cfg, tmpl_ ? &*tmpl_ : nullptr, nullptr, &tools);
}

Result<std::vector<RequestSegmenter::Segment>> RequestSegmenter::segments_of(
    std::vector<GenRequest>& reqs) const {
  std::vector<Segment> out;
  const TokenizeOptions to{opts_.control_tokens_in_text, true};
  for (GenRequest& r : reqs) {
    KAMERA_TRY(tokenize_prompt(ctx_->cache(), r, to));
    for (const PromptSegment& s : r.plan.segments) out.push_back({s.id, s.span.size()});
  }
  return out;
}

Result<std::vector<RequestSegmenter::Segment>> RequestSegmenter::segments(
    const nlohmann::ordered_json& body, bool chat) const {
  KAMERA_ASSIGN_OR_RETURN(std::vector<GenRequest> reqs, requests(body, chat));
  return segments_of(reqs);
}

}  // namespace kamera
