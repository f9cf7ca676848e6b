// Chunk and window routes. Everything that touches the engine, the pool, the windows or deletes
// from the store runs on the scheduler thread, so a delete is ordered with every request that
// uses the chunk (see ChunkStore's tombstones for what happens to work already in flight).
#include "server/server_impl.h"

namespace kamera {

// The upload is formed and stored in the refusal check, so that a store that cannot keep it
// answers 507: an acknowledgement (201) means the entry is written whole to every durable tier
// (ChunkStore::make_durable), and a refused upload leaves nothing of it behind.
void Server::Impl::post_chunk(const HttpRequest& req, const PathParams&, const std::string&,
                              Out out) {
  ++metrics.requests_chunks;
  json body;
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  auto content = chunk_content(body, model, opts.max_chunk_tokens, max_chunk_bytes,
                               opts.control_tokens_in_text);
  if (!content.ok()) return respond_error(out, http_error(content.error()));
  using Formed = std::pair<std::shared_ptr<const CanonicalEntry>, bool>;
  auto made = std::make_shared<Formed>();
  auto store = [this, c = std::make_shared<const ChunkContent>(std::move(content.value())),
                made]() -> std::optional<HttpError> {
    const ChunkId id = chunk_id(model.fingerprint, *c);
    ctx->store().revive_canonical(id);  // an explicit upload undoes an earlier delete
    bool formed = false;
    auto e = ctx->cache().canonical(*c, DType::F32, &formed);
    if (!e.ok()) return http_error(e.error());
    if (Status kept = ctx->store().make_durable(*e); !kept.ok())
      return HttpError{507, kept.message(), "server_error", "insufficient_storage"};
    *made = Formed{*e, formed};
    return std::nullopt;
  };
  on_scheduler(
      out, [made]() -> Result<Formed> { return *made; },
      [](const Formed& f) {
        json j = chunk_json(*f.first);
        j["formed"] = f.second;
        return j;
      },
      201, std::move(store));
}

void Server::Impl::get_chunk(const HttpRequest&, const PathParams& m, const std::string&, Out out) {
  ++metrics.requests_chunks;
  const ChunkId id = *ChunkId::from_hex(m[1]);
  auto e = ctx->store().find_canonical(id);
  if (!e)
    return respond_error(out,
                         {404, "unknown chunk id " + id.hex(), "not_found_error", "not_found"});
  respond(out, 200, chunk_json(*e));
}

void Server::Impl::delete_chunk(const HttpRequest&, const PathParams& m, const std::string&,
                                Out out) {
  ++metrics.requests_chunks;
  const ChunkId id = *ChunkId::from_hex(m[1]);
  // The delete runs first (as the refusal check, on the scheduler thread): a tier that could not
  // take the tombstone refuses the answer with 503 and Retry-After, since another server sharing
  // it could still serve the chunk; a repeat finishes it (docs/SERVER.md "Store tiers").
  auto found = std::make_shared<bool>(false);
  auto erase = [this, id, found]() -> std::optional<HttpError> {
    const ChunkStore::Erase r = ctx->store().erase_canonical(id);
    *found = r.found;
    if (r.pending.empty()) return std::nullopt;
    return HttpError{503,
                     fmt::format("chunk {} is deleted here, but the {} tier could not be told; "
                                 "repeat the delete",
                                 id.hex(), fmt::join(r.pending, ", ")),
                     "server_error", "delete_pending"};
  };
  on_scheduler(
      out,
      [id, found]() -> Result<ChunkId> {
        if (!*found) return make_error(ErrorCode::NotFound, "unknown chunk id {}", id.hex());
        return id;
      },
      [](const ChunkId& id) {
        return json{{"id", id.hex()}, {"object", "chunk"}, {"deleted", true}};
      },
      200, std::move(erase));
}

void Server::Impl::post_window(const HttpRequest& req, const PathParams&, const std::string& client,
                               Out out) {
  ++metrics.requests_windows;
  json body = json::object();
  if (auto bad = parse_optional_body(req, body)) return respond_error(out, *bad);
  auto pol = window_policy(body);
  if (!pol.ok()) return respond_error(out, http_error(pol.error()));
  window_op(
      out, client, "", nullptr, [this, client, p = *pol] { return windows->create(client, p); },
      201);
}

void Server::Impl::get_window(const HttpRequest&, const PathParams& m, const std::string& client,
                              Out out) {
  ++metrics.requests_windows;
  on_scheduler(
      out, [this, client, id = m[1]] { return windows->describe(client, id); }, window_json);
}

void Server::Impl::delete_window(const HttpRequest&, const PathParams& m, const std::string& client,
                                 Out out) {
  ++metrics.requests_windows;
  on_scheduler(
      out,
      [this, client, id = m[1]]() -> Result<std::string> {
        KAMERA_TRY(windows->erase(client, id));
        return id;
      },
      [](const std::string& id) {
        return json{{"id", id}, {"deleted", true}};
      });
}

void Server::Impl::edit_window(const HttpRequest& req, const PathParams& m,
                               const std::string& client, Out out) {
  ++metrics.requests_windows;
  const std::string id = m[1], op = m[2];
  json body = json::object();
  if (auto bad = parse_optional_body(req, body)) return respond_error(out, *bad);
  auto edit = window_edit(op, body, [this](const json& b) {
    return chunk_content(b, model, opts.max_chunk_tokens, max_chunk_bytes,
                         opts.control_tokens_in_text);
  });
  if (!edit.ok()) return respond_error(out, http_error(edit.error()));
  // shared by the quota check and the edit
  auto e = std::make_shared<const WindowEdit>(std::move(edit.value()));
  window_op(
      out, client, id, e, [this, client, id, e] { return windows->edit(client, id, *e); },
      op == "fork" ? 201 : 200);
}

// A window operation on the scheduler thread, refused first when it would pass a quota: 429 for
// the client's own share, 503 for the pages kept apart from completions (both with Retry-After).
void Server::Impl::window_op(const Out& out, const std::string& client, const std::string& id,
                             std::shared_ptr<const WindowEdit> e,
                             std::function<Result<WindowView>()> fn, int ok) {
  auto refuse = [this, client, id, e]() -> std::optional<HttpError> {
    auto q = windows->over_quota(client, id, e.get());
    if (!q) return std::nullopt;
    ++metrics.rejected_quota;
    if (q->total) return HttpError{503, q->message, "server_error", "window_capacity"};
    return HttpError{429, q->message, "rate_limit_error", "quota_exceeded"};
  };
  on_scheduler(out, std::move(fn), window_json, ok, std::move(refuse));
}

}  // namespace kamera
