#include "vision/media_prompt.h"

#include <utility>

namespace kamera {

int count_markers(std::string_view prompt, std::string_view marker) {
  int n = 0;
  for (size_t at = prompt.find(marker); at != std::string_view::npos;
       at = prompt.find(marker, at + marker.size()))
    ++n;
  return n;
}

namespace {

struct Cut {
  std::vector<std::string_view> runs;  // the text around the markers, without the delimiters
  std::vector<size_t> kinds;           // the kind of each marker, in order
};

// The next marker of any kind at or after `from`: (position, kind), or npos.
std::pair<size_t, size_t> next_marker(std::string_view prompt, size_t from,
                                      std::span<const PromptMedia> kinds) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (size_t k = 0; k < kinds.size(); ++k) {
    const size_t at = prompt.find(kinds[k].marker, from);
    if (at < best.first) best = {at, k};
  }
  return best;
}

Result<Cut> cut_at_markers(std::string_view prompt, std::span<const PromptMedia> kinds) {
  Cut cut;
  std::vector<int> index(kinds.size(), 0);
  size_t from = 0;
  std::string_view close_before;  // the previous marker's close (checked on its turn)
  for (;;) {
    const auto [at, k] = next_marker(prompt, from, kinds);
    if (at == std::string_view::npos) break;
    const PromptMedia& m = kinds[k];
    const std::string_view open = m.delimiters.open_text, close = m.delimiters.close_text;
    std::string_view before = prompt.substr(from, at - from);
    const size_t after = at + m.marker.size();
    ++index[k];
    if (before.size() < close_before.size() + open.size() || !before.ends_with(open) ||
        prompt.substr(after).find(close) != 0)
      return make_error(ErrorCode::InvalidArgument,
                        "prompt: {} marker {} must be written as {}{}{} (the delimiters right "
                        "around it, as the model's chat template writes them)",
                        m.marker, index[k], open, m.marker, close);
    before.remove_prefix(close_before.size());
    before.remove_suffix(open.size());
    cut.runs.push_back(before);
    cut.kinds.push_back(k);
    from = after;
    close_before = close;
  }
  std::string_view tail = prompt.substr(from);
  tail.remove_prefix(close_before.size());
  cut.runs.push_back(tail);
  return cut;
}

}  // namespace

Status check_media_prompt(std::string_view prompt, std::span<const PromptMedia> kinds) {
  for (const PromptMedia& m : kinds) {
    const int markers = count_markers(prompt, m.marker);
    if (markers != int(m.count))
      return make_error(ErrorCode::InvalidArgument,
                        "prompt has {} {} marker(s) but {} {}(s) were given (one per marker, in "
                        "order)",
                        markers, m.marker, m.count, m.what);
  }
  KAMERA_TRY(cut_at_markers(prompt, kinds));
  return Status::Ok();
}

Result<std::vector<ChunkContent>> media_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                      std::vector<PromptMedia> kinds,
                                                      int decoder_dim) {
  KAMERA_TRY(check_media_prompt(prompt, kinds));
  for (const PromptMedia& m : kinds) {
    if (m.chunks.size() != m.count)
      return make_error(ErrorCode::InvalidArgument, "{} {}(s) were counted, {} given", m.count,
                        m.what, m.chunks.size());
    for (size_t i = 0; i < m.chunks.size(); ++i)
      if (m.chunks[i].dim != decoder_dim)
        return make_error(ErrorCode::InvalidArgument,
                          "{} {}: the mmproj projects to width {}, the decoder is {} wide (the "
                          "two files are not a pair)",
                          m.what, i + 1, m.chunks[i].dim, decoder_dim);
  }
  KAMERA_ASSIGN_OR_RETURN(const Cut cut, cut_at_markers(prompt, kinds));
  std::vector<size_t> next(kinds.size(), 0);
  std::vector<ChunkContent> pieces;
  std::vector<int32_t> text = tok.encode(cut.runs[0], tok.add_bos());
  for (size_t i = 0; i < cut.kinds.size(); ++i) {
    PromptMedia& m = kinds[cut.kinds[i]];
    text.insert(text.end(), m.delimiters.open.begin(), m.delimiters.open.end());
    if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::exchange(text, {})));
    pieces.push_back(std::move(m.chunks[next[cut.kinds[i]]++]));
    text = m.delimiters.close;
    const auto more = tok.encode_raw(cut.runs[i + 1]);
    text.insert(text.end(), more.begin(), more.end());
  }
  if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::move(text)));
  return pieces;
}

}  // namespace kamera
