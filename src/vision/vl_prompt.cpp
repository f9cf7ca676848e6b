#include "vision/vl_prompt.h"

#include "vision/rope_index.h"

namespace kamera {

int32_t find_piece(const Tokenizer& tok, std::string_view text) {
  const auto& pieces = tok.vocab().pieces;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == text) return int32_t(i);
  return -1;
}

int count_image_markers(std::string_view prompt) {
  int n = 0;
  for (size_t at = prompt.find(kImageMarker); at != std::string_view::npos;
       at = prompt.find(kImageMarker, at + kImageMarker.size()))
    ++n;
  return n;
}

namespace {

// The text between markers, without the delimiters that close in on the markers; checks they are
// there.
Result<std::vector<std::string_view>> split_at_markers(std::string_view prompt) {
  std::vector<std::string_view> runs;
  size_t from = 0;
  int index = 0;
  for (size_t at = prompt.find(kImageMarker); at != std::string_view::npos;
       at = prompt.find(kImageMarker, from), ++index) {
    std::string_view before = prompt.substr(from, at - from);
    const size_t after = at + kImageMarker.size();
    if (!before.ends_with(kVisionStart) || prompt.substr(after).find(kVisionEnd) != 0)
      return make_error(ErrorCode::InvalidArgument,
                        "prompt: <image> marker {} must be written as {}<image>{} (the delimiters "
                        "right around it, as Qwen2-VL's chat template writes them)",
                        index + 1, kVisionStart, kVisionEnd);
    if (index > 0) before.remove_prefix(kVisionEnd.size());
    before.remove_suffix(kVisionStart.size());
    runs.push_back(before);
    from = after;
  }
  std::string_view tail = prompt.substr(from);
  if (index > 0) tail.remove_prefix(kVisionEnd.size());
  runs.push_back(tail);
  return runs;
}

}  // namespace

Status check_vl_prompt(std::string_view prompt, size_t n_images) {
  const int markers = count_image_markers(prompt);
  if (markers != int(n_images))
    return make_error(ErrorCode::InvalidArgument,
                      "prompt has {} <image> marker(s) but {} image(s) were given (one image per "
                      "marker, in order)",
                      markers, n_images);
  KAMERA_TRY(split_at_markers(prompt));
  return Status::Ok();
}

Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<QwenVisionEmbeddings> images,
                                                   int decoder_dim) {
  KAMERA_TRY(check_vl_prompt(prompt, images.size()));
  const int markers = int(images.size());
  for (size_t i = 0; i < images.size(); ++i)
    if (images[i].dim != decoder_dim)
      return make_error(ErrorCode::InvalidArgument,
                        "image {}: the mmproj projects to width {}, the decoder is {} wide (the "
                        "two files are not a pair)",
                        i + 1, images[i].dim, decoder_dim);
  const int32_t start = find_piece(tok, kVisionStart), end = find_piece(tok, kVisionEnd);
  if (markers > 0 && (start < 0 || end < 0))
    return make_error(ErrorCode::InvalidArgument,
                      "the decoder's vocabulary has no {} / {} token: it is not a Qwen2-VL "
                      "decoder",
                      kVisionStart, kVisionEnd);
  KAMERA_ASSIGN_OR_RETURN(const auto runs, split_at_markers(prompt));
  std::vector<ChunkContent> pieces;
  std::vector<int32_t> text = tok.encode(runs[0], tok.add_bos());
  for (size_t i = 0; i < images.size(); ++i) {
    text.push_back(start);
    pieces.push_back(ChunkContent::from_tokens(std::exchange(text, {})));
    pieces.push_back(image_chunk(std::move(images[i])));
    text.push_back(end);
    const auto more = tok.encode_raw(runs[i + 1]);
    text.insert(text.end(), more.begin(), more.end());
  }
  if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::move(text)));
  return pieces;
}

}  // namespace kamera
