// Completion requests (plain, chat, after a window): validated and bounded on a worker thread,
// queued to the scheduler, answered through an event sink as one JSON body or an SSE stream.
// The status of an error known before the first token is the real one, streamed or not.
#include <ctime>

#include "server/completion_sink.h"
#include "server/prompt_tokens.h"
#include "server/request_fields.h"
#include "server/server_impl.h"
#include "toolcall/reasoning.h"

namespace kamera {

void Server::Impl::completions(const HttpRequest& r, const PathParams&, const std::string& c,
                               Out o) {
  ++metrics.requests_completions;
  generate(r, c, "", false, o);
}

void Server::Impl::chat(const HttpRequest& r, const PathParams&, const std::string& c, Out o) {
  ++metrics.requests_chat;
  generate(r, c, "", true, o);
}

void Server::Impl::window_completions(const HttpRequest& r, const PathParams& m,
                                      const std::string& c, Out o) {
  ++metrics.requests_windows;
  generate(r, c, m[1], false, o);
}

// A prompt whose text cannot fit the context is refused before it is tokenized: a token covers
// at most max_prompt_bytes / ctx_len bytes, so longer text needs more tokens than the context.
Status Server::Impl::check_prompt_size(const GenRequest& r) const {
  size_t bytes = 0;
  for (const PromptPart& p : r.parts) bytes += p.text.size();
  if (bytes > max_prompt_bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "the prompt text ({} bytes) cannot fit the model's context of {} tokens",
                      bytes, model.cfg.ctx_len);
  return Status::Ok();
}

std::shared_ptr<void> Server::Impl::client_slot(const std::string& client) {
  const int cap = opts.max_client_requests > 0 ? opts.max_client_requests
                                               : opts.max_active + opts.max_queue / 2;
  std::lock_guard<std::mutex> lock(inflight_mu);
  int& n = inflight[client];
  if (n >= cap) return nullptr;
  ++n;
  // `this` only makes the hold non-null; the deleter gives the slot back.
  return std::shared_ptr<void>(this, [this, client](void*) {
    std::lock_guard<std::mutex> lock(inflight_mu);
    if (--inflight[client] == 0) inflight.erase(client);
  });
}

// A chat of a thinking model: its reasoning is split out of the output, which starts inside it
// when the prompt opened <think>. Not where the whole output is a constrained document (JSON, a
// forced tool call): the model writes no reasoning there.
void Server::Impl::mark_reasoning(GenRequest& r) const {
  // harmony's constrained outputs may open with an analysis message (toolcall/forced.h)
  const bool harmony = r.tool_calls == toolcall::Format::Harmony;
  if (r.grammar && r.grammar_trigger.empty() && !harmony) return;
  const PromptPart& last = r.parts.back();
  r.reasoning = toolcall::prompt_opens_reasoning(last.text);
}

// The request's generations (one per prompt of a batch), checked and bounded; nullopt on a
// refusal, already answered (its param named by `rename` when given: another API's field).
std::optional<std::vector<GenRequest>> Server::Impl::parse_generation(const ojson& body,
                                                                      const std::string& window,
                                                                      bool chat, const Out& out,
                                                                      const ParamName& rename,
                                                                      const RequestMedia* media) {
  auto refuse = [&](HttpError e) {
    if (rename) e.param = rename(e.param);
    respond_error(out, e);
    return std::nullopt;
  };
  const Endpoint ep = chat             ? Endpoint::Chat
                      : window.empty() ? Endpoint::Completions
                                       : Endpoint::Window;
  if (auto refused = check_fields(body, ep)) return refuse(*refused);
  toolcall::DecodePlan plan;
  if (chat) {
    auto p = plan_chat(body, out);
    if (auto* e = std::get_if<HttpError>(&p)) return refuse(*e);
    plan = std::get<toolcall::DecodePlan>(std::move(p));
  }
  const ChatTools tools{plan.render_tools, tool_format};
  std::string param;
  auto r = gen_requests(body, chat, opts, model.cfg, chat_template ? &*chat_template : nullptr,
                        &param, &tools, words ? &*words : nullptr, media);
  if (r.ok() && !window.empty() && r->size() != 1)
    r = make_error(ErrorCode::InvalidArgument, "a window completion takes one prompt"),
    param = "prompt";
  if (!r.ok()) {
    HttpError e = http_error(r.error());
    e.param = param;
    return refuse(e);
  }
  for (const GenRequest& g : *r)
    if (Status size = check_prompt_size(g); !size.ok())
      return refuse({400, size.message(), "invalid_request_error", "context_length_exceeded",
                     chat ? "messages" : "prompt"});
  if (auto refused = apply_plan(plan, *r)) return refuse(*refused);
  if (chat && reasoning)
    for (GenRequest& g : *r) mark_reasoning(g);
  return std::move(r.value());
}

void Server::Impl::generate(const HttpRequest& req, const std::string& client,
                            const std::string& window, bool chat, const Out& out) {
  ojson body;  // parsed once, in its order (schemas' property order), read where it lies
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  if (!window.empty() && body.contains("prompt") && has_media_items(body["prompt"]))
    return respond_error(out, {400,
                               "image and video parts are taken in /v1/chat/completions messages "
                               "and /v1/completions prompts, not in window completions",
                               "invalid_request_error", "invalid_media_part"});
  const bool include = include_usage(body);
  auto make_sink = [&](const std::vector<GenRequest>& reqs,
                       const std::shared_ptr<RequestMedia>& images,
                       std::shared_ptr<std::atomic<bool>> cancelled) {
    CompletionMeta meta;
    meta.id = fmt::format("cmpl-{:016x}{:08x}", completion_salt, ++completion_counter);
    meta.model = opts.model_name;
    meta.created = int64_t(std::time(nullptr));
    meta.chat = chat;
    meta.stream = reqs.front().stream;
    meta.include_usage = include;
    meta.logprobs = reqs.front().gen.logprobs >= 0;
    meta.tool_calls = reqs.front().tool_calls;
    meta.reasoning = reqs.front().reasoning;
    meta.generations = int(reqs.size());
    meta.media = images;
    auto sink = std::make_shared<CompletionSink>(
        meta, out, [this, out](int status, const json& b) { respond(out, status, b); },
        std::move(cancelled), answers->serial());
    return sink->sink();
  };
  serve_generation(body, client, window, chat, out, make_sink);
}

void Server::Impl::serve_generation(ojson& body, const std::string& client,
                                    const std::string& window, bool chat, const Out& out,
                                    const MakeSink& make_sink, const ParamName& rename) {
  auto images = std::make_shared<RequestMedia>();
  if (auto refused = prepare_media(body, chat, *images, out)) {
    if (rename) refused->param = rename(refused->param);
    return respond_error(out, *refused);
  }
  auto reqs = parse_generation(body, window, chat, out, rename, images.get());
  if (!reqs) return;
  std::shared_ptr<void> slot = client_slot(client);
  if (!slot) {
    ++metrics.rejected_quota;
    return respond_error(out, {429, "too many requests of this client in flight",
                               "rate_limit_error", "quota_exceeded"});
  }
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  if (images->parts.empty()) images = nullptr;  // no picture, video or audio part
  EventSink sink = make_sink(*reqs, images, cancelled);
  std::vector<std::unique_ptr<Generation>> gens;
  const TokenizeOptions to{opts.control_tokens_in_text, opts.segment_cache_bytes != 0};
  for (GenRequest& r : *reqs) {
    auto g = std::make_unique<Generation>();
    g->req = std::move(r);
    g->req.window_id = window;
    g->req.media = images;
    if (Status st = tokenize_prompt(ctx->cache(), g->req, to); !st.ok()) {  // not on the engine
      HttpError e = http_error(st.error());
      e.param = chat ? "messages" : "prompt";
      if (rename) e.param = rename(e.param);
      return respond_error(out, e);
    }
    g->client = client;
    g->client_slot = slot;
    g->out = sink;
    g->cancelled = cancelled;
    g->t_submit = now_s();
    gens.push_back(std::move(g));
  }
  out->on_gone([cancelled] { cancelled->store(true); });  // a client that left stops its work
  if (!scheduler->submit_all(std::move(gens)))
    respond_error(out, {429, "the server is busy: too many queued requests", "rate_limit_error",
                        "queue_full"});
}

// Image and video parts of chat messages, or of a /v1/completions prompt's parts, are read into
// `out` by their place (server/media_parts.h), the body left as sent; refused without a vision
// tower, and in window completions. A prompt's parts are read where they are (their places:
// (0, j)). The encode stops when the client leaves or the server stops.
std::optional<HttpError> Server::Impl::prepare_media(const ojson& body, bool chat,
                                                     RequestMedia& out, const Out& client) {
  if (chat) {
    if (!has_media_parts(body)) return std::nullopt;
  } else if (!body.contains("prompt") || !has_media_items(body["prompt"])) {
    return std::nullopt;
  }
  if (!media)
    return HttpError{400, "this server has no vision model: start it with --mmproj",
                     "invalid_request_error", "vision_not_enabled"};
  const auto stop = [this, &client] { return client->gone() || stopped.load(); };
  std::optional<HttpError> refused;
  if (chat) {
    refused = media->prepare(body, out, metrics, stop);
  } else {  // the prompt's parts are places (0, j), as the prompt code reads them
    const MediaContent prompt{&body["prompt"], 0, "prompt"};
    refused = media->prepare(std::span(&prompt, 1), out, metrics, stop);
  }
  if (refused && refused->code == "cancelled" && stopped.load())
    return HttpError{503, "the server is stopping", "server_error", "stopping"};
  return refused;
}

}  // namespace kamera
