#include "model/tokenizer.h"

#include "model/tokenizer_bpe.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <queue>
#include <unordered_set>

namespace kamera {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Bytes of the UTF-8 character at p[0..n): 1..4 for a well-formed sequence (no overlongs, no
// surrogates, at most U+10FFFF); 1 for any byte that does not start one.
size_t utf8_char_len(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 1;
  }
  if (len > n) return 1;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return len;
}

// ' ' -> "▁", optionally with a leading "▁".
std::string escape_spaces(std::string_view text, bool prefix) {
  std::string out;
  out.reserve(text.size() + text.size() / 4 + 3);
  if (prefix) out.append(kSpace);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpace);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// "▁" -> ' '.
std::string unescape_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a piece spelled exactly "<0xXX>" (upper-case hex), or -1.
int byte_piece_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

// Split into UTF-8 characters (malformed bytes become one-byte characters).
std::vector<std::string_view> split_chars(std::string_view s) {
  std::vector<std::string_view> out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8_char_len(p + i, s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// ---- encode ----

struct Symbol {
  int prev, next;
  uint32_t off, len;  // bytes of the escaped text; len 0 once merged into its left neighbour
};

struct Bigram {
  int left, right;
  float score;
  uint32_t len;
};

struct BigramLess {  // priority: higher score first, then leftmost
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// ---- synthetic vocabulary ----

struct WordEntry {
  std::vector<int> syms;  // ids into the symbol table
  int64_t count;
};

}  // namespace

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  const size_t n = vocab.pieces.size();
  if (n == 0) return make_error(ErrorCode::CorruptData, "tokenizer: empty vocabulary");
  if (vocab.kind == VocabKind::Bpe) {
    if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
    if (vocab.types.empty()) vocab.types.assign(n, TokenType::Normal);
  }
  if (vocab.scores.size() != n || vocab.types.size() != n) {
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
    return tok;
  }
  KAMERA_TRY(check_id("bos", vocab.bos));
  KAMERA_TRY(check_id("eos", vocab.eos));
  KAMERA_TRY(check_id("unk", vocab.unk));

  Tokenizer tok;
  tok.index_.reserve(n);
  std::fill(std::begin(tok.byte_token_), std::end(tok.byte_token_), -1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = vocab.pieces[i];
    tok.index_.emplace(piece, int32_t(i));  // keeps the first id of a duplicated piece
    const int b = byte_piece_value(piece);
    if (b >= 0 && tok.byte_token_[b] < 0) tok.byte_token_[b] = int32_t(i);
  }
  tok.vocab_ = std::move(vocab);
  tok.init_eog();
  return tok;
}

Result<Tokenizer> Tokenizer::from_llama2c_bytes(std::string_view bytes, int vocab_size,
                                                const std::string& name) {
  if (vocab_size <= 0) {
    return make_error(ErrorCode::CorruptData,
                      "llama2.c tokenizer {}: vocab size {} must be positive", name, vocab_size);
  }
  size_t pos = 0;
  const auto read_raw = [&](void* dst, size_t len) {
    if (bytes.size() - pos < len) return false;
    std::memcpy(dst, bytes.data() + pos, len);
    pos += len;
    return true;
  };
  int32_t max_token_length = 0;
  if (!read_raw(&max_token_length, sizeof max_token_length)) {
    return make_error(ErrorCode::CorruptData,
                      "llama2.c tokenizer {}: file too short for the header ({} bytes)", name,
                      bytes.size());
  }
  Vocab vocab;
  // Do not trust vocab_size for the reservation beyond what the file can hold (8 bytes a token).
  const size_t reserve = std::min<size_t>(size_t(vocab_size), bytes.size() / 8 + 1);
  vocab.pieces.reserve(reserve);
  vocab.scores.reserve(reserve);
  vocab.types.reserve(reserve);
  for (int i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t len = 0;
    if (!read_raw(&score, sizeof score) || !read_raw(&len, sizeof len)) {
      return make_error(ErrorCode::CorruptData,
                        "llama2.c tokenizer {}: token {}: file ends at byte {} inside the header",
                        name, i, bytes.size());
    }
    if (len < 0) {
      return make_error(ErrorCode::CorruptData,
                        "llama2.c tokenizer {}: token {}: negative length {}", name, i, len);
    }
    if (bytes.size() - pos < size_t(len)) {
      return make_error(ErrorCode::CorruptData,
                        "llama2.c tokenizer {}: token {}: length {} runs past the end of the file "
                        "({} bytes left)",
                        name, i, len, bytes.size() - pos);
    }
    std::string_view raw = bytes.substr(pos, size_t(len));
    pos += size_t(len);
    std::string piece = escape_spaces(raw, false);
    TokenType type = TokenType::Normal;
    if (i == 0) {
      type = TokenType::Unknown;
    } else if (i == 1 || i == 2) {
      type = TokenType::Control;
    } else if (byte_piece_value(piece) >= 0) {
      type = TokenType::Byte;
    }
    vocab.pieces.push_back(std::move(piece));
    vocab.scores.push_back(score);
    vocab.types.push_back(type);
  }
  vocab.unk = 0;
  vocab.bos = 1;
  vocab.eos = 2;
  vocab.add_space_prefix = true;
  auto tok = from_vocab(std::move(vocab));
  if (!tok)
    return make_error(ErrorCode::CorruptData, "llama2.c tokenizer {}: {}", name, tok.message());
  return tok;
}

Result<Tokenizer> Tokenizer::from_llama2c_file(const std::string& path, int vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::Io, "llama2.c tokenizer {}: cannot open file", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(ErrorCode::Io, "llama2.c tokenizer {}: read error", path);
  return from_llama2c_bytes(bytes, vocab_size, path);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, size_t limit) const {
  if (bpe_) return encode_bpe(text, add_bos, true, false, limit);
  return encode_with(text, add_bos, vocab_.add_space_prefix);
}

std::vector<int32_t> Tokenizer::encode_raw(std::string_view text, size_t limit) const {
  if (bpe_) return encode_bpe(text, false, true, false, limit);
  return encode_with(text, false, false);
}

std::vector<int32_t> Tokenizer::encode_with(std::string_view text, bool add_bos,
                                            bool space_prefix) const {
  std::vector<int32_t> out;
  if (add_bos) out.push_back(vocab_.bos);
  if (text.empty()) return out;

  const std::string s = escape_spaces(text, space_prefix);
  if (s.size() > UINT32_MAX / 2) return out;  // beyond any sensible input; offsets are 32-bit
  std::vector<Symbol> syms;
  syms.reserve(s.size());
  {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
      const size_t len = utf8_char_len(p + i, s.size() - i);
      const int idx = int(syms.size());
      syms.push_back({idx - 1, idx + 1, uint32_t(i), uint32_t(len)});
      i += len;
    }
    syms.back().next = -1;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  std::string key;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[size_t(left)];
    const Symbol& r = syms[size_t(right)];
    key.assign(s, l.off, l.len);
    key.append(s, r.off, r.len);
    const auto it = index_.find(key);
    if (it == index_.end()) return;
    queue.push({left, right, vocab_.scores[size_t(it->second)], l.len + r.len});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(int(i) - 1, int(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[size_t(b.left)];
    Symbol& r = syms[size_t(b.right)];
    // Stale entry: one side was merged away or grew since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i >= 0; i = syms[size_t(i)].next) {
    const Symbol& sym = syms[size_t(i)];
    key.assign(s, sym.off, sym.len);
    const auto it = index_.find(key);
    if (it != index_.end()) {
      out.push_back(it->second);
      continue;
    }
    bool all_bytes = true;
    for (char c : key) all_bytes = all_bytes && byte_token_[uint8_t(c)] >= 0;
    if (all_bytes) {
      for (char c : key) out.push_back(byte_token_[uint8_t(c)]);
    } else {
      out.push_back(vocab_.unk);
    }
  }
  return out;
}

std::string Tokenizer::decode(int32_t prev, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return {};
  const std::string& piece = vocab_.pieces[size_t(token)];
  switch (vocab_.types[size_t(token)]) {
    case TokenType::Control:
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
  if (bpe_) return bpe_->token_bytes(token);
  std::string text = unescape_spaces(piece);
  if (prev == vocab_.bos && !text.empty() && text[0] == ' ') text.erase(0, 1);
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
  std::vector<int32_t> out =
      encode_with(text, o.add_special && vocab_.add_bos, vocab_.add_space_prefix);
  if (o.add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::piece(int32_t token) const {
  if (token < 0 || token >= n_vocab()) return {};
  if (bpe_) return bpe_->token_bytes(token);
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

std::string Tokenizer::decode_all(const std::vector<int32_t>& tokens) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t t : tokens) {
    out += decode(prev, t);
    prev = t;
  }
  return out;
}

Result<Tokenizer::Vocab> build_synthetic_vocab(int n_vocab, std::string_view corpus) {
  // The corpus is read as encode() reads text: spaces escaped, a leading "▁" (SentencePiece's
  // dummy prefix) so that its first word is learned as "▁word" like every other.
  const std::string text = escape_spaces(corpus, !corpus.empty());

  // Distinct characters by decreasing frequency, ties by byte order.
  std::map<std::string, int64_t> char_count;
  for (std::string_view c : split_chars(text)) ++char_count[std::string(c)];
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::stable_sort(chars.begin(), chars.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  constexpr int kFixed = 3 + 256;
  if (n_vocab < kFixed + int(chars.size())) {
    return make_error(ErrorCode::InvalidArgument,
                      "synthetic vocab: n_vocab {} is below the {} fixed pieces plus {} corpus "
                      "characters",
                      n_vocab, kFixed, chars.size());
  }

  Tokenizer::Vocab v;
  v.pieces.reserve(size_t(n_vocab));
  v.scores.reserve(size_t(n_vocab));
  v.types.reserve(size_t(n_vocab));
  std::unordered_set<std::string> seen;
  const auto add = [&](std::string piece, float score, TokenType type) {
    seen.insert(piece);
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  int64_t rank = 0;  // creation order of characters and merges; score = -rank
  for (auto& [c, count] : chars) add(c, -float(rank++), TokenType::Normal);

  // Words: split before each "▁" (the "▁" starts the following word).
  std::vector<std::string> sym_text;  // symbol id -> text
  std::unordered_map<std::string, int> sym_id;
  const auto intern = [&](const std::string& t) {
    auto [it, inserted] = sym_id.emplace(t, int(sym_text.size()));
    if (inserted) sym_text.push_back(t);
    return it->second;
  };
  std::map<std::string, int64_t> word_count;
  {
    size_t start = 0;
    for (size_t i = 1; i <= text.size(); ++i) {
      if (i == text.size() || text.compare(i, kSpace.size(), kSpace) == 0) {
        if (i > start) ++word_count[text.substr(start, i - start)];
        start = i;
      }
    }
  }
  std::vector<WordEntry> words;
  words.reserve(word_count.size());
  for (const auto& [w, count] : word_count) {
    WordEntry e{{}, count};
    for (std::string_view c : split_chars(w)) e.syms.push_back(intern(std::string(c)));
    if (e.syms.size() > 1) words.push_back(std::move(e));
  }

  // BPE: merge the most frequent adjacent pair (ties: smallest merged string) until the vocab is
  // full or no pair occurs twice.
  const auto pair_key = [](int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  while (int(v.pieces.size()) < n_vocab) {
    std::unordered_map<uint64_t, int64_t> pair_count;
    for (const WordEntry& w : words) {
      for (size_t i = 0; i + 1 < w.syms.size(); ++i) {
        pair_count[pair_key(w.syms[i], w.syms[i + 1])] += w.count;
      }
    }
    uint64_t best = 0;
    int64_t best_count = 0;
    std::string best_text;
    for (const auto& [key, count] : pair_count) {
      if (count < 2 || count < best_count) continue;
      std::string merged = sym_text[size_t(key >> 32)] + sym_text[size_t(uint32_t(key))];
      if (count > best_count || merged < best_text) {
        best = key, best_count = count, best_text = std::move(merged);
      }
    }
    if (best_count < 2) break;
    const int a = int(best >> 32), b = int(uint32_t(best));
    const int merged_id = intern(best_text);
    for (WordEntry& w : words) {
      size_t o = 0;
      for (size_t i = 0; i < w.syms.size(); ++i) {
        if (i + 1 < w.syms.size() && w.syms[i] == a && w.syms[i + 1] == b) {
          w.syms[o++] = merged_id;
          ++i;
        } else {
          w.syms[o++] = w.syms[i];
        }
      }
      w.syms.resize(o);
    }
    // Two different pairs can spell the same string; the piece exists once.
    if (!seen.count(best_text)) add(best_text, -float(rank++), TokenType::Normal);
  }

  for (int k = 0; int(v.pieces.size()) < n_vocab; ++k) {
    add(fmt::format("<unused_{}>", k), -float(rank++), TokenType::Unused);
  }
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.add_space_prefix = true;
  return v;
}

}  // namespace kamera
