#include "server/media_parts.h"

#include <chrono>

#include "audio/audio_chunks.h"  // kAudioSampleRate
#include "audio/audio_tower.h"
#include "media/audio_decode.h"
#include "media/audio_resample.h"
#include "media/data_url.h"
#include "server/media_source.h"
#include "server/request_segments.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

HttpError refusal(int status, const char* code, std::string message) {
  return {status, std::move(message), "invalid_request_error", code};
}

// "image", "video", "audio", or "" for any other part.
std::string media_kind(const ojson& part) {
  if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) return "";
  const std::string& t = part["type"].get_ref<const std::string&>();
  if (t == "image_url" || t == "image") return "image";
  if (t == "video") return "video";
  if (t == "input_audio") return "audio";
  return "";
}

// The URL of an image part ({"image_url": {"url"}} or {"image_url": "..."}) or of a frame
// ("..." or {"url"}); empty when there is none.
std::string url_of(const ojson& v) {
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

bool has_media_items(const ojson& content) {
  if (!content.is_array()) return false;
  for (const ojson& p : content)
    if (!media_kind(p).empty()) return true;
  return false;
}

bool has_media_parts(const ojson& body) {
  if (!body.contains("messages") || !body["messages"].is_array()) return false;
  for (const ojson& m : body["messages"])
    if (m.is_object() && m.contains("content") && has_media_items(m["content"])) return true;
  return false;
}

Result<std::unique_ptr<ServerMedia>> ServerMedia::load(const std::string& mmproj,
                                                       const Model& decoder,
                                                       const MediaOptions& opts, int threads,
                                                       ChunkStore* store) {
  if (opts.max_images < 1 || opts.max_image_bytes < 1 || opts.max_image_pixels < 1 ||
      opts.max_image_rows < 1 || opts.max_image_rgb_bytes < 1)
    return make_error(ErrorCode::InvalidArgument, "the image limits must be at least 1");
  KAMERA_ASSIGN_OR_RETURN(auto tower, load_media_tower(mmproj, decoder, threads, store));
  return std::unique_ptr<ServerMedia>(new ServerMedia(std::move(tower), decoder, opts));
}

ServerMedia::ServerMedia(std::unique_ptr<MediaTower> tower, const Model& decoder,
                         const MediaOptions& opts)
    : tower_(std::move(tower)),
      decoder_(decoder),
      opts_(opts),
      piece_bytes_(longest_piece_bytes(decoder)) {}

struct ServerMedia::Part {
  std::vector<std::vector<uint8_t>> bytes;  // each picture's encoded bytes
  std::vector<ImageSize> sizes;             // and its declared size
  bool audio = false;                       // an input_audio part: its clip in samples
  std::vector<float> samples;               // 16 kHz mono
  double fps = 0;                           // a video's rate (0: the default)
  int64_t rows = 0;                         // what the tower makes of it
  size_t message = 0, content = 0;          // its place: messages[message].content[content]
  std::string param;                        // messages[i].content[j]
};

// One picture's bytes by URL kind, its format sniffed, its declared size read from its header
// and checked against the pixel limit: nothing decoded.
std::optional<HttpError> ServerMedia::picture_bytes(const ojson& ref, std::vector<uint8_t>& bytes,
                                                    ImageSize& size) const {
  const std::string url = url_of(ref);
  if (url.empty())
    return refusal(400, "invalid_media_part",
                   "an image part needs \"image_url\": {\"url\": ...} (a video frame a URL)");
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
  auto s = read_image_size(bytes, "image");
  if (!s.ok()) return refusal(400, "invalid_image", s.message());
  DecodeLimits lim;
  lim.max_pixels = opts_.max_image_pixels;
  if (Status st = check_image_dims(s->width, s->height, "image", lim); !st.ok())
    return st.error().code == ErrorCode::InvalidArgument
               ? refusal(413, "image_too_large", st.message() + " (--max-image-pixels)")
               : refusal(400, "invalid_image", st.message());
  size = *s;
  return std::nullopt;
}

// One image or video part, checked and read: its pictures' bytes and sizes, and the rows the
// tower will make of them.
std::optional<HttpError> ServerMedia::read_part(const ojson& part, Part& out) const {
  if (media_kind(part) == "audio") return read_audio(part, out);
  std::vector<ojson> refs;
  if (part.contains("fps")) {
    const ojson& f = part["fps"];
    if (media_kind(part) != "video" || !f.is_number() || !(f.get<double>() > 0) ||
        !(f.get<double>() <= 1000))
      return refusal(400, "invalid_media_part",
                     "\"fps\" goes on a video part and must be a number in (0, 1000]");
    out.fps = f.get<double>();
  }
  if (media_kind(part) == "image") {
    refs.push_back(part.contains("image_url") ? part["image_url"] : ojson());
  } else if (!tower_->takes_video()) {
    return refusal(400, "invalid_media_part",
                   "this model reads single frames: send each frame as its own image_url part");
  } else if (part.contains("frames") && part["frames"].is_array() && !part["frames"].empty()) {
    refs.assign(part["frames"].begin(), part["frames"].end());
  } else {
    return refusal(400, "invalid_media_part", "a video part needs \"frames\": [url, ...]");
  }
  out.bytes.resize(refs.size());
  out.sizes.resize(refs.size());
  for (size_t i = 0; i < refs.size(); ++i)
    if (auto e = picture_bytes(refs[i], out.bytes[i], out.sizes[i])) return e;
  auto rows = tower_->rows(out.sizes);
  if (!rows.ok()) return refusal(400, "invalid_image", "image: " + rows.message());
  out.rows = *rows;
  return std::nullopt;
}

namespace {

// The longest clip worth decoding: past it, the clip's rows alone are over the context or
// --max-image-rows (the tower's rows grow with the samples: a binary search over the 10 minutes
// decode_audio allows at most). A tower whose shortest clip is over already keeps the default
// bound; the cost check refuses it by rows.
double max_audio_seconds(const MediaTower& tower, int64_t row_budget) {
  const AudioLimits defaults;
  auto fits = [&](int64_t n) {
    auto r = tower.audio_rows(n);
    return r.ok() && *r <= row_budget;
  };
  int64_t lo = 1, hi = int64_t(defaults.max_seconds * kAudioSampleRate);
  if (!fits(lo) || fits(hi)) return defaults.max_seconds;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return double(lo) / kAudioSampleRate;
}

HttpError audio_refusal(const Error& e) {
  switch (e.code) {
    case ErrorCode::Unsupported:
      return refusal(415, "unsupported_media_type", e.message);
    case ErrorCode::InvalidArgument:
      return refusal(413, "audio_too_large", e.message);
    default:
      return refusal(400, "invalid_audio", e.message);
  }
}

}  // namespace

// One input_audio part ({"input_audio": {"data": BASE64, "format": "wav" | "mp3" | "flac"}}):
// its bytes checked against the byte limit before the base64 is decoded, the file decoded
// (media/audio_decode.h: its container must be the declared format, its duration within what the
// context and --max-image-rows can take) and resampled to 16 kHz (cheap beside the tower), and
// the rows the tower will make of it.
std::optional<HttpError> ServerMedia::read_audio(const ojson& part, Part& out) const {
  out.audio = true;
  if (!tower_->takes_audio())
    return refusal(400, "invalid_media_part",
                   "audio: this server's tower reads no audio (input_audio parts need a "
                   "Qwen2.5-Omni --mmproj)");
  const ojson& in = part.contains("input_audio") ? part["input_audio"] : ojson();
  if (!in.is_object() || !in.contains("data") || !in["data"].is_string())
    return refusal(400, "invalid_media_part",
                   "an input_audio part needs \"input_audio\": {\"data\": BASE64, \"format\": "
                   "\"wav\"}");
  const std::string name =
      in.contains("format") && in["format"].is_string() ? in["format"].get<std::string>() : "";
  const auto format = audio_format_named(name);
  if (!format)
    return refusal(415, "unsupported_media_type",
                   fmt::format("audio: format '{}' is not supported ({})", name.substr(0, 32),
                               audio_format_names()));
  const std::string& data = in["data"].get_ref<const std::string&>();
  if (data.size() / 4 * 3 > opts_.max_image_bytes + opts_.max_image_bytes / 8 + 16)
    return refusal(413, "audio_too_large",
                   fmt::format("audio: about {} bytes, over the limit of {} (--max-image-bytes)",
                               data.size() / 4 * 3, opts_.max_image_bytes));
  auto bytes = base64_decode(data);
  if (!bytes.ok()) return refusal(400, "invalid_base64", "audio: " + bytes.message());
  const AudioLimits limits{
      int64_t(opts_.max_image_bytes),
      max_audio_seconds(*tower_, std::min<int64_t>(decoder_.cfg.ctx_len, opts_.max_image_rows))};
  auto clip = decode_audio(*bytes, *format, "audio", limits);
  if (!clip.ok()) return audio_refusal(clip.error());
  auto samples = resample_audio(clip->samples, clip->sample_rate, kAudioSampleRate);
  if (!samples.ok()) return refusal(400, "invalid_audio", "audio: " + samples.message());
  out.samples = std::move(samples.value());
  auto rows = tower_->audio_rows(int64_t(out.samples.size()));
  if (!rows.ok()) return refusal(400, "invalid_audio", "audio: " + rows.message());
  out.rows = *rows;
  return std::nullopt;
}

namespace {

// The bytes of a delimiter's text that spell its control tokens (its ids, in order), one range
// each; without ids (or a tokenizer), the whole text as one.
std::vector<TextRange> control_ranges(const std::string& text, const std::vector<int32_t>& ids,
                                      const Tokenizer* tok) {
  if (text.empty()) return {};
  if (ids.empty() || !tok) return {{0, text.size()}};
  std::vector<TextRange> out;
  size_t at = 0;
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= tok->vocab().pieces.size() ||
        tok->vocab().types[size_t(id)] != TokenType::Control)
      continue;
    const std::string& piece = tok->vocab().pieces[size_t(id)];
    const size_t where = text.find(piece, at);
    if (where == std::string::npos) continue;
    out.push_back({where, where + piece.size()});
    at = where + piece.size();
  }
  return out;
}

// Bytes of the request's text (message contents and text parts): the prompt takes at least
// this over the longest vocabulary piece in tokens.
size_t text_bytes(std::span<const MediaContent> contents) {
  size_t n = 0;
  for (const MediaContent& mc : contents) {
    const ojson& c = *mc.content;
    if (c.is_string()) n += c.get_ref<const std::string&>().size();
    if (!c.is_array()) continue;
    for (const ojson& p : c)
      if (p.is_object() && p.contains("text") && p["text"].is_string())
        n += p["text"].get_ref<const std::string&>().size();
  }
  return n;
}

}  // namespace

// What the request's pictures will cost, from their headers: the rows they add to the prompt
// against the context and the row budget, their decoded RGB against its budget. A refusal names
// the part where the sum crossed the bound.
std::optional<HttpError> ServerMedia::check_cost(std::span<const MediaContent> contents,
                                                 std::span<const Part> parts) const {
  const int64_t ctx_len = decoder_.cfg.ctx_len;
  const int64_t text_tokens = int64_t(text_bytes(contents) / std::max<size_t>(1, piece_bytes_));
  int64_t rows = 0, rgb = 0;
  for (const Part& p : parts) {
    rows += p.rows;
    for (const ImageSize& s : p.sizes) rgb += s.rgb_bytes();
    if (rows + text_tokens + 1 > ctx_len)
      return HttpError{400,
                       fmt::format("the request's pictures make {} rows of the prompt (its text "
                                   "at least {} tokens more); the model's context is {} tokens",
                                   rows, text_tokens, ctx_len),
                       "invalid_request_error", "context_length_exceeded", p.param};
    if (rows > opts_.max_image_rows)
      return HttpError{400,
                       fmt::format("image: the request's pictures make {} rows, over the limit "
                                   "of {} (--max-image-rows)",
                                   rows, opts_.max_image_rows),
                       "invalid_request_error", "invalid_image", p.param};
    if (rgb > opts_.max_image_rgb_bytes)
      return HttpError{400,
                       fmt::format("image: the request's pictures decode to {} bytes of RGB, "
                                   "over the limit of {} MiB (--max-image-rgb-mb)",
                                   rgb, opts_.max_image_rgb_bytes >> 20),
                       "invalid_request_error", "invalid_image", p.param};
  }
  return std::nullopt;
}

// One image or video part: pictures decoded, encoded (or found in the cache), and the part
// recorded in `out` at its place with its chunk and the tower's delimiters (the prompt puts them
// around it); the body is left as the client sent it.
std::optional<HttpError> ServerMedia::add_part(Part& part, RequestMedia& out,
                                               ServerMetrics& metrics,
                                               const std::function<bool()>& stop) {
  if (part.audio) return add_audio(part, out, stop);
  std::vector<Image> pictures(part.bytes.size());
  DecodeLimits lim;
  lim.max_bytes = int64_t(opts_.max_image_bytes);
  lim.max_pixels = opts_.max_image_pixels;
  for (size_t i = 0; i < part.bytes.size(); ++i) {
    auto d = decode_image(part.bytes[i], "image", lim);
    if (!d.ok())
      return d.error().code == ErrorCode::Unsupported
                 ? refusal(415, "unsupported_media_type", d.message())
                 : refusal(400, "invalid_image", d.message());
    pictures[i] = std::move(d.value());
    std::vector<uint8_t>().swap(part.bytes[i]);  // decoded: the bytes are not needed any more
  }
  const auto cancelled = [] {
    return refusal(400, "cancelled", "the client left while its pictures were encoded");
  };
  bool encoded = false;
  Result<std::shared_ptr<const ChunkContent>> chunk = make_error(ErrorCode::Internal, "unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop && stop()) return cancelled();  // it left while another request held the tower
    const auto t0 = std::chrono::steady_clock::now();
    chunk = tower_->chunk(pictures, &encoded, part.fps, stop);
    if (encoded)
      metrics.vision_encode_seconds.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!chunk.ok()) {
    if (stop && stop()) return cancelled();
    return refusal(400, "invalid_image", "image: " + chunk.message());
  }
  ++out.images;
  out.frames += int(part.sizes.size());
  out.encoded += encoded;
  out.cached_embeddings += !encoded;
  out.image_tokens += (*chunk)->n();
  (encoded ? metrics.images_encoded : metrics.image_embedding_hits) += 1;
  record(part, *chunk, encoded, tower_->delimiters(), out);
  return std::nullopt;
}

// An input_audio part: its clip encoded (or found in the tower's cache) and recorded as a
// picture's chunk is, between the tower's audio delimiters.
std::optional<HttpError> ServerMedia::add_audio(Part& part, RequestMedia& out,
                                                const std::function<bool()>& stop) {
  const auto cancelled = [] {
    return refusal(400, "cancelled", "the client left while its audio was encoded");
  };
  bool encoded = false;
  Result<std::shared_ptr<const ChunkContent>> chunk = make_error(ErrorCode::Internal, "unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop && stop()) return cancelled();
    chunk = tower_->audio_chunk(part.samples, &encoded, stop);
  }
  if (!chunk.ok()) {
    if (stop && stop()) return cancelled();
    return refusal(400, "invalid_audio", "audio: " + chunk.message());
  }
  ++out.audio_clips;
  out.encoded += encoded;
  out.cached_embeddings += !encoded;
  out.image_tokens += (*chunk)->n();
  record(part, *chunk, encoded, tower_->audio_delimiters(), out);
  return std::nullopt;
}

// A media part's chunk in `out`: by id, its place, rows and delimiters.
void ServerMedia::record(const Part& part, const std::shared_ptr<const ChunkContent>& chunk,
                         bool encoded, const VisionDelimiters& d, RequestMedia& out) const {
  const ChunkId id = chunk_id(decoder_.fingerprint, *chunk);
  if (!out.find(id)) out.chunks.emplace_back(id, chunk);
  if (!encoded && !out.embedding_hit(id)) out.embedding_hits.push_back(id);
  const Tokenizer* tok = decoder_.tokenizer ? &*decoder_.tokenizer : nullptr;
  out.parts.push_back({part.message, part.content, id, chunk->n(), d.open_text, d.close_text,
                       control_ranges(d.open_text, d.open, tok),
                       control_ranges(d.close_text, d.close, tok)});
}

std::vector<MediaContent> chat_media_contents(const ojson& body) {
  std::vector<MediaContent> out;
  if (!body.contains("messages") || !body["messages"].is_array()) return out;
  const ojson& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    if (m.is_object() && m.contains("content"))
      out.push_back({&m["content"], i, fmt::format("messages[{}].content", i)});
  }
  return out;
}

std::optional<HttpError> ServerMedia::prepare(const ojson& body, RequestMedia& out,
                                              ServerMetrics& metrics,
                                              const std::function<bool()>& stop) {
  return prepare(chat_media_contents(body), out, metrics, stop);
}

std::optional<HttpError> ServerMedia::prepare(std::span<const MediaContent> contents,
                                              RequestMedia& out, ServerMetrics& metrics,
                                              const std::function<bool()>& stop) {
  // the pictures of the whole request are counted before any is read
  int64_t pictures = 0;
  for (const MediaContent& mc : contents) {
    if (!mc.content->is_array()) continue;
    for (const ojson& p : *mc.content) {
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
  // every part read and sized, the request's cost checked, and only then anything decoded
  std::vector<Part> media;
  for (const MediaContent& mc : contents) {
    if (!mc.content->is_array()) continue;
    const ojson& parts = *mc.content;
    for (size_t j = 0; j < parts.size(); ++j) {
      if (media_kind(parts[j]).empty()) continue;
      Part& p = media.emplace_back();
      p.message = mc.message;
      p.content = j;
      p.param = fmt::format("{}[{}]", mc.where, j);
      if (auto e = read_part(parts[j], p)) {
        e->param = p.param;
        return e;
      }
    }
  }
  if (auto e = check_cost(contents, media)) return e;
  for (Part& p : media)
    if (auto e = add_part(p, out, metrics, stop)) {
      e->param = p.param;
      return e;
    }
  return std::nullopt;
}

}  // namespace kamera
