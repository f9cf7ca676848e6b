// /v1/embeddings and /v1/rerank (parsed on a worker, run on the scheduler thread) and /v1/models
// (what the server holds: its model, with its shape, and its vision tower when it has one).
#include "server/embeddings.h"
#include "server/rerank.h"
#include "server/server_impl.h"

namespace kamera {

void Server::Impl::embeddings(const HttpRequest& req, const PathParams&, const std::string&,
                              Out out) {
  ++metrics.requests_embeddings;
  json body;
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  HttpError refusal;
  auto r = parse_embeddings(body, model, max_prompt_bytes, refusal);
  if (!r) return respond_error(out, refusal);
  auto req_ptr = std::make_shared<const EmbedRequest>(std::move(*r));
  on_scheduler(
      out,
      [this, req_ptr, out] {
        return run_embeddings(*ctx, *req_ptr, [&out] { return out->gone(); });
      },
      [this, req_ptr](const std::vector<std::vector<float>>& v) {
        return embeddings_json(*req_ptr, v, opts.model_name);
      });
}

void Server::Impl::rerank(const HttpRequest& req, const PathParams&, const std::string&, Out out) {
  json body;
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  if (auto no = refuse_not_reranker(reranker)) return respond_error(out, *no);
  HttpError refusal;
  auto r = parse_rerank(body, model, *reranker.head, max_prompt_bytes, refusal);
  if (!r) return respond_error(out, refusal);
  auto req_ptr = std::make_shared<const RerankRequest>(std::move(*r));
  on_scheduler(
      out,
      [this, req_ptr, out] {
        return run_rerank(*ctx, *reranker.head, *req_ptr, [&out] { return out->gone(); });
      },
      [this, req_ptr](const RerankScores& s) { return rerank_json(*req_ptr, s, opts.model_name); });
}

json Server::Impl::models_body() const {
  const ModelConfig& c = model.cfg;
  json meta = {{"arch", arch_name(c.arch)}, {"ctx_len", c.ctx_len},
               {"n_vocab", c.n_vocab},      {"n_embd", c.dim},
               {"n_layers", c.n_layers},    {"chat_template", chat_template.has_value()},
               {"vision", media != nullptr}};
  const json m = {{"id", opts.model_name},
                  {"object", "model"},
                  {"created", int64_t(0)},
                  {"owned_by", "kamera"},
                  {"meta", meta}};
  return {{"object", "list"}, {"data", json::array({m})}};
}

}  // namespace kamera
