// GET / and GET /ui/NAME: the embedded web page (server/web_assets.h). Open like /health (the
// page asks for the API key itself and sends it on every /v1 call it makes), answered on the I/O
// thread, and locked to its own origin: the page may load and call nothing but this server, and
// no other site may frame it.
#include "server/server_impl.h"
#include "server/web_assets.h"

namespace kamera {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/ui/index.html";
  for (const WebAsset& a : web_assets())
    if (a.path == path) return &a;
  return nullptr;
}

HttpResponse Server::Impl::web_response(const HttpRequest& head) {
  const WebAsset* a = find_web_asset(head.path);
  if (!a) return error_response({404, "no such file", "not_found_error", "no_route"});
  HttpResponse r;
  r.content_type = std::string(a->content_type);
  r.body = std::string(a->body);
  r.headers = {{"Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: "
                "blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                "frame-ancestors 'none'"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Referrer-Policy", "no-referrer"},
               {"Cache-Control", "no-cache"}};
  return r;
}

}  // namespace kamera
