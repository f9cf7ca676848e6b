#include "vision/vl_prompt.h"

#include "vision/media_prompt.h"
#include "vision/rope_index.h"

namespace kamera {

int32_t find_piece(const Tokenizer& tok, std::string_view text) {
  const auto& pieces = tok.vocab().pieces;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == text) return int32_t(i);
  return -1;
}

int count_image_markers(std::string_view prompt) {
  return count_markers(prompt, kImageMarker);
}

namespace {

// The text between markers, without the delimiters that close in on the markers; checks they are
// there.
Result<std::vector<std::string_view>> split_at_markers(std::string_view prompt,
                                                       std::string_view open,
                                                       std::string_view close) {
  std::vector<std::string_view> runs;
  size_t from = 0;
  int index = 0;
  for (size_t at = prompt.find(kImageMarker); at != std::string_view::npos;
       at = prompt.find(kImageMarker, from), ++index) {
    std::string_view before = prompt.substr(from, at - from);
    const size_t after = at + kImageMarker.size();
    // (a marker's close was checked on its turn: the text after it starts with it)
    if (before.size() < (index > 0 ? close.size() : 0) + open.size() || !before.ends_with(open) ||
        prompt.substr(after).find(close) != 0)
      return make_error(ErrorCode::InvalidArgument,
                        "prompt: <image> marker {} must be written as {}<image>{} (the delimiters "
                        "right around it, as the model's chat template writes them)",
                        index + 1, open, close);
    if (index > 0) before.remove_prefix(close.size());
    before.remove_suffix(open.size());
    runs.push_back(before);
    from = after;
  }
  std::string_view tail = prompt.substr(from);
  if (index > 0) tail.remove_prefix(close.size());
  runs.push_back(tail);
  return runs;
}

}  // namespace

VisionDelimiters qwen_delimiters(const Tokenizer* tok) {
  if (!tok) return {};
  const int32_t start = find_piece(*tok, kVisionStart), end = find_piece(*tok, kVisionEnd);
  if (start < 0 || end < 0) return {};
  return {std::string(kVisionStart), std::string(kVisionEnd), {start}, {end}};
}

VisionDelimiters qwen_picture_delimiters(const Tokenizer* tok) {
  VisionDelimiters d = qwen_delimiters(tok);
  if (!d.empty() || !tok) return d;
  const int32_t bos = find_piece(*tok, kVisionBos), eos = find_piece(*tok, kVisionEos);
  if (bos < 0 || eos < 0) return {};
  return {std::string(kVisionBos), std::string(kVisionEos), {bos}, {eos}};
}

Status check_vl_prompt(std::string_view prompt, size_t n_images, const VisionDelimiters& d) {
  const int markers = count_image_markers(prompt);
  if (markers != int(n_images))
    return make_error(ErrorCode::InvalidArgument,
                      "prompt has {} <image> marker(s) but {} image(s) were given (one image per "
                      "marker, in order)",
                      markers, n_images);
  KAMERA_TRY(split_at_markers(prompt, d.open_text, d.close_text));
  return Status::Ok();
}

Status check_vl_prompt(std::string_view prompt, size_t n_images) {
  const VisionDelimiters qwen{std::string(kVisionStart), std::string(kVisionEnd), {}, {}};
  return check_vl_prompt(prompt, n_images, qwen);
}

Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<QwenVisionEmbeddings> images,
                                                   int decoder_dim) {
  KAMERA_TRY(check_vl_prompt(prompt, images.size()));
  const VisionDelimiters d = qwen_delimiters(&tok);
  if (!images.empty() && d.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "the decoder's vocabulary has no {} / {} token: it is not a Qwen2-VL "
                      "decoder",
                      kVisionStart, kVisionEnd);
  std::vector<ChunkContent> chunks;
  for (QwenVisionEmbeddings& e : images) chunks.push_back(image_chunk(std::move(e)));
  return vl_prompt_pieces(tok, prompt, std::move(chunks), d, decoder_dim);
}

Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<ChunkContent> images,
                                                   const VisionDelimiters& d, int decoder_dim) {
  KAMERA_TRY(check_vl_prompt(prompt, images.size(), d));
  for (size_t i = 0; i < images.size(); ++i)
    if (images[i].dim != decoder_dim)
      return make_error(ErrorCode::InvalidArgument,
                        "image {}: the mmproj projects to width {}, the decoder is {} wide (the "
                        "two files are not a pair)",
                        i + 1, images[i].dim, decoder_dim);
  KAMERA_ASSIGN_OR_RETURN(const auto runs, split_at_markers(prompt, d.open_text, d.close_text));
  std::vector<ChunkContent> pieces;
  std::vector<int32_t> text = tok.encode(runs[0], tok.add_bos());
  for (size_t i = 0; i < images.size(); ++i) {
    text.insert(text.end(), d.open.begin(), d.open.end());
    if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::exchange(text, {})));
    pieces.push_back(std::move(images[i]));
    text = d.close;
    const auto more = tok.encode_raw(runs[i + 1]);
    text.insert(text.end(), more.begin(), more.end());
  }
  if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::move(text)));
  return pieces;
}

}  // namespace kamera
