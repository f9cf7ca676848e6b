#include "tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <climits>
#include <deque>
#include <queue>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace kamera {

namespace {

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else if (cp < 0x800) {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(char(0xE0 | (cp >> 12)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(char(0xF0 | (cp >> 18)));
    s.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}

// byte -> code point of GPT-2's map.
const std::array<uint32_t, 256>& byte_cps() {
  static const std::array<uint32_t, 256> m = [] {
    std::array<uint32_t, 256> a{};
    const auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) a[size_t(b)] = printable(b) ? uint32_t(b) : 256 + extra++;
    return a;
  }();
  return m;
}

uint64_t merge_hash(uint64_t key) {
  return key * 0x9E3779B97F4A7C15ull;
}

// Split at the first space after position 0 (a piece is never empty).
bool split_merge(std::string_view m, std::string_view& a, std::string_view& b) {
  const size_t sp = m.find(' ', 1);
  if (sp == std::string_view::npos) return false;
  a = m.substr(0, sp);
  b = m.substr(sp + 1);
  return !b.empty();
}

constexpr size_t kSmallWord = 48;      // words up to this many bytes merge by linear scans
constexpr size_t kCacheWord = 64;      // longer words are not cached
constexpr size_t kCacheMax = 1 << 20;  // entries per encode call

}  // namespace

const std::string& gpt2_byte_char(uint8_t byte) {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> a;
    for (int b = 0; b < 256; ++b) a[size_t(b)] = utf8_encode(byte_cps()[size_t(b)]);
    return a;
  }();
  return chars[byte];
}

int gpt2_char_byte(uint32_t cp) {
  static const std::array<int16_t, 324> inv = [] {
    std::array<int16_t, 324> a;
    a.fill(-1);
    for (int b = 0; b < 256; ++b) a[byte_cps()[size_t(b)]] = int16_t(b);
    return a;
  }();
  return cp < inv.size() ? inv[cp] : -1;
}

// Token ids of the words seen in one encode call (keys point into the call's text).
class BpeModel::WordCache {
 public:
  const int32_t* find(std::string_view w, size_t& n) const {
    const auto it = map_.find(w);
    if (it == map_.end()) return nullptr;
    n = it->second.second;
    return ids_.data() + it->second.first;
  }
  void add(std::string_view w, const int32_t* ids, size_t n) {
    if (map_.size() >= kCacheMax) return;
    map_.emplace(w, std::make_pair(uint32_t(ids_.size()), uint32_t(n)));
    ids_.insert(ids_.end(), ids, ids + n);
  }

 private:
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> map_;
  std::vector<int32_t> ids_;
};

Result<std::shared_ptr<const BpeModel>> BpeModel::create(const Vocab& v) {
  KAMERA_ASSIGN_OR_RETURN(PreTokenizerInfo info, pre_tokenizer_info(v.pre));
  auto m = std::shared_ptr<BpeModel>(new BpeModel());
  KAMERA_ASSIGN_OR_RETURN(m->pre_, PreTokenizer::create(info));

  const size_t n = v.pieces.size();
  m->trie_.emplace_back();
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = v.pieces[i];
    m->pieces_.add(piece);
    const TokenType t = v.types[i];
    if (t == TokenType::Control || t == TokenType::UserDefined) {
      m->bytes_.add(piece);
      m->add_to_trie(piece, int32_t(i), t == TokenType::Control);
      continue;
    }
    // A normal piece: its characters are bytes under GPT-2's map. Others are kept as written.
    out.clear();
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    size_t k = 0;
    while (k < piece.size()) {
      const size_t len = utf8_valid_len(p + k, piece.size() - k);
      uint32_t cp = 0;
      if (len == 2) cp = (uint32_t(p[k] & 0x1F) << 6) | (p[k + 1] & 0x3F);
      if (len == 1) cp = p[k];
      const int b = len > 0 && len <= 2 ? gpt2_char_byte(cp) : -1;
      if (b >= 0) {
        out.push_back(char(b));
      } else {
        out.append(piece, k, len == 0 ? 1 : len);
      }
      k += len == 0 ? 1 : len;
    }
    m->bytes_.add(out);
  }
  m->pieces_.build_index();  // the first id of a duplicated piece wins
  for (int b = 0; b < 256; ++b) m->byte_id_[b] = m->find(gpt2_byte_char(uint8_t(b)));
  KAMERA_TRY(m->build_merges(v.merges));
  return std::shared_ptr<const BpeModel>(std::move(m));
}

Status BpeModel::build_merges(const std::vector<std::string>& merges) {
  size_t cap = 16;
  while (cap * 3 < merges.size() * 5) cap <<= 1;  // at most 60% full
  merges_.assign(cap, Merge{});
  merge_mask_ = cap - 1;
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string_view a, b;
    if (!split_merge(merges[r], a, b))
      return make_error(ErrorCode::CorruptData, "tokenizer: merge {} '{}' is not 'left right'", r,
                        merges[r]);
    const int32_t ia = find(a), ib = find(b);
    joined.assign(a).append(b);
    const int32_t ij = find(joined);
    if (ia < 0 || ib < 0 || ij < 0) continue;  // Hugging Face refuses these; llama.cpp ignores
    const uint64_t key = (uint64_t(uint32_t(ia)) << 32) | uint32_t(ib);
    uint64_t h = merge_hash(key) & merge_mask_;
    while (merges_[h].key != ~uint64_t(0) && merges_[h].key != key) h = (h + 1) & merge_mask_;
    if (merges_[h].key == key) continue;  // a repeated pair keeps its first (lowest) rank
    merges_[h] = {key, int32_t(r), ij};
  }
  return Status::Ok();
}

int32_t BpeModel::find(std::string_view piece) const {
  return pieces_.find(piece);
}

void BpeModel::add_to_trie(std::string_view piece, int32_t id, bool control) {
  if (piece.empty()) return;
  int32_t node = 0;
  for (char c : piece) {
    int32_t child = trie_child(node, uint8_t(c));
    if (child < 0) {
      child = int32_t(trie_.size());
      auto& nx = trie_[size_t(node)].next;
      nx.insert(std::upper_bound(nx.begin(), nx.end(), std::make_pair(uint8_t(c), -1)),
                {uint8_t(c), child});
      trie_.emplace_back();
    }
    node = child;
  }
  TrieNode& end = trie_[size_t(node)];
  if (end.token < 0) {
    end.token = id;
    end.control = control;
  }
  first_byte_[uint8_t(piece[0])] = true;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  uint64_t h = merge_hash(key) & merge_mask_;
  while (true) {
    const Merge& m = merges_[h];
    if (m.key == key) return &m;
    if (m.key == ~uint64_t(0)) return nullptr;
    h = (h + 1) & merge_mask_;
  }
}

int32_t BpeModel::trie_child(int32_t node, uint8_t b) const {
  const auto& nx = trie_[size_t(node)].next;
  const auto it = std::lower_bound(nx.begin(), nx.end(), std::make_pair(b, INT32_MIN));
  return it != nx.end() && it->first == b ? it->second : -1;
}

std::pair<int32_t, size_t> BpeModel::match_added(std::string_view text, size_t pos,
                                                 size_t control_end) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = trie_child(node, uint8_t(text[i]));
    if (node < 0) break;
    const TrieNode& t = trie_[size_t(node)];
    if (t.token >= 0 && (!t.control || i + 1 <= control_end)) best = {t.token, i + 1 - pos};
  }
  return best;
}

void BpeModel::encode(std::string_view raw, bool parse_special, std::vector<int32_t>& out,
                      size_t limit) const {
  const TextRange all{0, SIZE_MAX};
  encode(raw, parse_special ? std::span<const TextRange>(&all, 1) : std::span<const TextRange>(),
         out, limit);
}

void BpeModel::encode(std::string_view raw, std::span<const TextRange> control,
                      std::vector<int32_t>& out, size_t limit) const {
  std::string repaired;
  std::string_view text = raw;
  if (!utf8_is_valid(raw)) {
    repaired = utf8_repair(std::string(raw));
    text = repaired;
  }
  WordCache cache;
  std::deque<std::string> normalized;  // keeps the cache's keys alive
  const auto segment = [&](std::string_view seg) {
    if (seg.empty() || out.size() > limit) return;
    if (pre_->info().nfc) {
      normalized.push_back(nfc_normalize(seg));
      seg = normalized.back();
    }
    encode_segment(seg, cache, out, limit);
  };
  size_t start = 0, range = 0;
  if (trie_.size() > 1) {
    for (size_t i = 0; i < text.size() && out.size() <= limit; ++i) {
      if (!first_byte_[uint8_t(text[i])]) continue;
      while (range < control.size() && control[range].end <= i) ++range;
      const bool inside = range < control.size() && control[range].begin <= i;
      const auto [id, len] = match_added(text, i, inside ? control[range].end : 0);
      if (id < 0) continue;
      segment(text.substr(start, i - start));
      out.push_back(id);
      start = i + len;
      i = start - 1;
    }
  }
  segment(text.substr(start));
}

void BpeModel::encode_segment(std::string_view seg, WordCache& cache, std::vector<int32_t>& out,
                              size_t limit) const {
  std::vector<int32_t> scratch;
  pre_->for_each_word(seg, [&](std::string_view w) {
    size_t n = 0;
    if (const int32_t* ids = cache.find(w, n)) {
      out.insert(out.end(), ids, ids + n);
    } else {
      const size_t before = out.size();
      encode_word(w, scratch, out);
      if (w.size() <= kCacheWord) cache.add(w, out.data() + before, out.size() - before);
    }
    return out.size() <= limit;
  });
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids,
                           std::vector<int32_t>& out) const {
  if (pre_->info().ignore_merges && word.size() > 1) {
    std::string mapped;
    for (char c : word) mapped += gpt2_byte_char(uint8_t(c));
    if (const int32_t id = find(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  ids.clear();
  for (char c : word) {
    const int32_t id = byte_id_[uint8_t(c)];
    if (id >= 0) ids.push_back(id);  // a vocabulary without this byte's piece drops it
  }
  if (ids.size() <= kSmallWord) {
    merge_small(ids);
  } else {
    merge_large(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties); O(n^2) for short words.
void BpeModel::merge_small(std::vector<int32_t>& ids) const {
  size_t n = ids.size();
  if (n < 2) return;
  int32_t rank[kSmallWord], merged[kSmallWord];
  const auto pair_at = [&](size_t i) {
    const Merge* m = find_merge(ids[i], ids[i + 1]);
    rank[i] = m ? m->rank : INT32_MAX;
    merged[i] = m ? m->id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) pair_at(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT32_MAX) break;
    ids[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {  // drop symbol best + 1 and the pair it started
      ids[i] = ids[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) pair_at(best - 1);
    if (best + 1 < n) pair_at(best);
  }
  ids.resize(n);
}

// The same merges with a heap over a linked list: O(n log n) for long words (runs of spaces,
// digits-free strings without breaks).
void BpeModel::merge_large(std::vector<int32_t>& ids) const {
  struct Cand {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = int32_t(ids.size());
  std::vector<int32_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  const auto push = [&](int32_t l) {
    if (l < 0 || next[size_t(l)] < 0) return;
    const int32_t r = next[size_t(l)];
    if (const Merge* m = find_merge(ids[size_t(l)], ids[size_t(r)]))
      heap.push({m->rank, l, ids[size_t(l)], ids[size_t(r)], m->id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t r = next[size_t(c.pos)];
    if (ids[size_t(c.pos)] != c.left || r < 0 || ids[size_t(r)] != c.right) continue;  // stale
    ids[size_t(c.pos)] = c.merged;
    ids[size_t(r)] = -1;
    next[size_t(c.pos)] = next[size_t(r)];
    if (next[size_t(r)] >= 0) prev[size_t(next[size_t(r)])] = c.pos;
    push(prev[size_t(c.pos)]);
    push(c.pos);
  }
  size_t o = 0;
  for (int32_t i = 0; i >= 0; i = next[size_t(i)]) ids[o++] = ids[size_t(i)];
  ids.resize(o);
}

}  // namespace kamera
