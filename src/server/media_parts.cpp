#include "server/media_parts.h"

#include <chrono>

#include "media/data_url.h"
#include "server/media_source.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

HttpError refusal(int status, const char* code, std::string message) {
  return {status, std::move(message), "invalid_request_error", code};
}

// "image", "video", or "" for any other part.
std::string media_kind(const json& part) {
  if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) return "";
  const std::string& t = part["type"].get_ref<const std::string&>();
  if (t == "image_url" || t == "image") return "image";
  if (t == "video") return "video";
  return "";
}

// The URL of an image part ({"image_url": {"url"}} or {"image_url": "..."}) or of a frame
// ("..." or {"url"}); empty when there is none.
std::string url_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("url") && v["url"].is_string())
    return v["url"].get<std::string>();
  return "";
}

// The bytes of a data URL (PNG or JPEG only), its size checked before decoding the base64.
std::optional<HttpError> data_url_bytes(const std::string& url, const MediaOptions& o,
                                        std::vector<uint8_t>& bytes) {
  auto d = parse_data_url(url);
  if (!d.ok()) return refusal(400, "invalid_data_url", "image: " + d.message());
  if (d->mime != "image/png" && d->mime != "image/jpeg" && d->mime != "image/jpg")
    return refusal(415, "unsupported_media_type",
                   fmt::format("image: media type '{}' is not supported (image/png, image/jpeg)",
                               d->mime.substr(0, 64)));
  if (!d->base64)
    return refusal(400, "invalid_data_url", "image: the data URL must be base64 (';base64,')");
  // before decoding: the text's length bounds the size (whitespace tolerated up to an eighth)
  if (d->payload.size() / 4 * 3 > o.max_image_bytes + o.max_image_bytes / 8 + 16)
    return refusal(413, "image_too_large",
                   fmt::format("image: about {} bytes, over the limit of {} (--max-image-bytes)",
                               d->payload.size() / 4 * 3, o.max_image_bytes));
  auto b = base64_decode(d->payload);
  if (!b.ok()) return refusal(400, "invalid_base64", "image: " + b.message());
  if (b->size() > o.max_image_bytes)
    return refusal(413, "image_too_large",
                   fmt::format("image: {} bytes, over the limit of {} (--max-image-bytes)",
                               b->size(), o.max_image_bytes));
  bytes = std::move(b.value());
  return std::nullopt;
}

// The bytes of a local file, confined to the media directory.
std::optional<HttpError> local_bytes(const std::string& url, const MediaOptions& o,
                                     std::vector<uint8_t>& bytes) {
  if (o.allow_local_dir.empty())
    return refusal(403, "local_media_disabled",
                   "image: local paths and file: URLs are refused (the server was not started "
                   "with --allow-local-media DIR)");
  auto path = confined_media_path(o.allow_local_dir, url);
  if (!path.ok())
    return path.error().code == ErrorCode::NotFound
               ? refusal(404, "media_not_found", "image: " + path.message())
               : refusal(403, "media_path_forbidden", "image: " + path.message());
  auto b = read_media_file(*path, o.max_image_bytes);
  if (!b.ok())
    return b.error().code == ErrorCode::InvalidArgument
               ? refusal(413, "image_too_large", "image: " + b.message() + " (--max-image-bytes)")
               : refusal(404, "media_not_found", "image: " + b.message());
  bytes = std::move(b.value());
  return std::nullopt;
}

}  // namespace

bool has_media_items(const json& content) {
  if (!content.is_array()) return false;
  for (const json& p : content)
    if (!media_kind(p).empty()) return true;
  return false;
}

bool has_media_parts(const json& body) {
  if (!body.contains("messages") || !body["messages"].is_array()) return false;
  for (const json& m : body["messages"])
    if (m.is_object() && m.contains("content") && has_media_items(m["content"])) return true;
  return false;
}

Result<std::unique_ptr<ServerMedia>> ServerMedia::load(const std::string& mmproj,
                                                       const Model& decoder,
                                                       const MediaOptions& opts, int threads,
                                                       ChunkStore* store) {
  if (opts.max_images < 1 || opts.max_image_bytes < 1 || opts.max_image_pixels < 1)
    return make_error(ErrorCode::InvalidArgument, "the image limits must be at least 1");
  KAMERA_ASSIGN_OR_RETURN(auto tower, MediaTower::load(mmproj, decoder, threads, store));
  return std::unique_ptr<ServerMedia>(new ServerMedia(std::move(tower), decoder, opts));
}

ServerMedia::ServerMedia(std::unique_ptr<MediaTower> tower, const Model& decoder,
                         const MediaOptions& opts)
    : tower_(std::move(tower)), decoder_(decoder), opts_(opts) {}

// One picture: its bytes by URL kind, its format sniffed, decoded within the pixel limit.
std::optional<HttpError> ServerMedia::load_picture(const json& ref, Image& img) const {
  const std::string url = url_of(ref);
  if (url.empty())
    return refusal(400, "invalid_media_part",
                   "an image part needs \"image_url\": {\"url\": ...} (a video frame a URL)");
  std::vector<uint8_t> bytes;
  switch (media_url_kind(url)) {
    case MediaUrlKind::Remote:
      return refusal(400, "remote_media_unsupported",
                     "image: http(s) URLs are not fetched (the server makes no network "
                     "requests); send the image inline as a data: URL");
    case MediaUrlKind::Other:
      return refusal(400, "unsupported_url",
                     "image: the URL scheme is not supported (data:, or a local path with "
                     "--allow-local-media)");
    case MediaUrlKind::Data:
      if (auto e = data_url_bytes(url, opts_, bytes)) return e;
      break;
    case MediaUrlKind::Local:
      if (auto e = local_bytes(url, opts_, bytes)) return e;
      break;
  }
  if (sniff_image_format(bytes) == ImageFormat::Unknown)
    return refusal(415, "unsupported_media_type", "image: the bytes are neither PNG nor JPEG");
  DecodeLimits lim;
  lim.max_bytes = int64_t(opts_.max_image_bytes);
  lim.max_pixels = opts_.max_image_pixels;
  auto d = decode_image(bytes, "image", lim);
  if (!d.ok()) {
    if (d.error().code == ErrorCode::InvalidArgument)
      return refusal(413, "image_too_large", d.message() + " (--max-image-pixels)");
    if (d.error().code == ErrorCode::Unsupported)
      return refusal(415, "unsupported_media_type", d.message());
    return refusal(400, "invalid_image", d.message());
  }
  img = std::move(d.value());
  return std::nullopt;
}

// One image or video part: pictures decoded, encoded (or found in the cache), and the part
// replaced by a chunk part (between the delimiters when the tower's prompt has them).
std::optional<HttpError> ServerMedia::add_part(const json& part, json& parts, RequestMedia& out,
                                               ServerMetrics& metrics) {
  std::vector<json> refs;
  double fps = 0;  // 0: the default rate
  if (part.contains("fps")) {
    const json& f = part["fps"];
    if (media_kind(part) != "video" || !f.is_number() || !(f.get<double>() > 0) ||
        !(f.get<double>() <= 1000))
      return refusal(400, "invalid_media_part",
                     "\"fps\" goes on a video part and must be a number in (0, 1000]");
    fps = f.get<double>();
  }
  if (media_kind(part) == "image") {
    refs.push_back(part.contains("image_url") ? part["image_url"] : json());
  } else if (!tower_->takes_video()) {
    return refusal(400, "invalid_media_part",
                   "this model reads single frames: send each frame as its own image_url part");
  } else if (part.contains("frames") && part["frames"].is_array() && !part["frames"].empty()) {
    refs.assign(part["frames"].begin(), part["frames"].end());
  } else {
    return refusal(400, "invalid_media_part", "a video part needs \"frames\": [url, ...]");
  }
  std::vector<Image> pictures(refs.size());
  for (size_t i = 0; i < refs.size(); ++i)
    if (auto e = load_picture(refs[i], pictures[i])) return e;
  bool encoded = false;
  Result<std::shared_ptr<const ChunkContent>> chunk = make_error(ErrorCode::Internal, "unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto t0 = std::chrono::steady_clock::now();
    chunk = tower_->chunk(pictures, &encoded, fps);
    if (encoded)
      metrics.vision_encode_seconds.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!chunk.ok()) return refusal(400, "invalid_image", "image: " + chunk.message());
  ++out.images;
  out.frames += int(refs.size());
  out.encoded += encoded;
  out.cached_embeddings += !encoded;
  out.image_tokens += (*chunk)->n();
  (encoded ? metrics.images_encoded : metrics.image_embedding_hits) += 1;
  const ChunkId id = chunk_id(decoder_.fingerprint, **chunk);
  if (!out.find(id)) out.chunks.emplace_back(id, *chunk);
  if (!encoded && !out.embedding_hit(id)) out.embedding_hits.push_back(id);
  const VisionDelimiters d = tower_->delimiters();
  if (!d.open_text.empty()) parts.push_back({{"type", "text"}, {"text", d.open_text}});
  parts.push_back({{"type", "chunk"}, {"id", id.hex()}});
  if (!d.close_text.empty()) parts.push_back({{"type", "text"}, {"text", d.close_text}});
  return std::nullopt;
}

std::optional<HttpError> ServerMedia::prepare(json& body, RequestMedia& out,
                                              ServerMetrics& metrics) {
  if (!body.contains("messages") || !body["messages"].is_array()) return std::nullopt;
  // the pictures of the whole request are counted before any is decoded
  int64_t pictures = 0;
  for (const json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (const json& p : m["content"]) {
      const std::string kind = media_kind(p);
      if (kind == "image") {
        ++pictures;
      } else if (kind == "video" && p.contains("frames") && p["frames"].is_array()) {
        pictures += int64_t(p["frames"].size());
      }
    }
  }
  if (pictures > opts_.max_images)
    return refusal(400, "too_many_images",
                   fmt::format("the request has {} pictures (images and video frames); at most {}",
                               pictures, opts_.max_images));
  for (json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    json parts = json::array();
    for (json& p : m["content"]) {
      if (media_kind(p).empty()) {
        parts.push_back(std::move(p));  // moved: a body is never deep-copied
      } else if (auto e = add_part(p, parts, out, metrics)) {
        return e;
      }
    }
    m["content"] = std::move(parts);
  }
  return std::nullopt;
}

}  // namespace kamera
