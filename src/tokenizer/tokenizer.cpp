#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_set>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"

namespace kamera {

using spm::byte_piece_value;
using spm::unescape_spaces;

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  const size_t n = vocab.pieces.size();
  if (n == 0) return make_error(ErrorCode::CorruptData, "tokenizer: empty vocabulary");
  if (vocab.kind == VocabKind::Bpe) {
    vocab.scores.clear();  // byte-level BPE ranks merges, not pieces: scores are not kept
    vocab.scores.shrink_to_fit();
    if (vocab.types.empty()) vocab.types.assign(n, TokenType::Normal);
  }
  if ((vocab.kind == VocabKind::Spm && vocab.scores.size() != n) || vocab.types.size() != n) {
    return make_error(ErrorCode::CorruptData, "tokenizer: {} pieces but {} scores and {} types", n,
                      vocab.scores.size(), vocab.types.size());
  }
  if (n > size_t(INT32_MAX))
    return make_error(ErrorCode::CorruptData, "tokenizer: {} pieces is too many", n);
  const auto check_id = [&](const char* what, int32_t id) -> Status {
    if (id < 0 || size_t(id) >= n) {
      return make_error(ErrorCode::CorruptData, "tokenizer: {} id {} out of range [0, {})", what,
                        id, n);
    }
    return Status::Ok();
  };
  if (vocab.kind == VocabKind::Bpe) {
    // Byte-level vocabularies may lack any of these (Qwen has no BOS, none has UNK).
    for (auto [what, id] : {std::pair{"eos", vocab.eos},
                            {"unk", vocab.unk},
                            {"eot", vocab.eot},
                            {"eom", vocab.eom},
                            {"pad", vocab.pad}})
      if (id != -1) KAMERA_TRY(check_id(what, id));
    if (vocab.bos != -1) KAMERA_TRY(check_id("bos", vocab.bos));
    if (vocab.bos == -1) vocab.bos = vocab.pad >= 0 ? vocab.pad : vocab.eos >= 0 ? vocab.eos : 0;
    Tokenizer tok;
    tok.vocab_ = std::move(vocab);
    KAMERA_TRY(tok.init_bpe());
    tok.init_eog();
    tok.init_harmony();
    return tok;
  }
  KAMERA_TRY(check_id("bos", vocab.bos));
  KAMERA_TRY(check_id("eos", vocab.eos));
  KAMERA_TRY(check_id("unk", vocab.unk));

  Tokenizer tok;
  std::fill(std::begin(tok.byte_token_), std::end(tok.byte_token_), -1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = vocab.pieces[i];
    tok.index_.add(piece);
    const int b = byte_piece_value(piece);
    if (b >= 0 && tok.byte_token_[b] < 0) tok.byte_token_[b] = int32_t(i);
  }
  tok.index_.build_index();  // keeps the first id of a duplicated piece
  tok.vocab_ = std::move(vocab);
  tok.init_eog();
  tok.init_harmony();
  tok.init_specials();
  return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, size_t limit) const {
  if (bpe_) return encode_bpe(text, add_bos, true, false, limit);
  return encode_with(text, add_bos, vocab_.add_space_prefix);
}

std::vector<int32_t> Tokenizer::encode_raw(std::string_view text, size_t limit) const {
  if (bpe_) return encode_bpe(text, false, true, false, limit);
  return encode_with(text, false, false);
}

std::vector<int32_t> Tokenizer::encode_marked(std::string_view text,
                                              std::span<const TextRange> control, bool first,
                                              size_t limit) const {
  std::vector<int32_t> out;
  if (bpe_) {
    out.reserve(std::min(text.size() / 3, limit) + 2);
    bpe_->encode(text, control, out, limit);
    return out;
  }
  return encode_spm_special(text, control, false, first && vocab_.add_space_prefix, limit);
}

std::string Tokenizer::decode(int32_t prev, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return {};
  const std::string& piece = vocab_.pieces[size_t(token)];
  switch (vocab_.types[size_t(token)]) {
    case TokenType::Control:
      if (std::binary_search(shown_.begin(), shown_.end(), token)) break;
      return {};
    case TokenType::Unknown:
    case TokenType::Unused:
      return {};
    case TokenType::Byte: {
      if (bpe_) break;
      const int b = byte_piece_value(piece);
      if (b >= 0) return std::string(1, char(b));
      break;  // a Byte-typed piece of another spelling prints as text
    }
    default:
      break;
  }
  if (bpe_) return std::string(bpe_->token_bytes(token));
  std::string text = unescape_spaces(piece);
  // the space prefix's own space, where the vocabulary adds one (not Gemma's), as llama.cpp's
  // detokenizer drops it
  if (vocab_.add_space_prefix && prev == vocab_.bos && !text.empty() && text[0] == ' ')
    text.erase(0, 1);
  return text;
}

std::vector<int32_t> Tokenizer::encode_bpe(std::string_view text, bool bos, bool parse_special,
                                           bool eos, size_t limit) const {
  std::vector<int32_t> out;
  out.reserve(std::min(text.size() / 3, limit) + 2);
  if (bos) out.push_back(vocab_.bos);
  bpe_->encode(text, parse_special, out, limit);
  if (eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, const EncodeOptions& o) const {
  if (bpe_) {
    return encode_bpe(text, o.add_special && vocab_.add_bos, o.parse_special,
                      o.add_special && vocab_.add_eos);
  }
  std::vector<int32_t> out;
  if (o.add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  const auto ids = encode_spm_special(text, {}, o.parse_special, vocab_.add_space_prefix);
  out.insert(out.end(), ids.begin(), ids.end());
  if (o.add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::piece(int32_t token) const {
  if (token < 0 || token >= n_vocab()) return {};
  if (bpe_) return std::string(bpe_->token_bytes(token));
  const std::string& p = vocab_.pieces[size_t(token)];
  const TokenType type = vocab_.types[size_t(token)];
  if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::Unused)
    return p;
  return decode(-1, token);
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

Status Tokenizer::init_bpe() {
  auto m = BpeModel::create(vocab_);
  if (!m.ok()) return m.error();
  bpe_ = std::move(m.value());
  // The merge table holds the merges by id pair: the text list (6 MB on a 150k vocabulary) goes.
  vocab_.merges.clear();
  vocab_.merges.shrink_to_fit();
  return Status::Ok();
}

void Tokenizer::init_eog() {
  // Texts llama.cpp also ends generation on (turn ends, end of text, Qwen's FIM stops).
  static const std::unordered_set<std::string_view> kStops = {
      "<|eot_id|>",    "<|im_end|>",    "<|end|>",      "<end_of_turn>",
      "<|endoftext|>", "<|eom_id|>",    "<EOT>",        "<｜end▁of▁sentence｜>",
      "<|fim_pad|>",   "<|repo_name|>", "<|file_sep|>",
  };
  eog_.clear();
  for (int32_t id : {vocab_.eos, vocab_.eot, vocab_.eom})
    if (id >= 0) eog_.push_back(id);
  for (size_t i = 0; i < vocab_.pieces.size(); ++i)
    if (kStops.count(vocab_.pieces[i])) eog_.push_back(int32_t(i));
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
}

// gpt-oss's vocabulary (o200k_harmony, told by its <|return|> and <|call|>): those two end the
// generation and <|end|> only ends a message (the model writes one after its reasoning, then its
// answer), and the markers of harmony's message headers print as text, so that the output can be
// parsed into channels (toolcall/harmony.h). llama.cpp does the same (its vocabulary loader
// prints <|channel|>, <|message|>, <|start|>, <|constrain|>; its server prints <|end|>).
void Tokenizer::init_harmony() {
  std::unordered_map<std::string_view, int32_t> ids;
  for (std::string_view t : {"<|return|>", "<|call|>", "<|end|>", "<|channel|>", "<|message|>",
                             "<|start|>", "<|constrain|>"})
    ids[t] = -1;
  for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
    auto it = ids.find(vocab_.pieces[i]);
    if (it != ids.end() && it->second < 0) it->second = int32_t(i);
  }
  if (ids["<|return|>"] < 0 || ids["<|call|>"] < 0) return;
  eog_.push_back(ids["<|return|>"]);
  eog_.push_back(ids["<|call|>"]);
  std::erase(eog_, ids["<|end|>"]);
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  for (std::string_view t : {"<|end|>", "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (ids[t] >= 0) shown_.push_back(ids[t]);
  std::sort(shown_.begin(), shown_.end());
}

std::string Tokenizer::decode_all(const std::vector<int32_t>& tokens) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t t : tokens) {
    out += decode(prev, t);
    prev = t;
  }
  return out;
}

}  // namespace kamera
