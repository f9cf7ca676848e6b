// SentencePiece: the pieces' spelling (tokenizer/spm.h), the highest-score pair merging of
// Tokenizer::encode_with, and the llama2.c tokenizer.bin loader.
#include "tokenizer/spm.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <queue>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace kamera {

namespace spm {

size_t char_len(const unsigned char* p, size_t n) {
  return std::max<size_t>(1, utf8_valid_len(p, n));
}

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

int byte_piece_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::vector<std::string_view> split_chars(std::string_view s) {
  std::vector<std::string_view> out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = char_len(p + i, s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace spm

namespace {

using namespace spm;

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

}  // namespace

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
      const size_t len = char_len(p + i, s.size() - i);
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
    const int32_t id = index_.find(key);
    if (id < 0) return;
    queue.push({left, right, vocab_.scores[size_t(id)], l.len + r.len});
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
    if (const int32_t id = index_.find(key); id >= 0) {
      out.push_back(id);
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

}  // namespace kamera
