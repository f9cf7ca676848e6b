#include "context/context.h"

#include <algorithm>

namespace kamera {

KvPool::Params pool_params(const Model& model, int64_t kv_tokens, int page_tokens, DType kv_type) {
  KvPool::Params p;
  p.dtype = kv_type;
  p.layout = model.kv_layout();
  p.page_tokens = std::max(1, page_tokens);
  if (kv_tokens <= 0) kv_tokens = std::min<int64_t>(4 * int64_t(model.cfg.ctx_len), 1 << 20);
  // Every sequence may leave one page partly used: two pages of slack.
  p.n_pages = int(std::min<int64_t>(kv_tokens / p.page_tokens + 2, INT32_MAX));
  return p;
}

Result<std::unique_ptr<Context>> Context::load(const std::string& model_path,
                                               const ContextOptions& opts) {
  LoadOptions lo;
  lo.tokenizer_path = opts.tokenizer_path;
  KAMERA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_model(model_path, lo));
  return create(std::shared_ptr<const Model>(std::move(model)), opts);
}

Result<std::unique_ptr<Context>> Context::create(std::shared_ptr<const Model> model,
                                                 const ContextOptions& opts) {
  if (!model) return make_error(ErrorCode::InvalidArgument, "context: no model");
  if (opts.n_threads < 1)
    return make_error(ErrorCode::InvalidArgument, "context: n_threads {} must be >= 1",
                      opts.n_threads);
  std::unique_ptr<Context> c(new Context());
  c->opts_ = opts;
  c->model_ = std::move(model);
  KAMERA_ASSIGN_OR_RETURN(c->pool_, KvPool::create(pool_params(*c->model_, opts.kv_tokens,
                                                               opts.page_tokens, opts.kv_type)));
  c->engine_ = std::make_unique<Engine>(*c->model_, opts.n_threads);
  c->store_ = std::make_unique<ChunkStore>(opts.store_bytes);
  for (const auto& tier : opts.tiers) c->store_->add_tier(tier);
  std::vector<int32_t> anchor = opts.anchor;
  if (anchor.empty()) anchor = {c->bos()};
  c->cache_ = std::make_unique<ChunkCache>(*c->model_, *c->engine_, *c->pool_, *c->store_, anchor);
  c->assembler_ = std::make_unique<PromptAssembler>(*c->cache_, opts.reuse);
  return c;
}

Context::~Context() = default;

int32_t Context::bos() const {
  return model_->tokenizer ? model_->tokenizer->bos() : 1;
}

void Context::clear_store() {
  store_->clear();
}

}  // namespace kamera
