// The web page of `kamera serve` (src/server/web/: index.html, app.js, app.css), compiled into
// the binary at build time (cmake/embed_files.cmake): GET / answers index.html, GET /ui/NAME the
// other files. Nothing is fetched at run time.
#pragma once

#include <span>
#include <string_view>

namespace kamera {

struct WebAsset {
  std::string_view path;          // "/ui/app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

std::span<const WebAsset> web_assets();

// The file a GET of `path` answers ("/" is /ui/index.html), or null.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace kamera
