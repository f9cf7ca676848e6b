#include "tokenizer/pretokenizer.h"
#include "core/log.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <spdlog/spdlog.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <algorithm>
#include <atomic>

namespace kamera {

namespace {

// The expressions below are the Split patterns of each model family's tokenizer.json (Qwen2/3,
// Llama-3, DeepSeek-V3), OpenAI's GPT-2 pattern, and llama.cpp's fallback for "default".

// GPT-2 (and Hugging Face's ByteLevel pre-tokenizer when use_regex is on).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Qwen2, Qwen2.5, Qwen3 (and Qwen2-VL): digits one at a time.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Llama-3: digits in groups of up to three.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / o200k (gpt-oss's o200k_harmony, Phi-4-mini): a word is a run of upper-case letters
// then lower-case ones (or the reverse) with an optional contraction, so "CamelCase" is two words;
// digits in threes; "/" and line breaks stay on a punctuation run.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek-V3 (and R1): numbers in threes, CJK/kana runs, then words, punctuation, whitespace.
constexpr const char* kDeepseek3Numbers = R"(\p{N}{1,3})";
constexpr const char* kDeepseek3Cjk = R"([一-龥぀-ゟ゠-ヿ]+)";
constexpr const char* kDeepseek3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM (7B/67B): line breaks alone, cased-letter words, ASCII/full-width punctuation runs,
// trailing whitespace, CJK/Hangul runs, then every digit alone. The model's own pattern spells the
// cased letters out as ranges; \p{L&} is that set (Lu, Ll, Lt) from PCRE2's Unicode tables.
constexpr const char* kDeepseekLlmLines = R"([\r\n])";
constexpr const char* kDeepseekLlmLetters = R"(\s?\p{L&}+)";
constexpr const char* kDeepseekLlmPunct = R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)";
constexpr const char* kDeepseekLlmSpace = R"(\s+$)";
constexpr const char* kDeepseekLlmCjk = R"([一-龥ࠀ-一가-퟿]+)";
constexpr const char* kDigit = R"(\p{N})";

// llama.cpp's "default" (a file without tokenizer.ggml.pre).
constexpr const char* kDefaultPunct = R"([\p{P}\$\+<=>\^~\|]+)";
constexpr const char* kDefaultWords =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kDefaultNumbers = R"(\p{N}+)";
constexpr const char* kDefaultTriples = R"([0-9][0-9][0-9])";

struct Entry {
  std::vector<std::string_view> names;  // first is canonical
  std::vector<const char*> regexes;
  bool nfc, ignore_merges, add_bos;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {{"default"},
       {kDefaultPunct, kDefaultWords, kDefaultNumbers, kDefaultTriples},
       false,
       false,
       false},
      {{"gpt2", "gpt-2", "phi-2", "roberta-bpe"}, {kGpt2}, false, false, false},
      // SmolLM / SmolLM2 (Hugging Face's Digits then ByteLevel): every digit alone, then GPT-2's
      {{"smollm"}, {kDigit, kGpt2}, false, false, false},
      {{"qwen2", "deepseek-r1-qwen", "megrez"}, {kQwen2}, true, false, false},
      {{"llama3", "llama-bpe", "llama-v3", "dbrx", "smaug-bpe"}, {kLlama3}, false, true, true},
      // ignore_merges as the o200k tokenizer.json says (tiktoken's rule: a word that is a token
      // is that token); llama.cpp's "gpt-4o" does not set it
      {{"gpt-4o"}, {kGpt4o}, false, true, false},
      {{"deepseek-v3"}, {kDeepseek3Numbers, kDeepseek3Cjk, kDeepseek3Words}, false, false, false},
      {{"deepseek-llm"},
       {kDeepseekLlmLines, kDeepseekLlmLetters, kDeepseekLlmPunct, kDeepseekLlmSpace,
        kDeepseekLlmCjk, kDigit},
       false,
       false,
       false},
  };
  return t;
}

// The Isolated split of `piece` by `re`: fn(sub) for every match and every gap between matches,
// in order, until fn returns false (then false).
template <class F>
bool split_isolated(const pcre2_code* re, pcre2_match_data* md, pcre2_match_context* mctx,
                    std::string_view piece, const F& fn) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t start = 0, last = 0;
  while (start < piece.size()) {
    const int rc = pcre2_match(re, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md, mctx);
    if (rc < 0) {
      if (rc != PCRE2_ERROR_NOMATCH) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
          log().warn("pre-tokenizer: PCRE2 match error {}; the rest of a piece stays whole", rc);
      }
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0], me = ov[1];
    if (me <= ms) {  // an empty match: step over one character
      start = ms + 1;
      while (start < piece.size() && (uint8_t(piece[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    if (ms > last && !fn(piece.substr(last, ms - last))) return false;
    if (!fn(piece.substr(ms, me - ms))) return false;
    last = start = me;
  }
  return last >= piece.size() || fn(piece.substr(last));
}

struct Stage {
  const pcre2_code* re;
  pcre2_match_data* md;  // one per stage: the stages run nested
};

// Depth first: each piece of stage r is cut by the stages after it before the next piece is
// looked at, so nothing but the current path is held.
bool visit(const std::vector<Stage>& stages, size_t r, pcre2_match_context* mctx,
           std::string_view piece, const std::function<bool(std::string_view)>& fn) {
  if (r == stages.size()) return fn(piece);
  return split_isolated(stages[r].re, stages[r].md, mctx, piece,
                        [&](std::string_view sub) { return visit(stages, r + 1, mctx, sub, fn); });
}

}  // namespace

std::vector<std::string> pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const Entry& e : table())
    for (std::string_view n : e.names) out.emplace_back(n);
  return out;
}

Result<PreTokenizerInfo> pre_tokenizer_info(std::string_view name) {
  for (const Entry& e : table()) {
    if (std::find(e.names.begin(), e.names.end(), name) == e.names.end()) continue;
    PreTokenizerInfo info;
    info.name = std::string(e.names.front());
    for (const char* r : e.regexes) info.regexes.emplace_back(r);
    info.nfc = e.nfc;
    info.ignore_merges = e.ignore_merges;
    info.add_bos = e.add_bos;
    return info;
  }
  return make_error(ErrorCode::Unsupported, "pre-tokenizer '{}' is not supported (supported: {})",
                    name, fmt::join(pre_tokenizer_names(), ", "));
}

Result<std::shared_ptr<const PreTokenizer>> PreTokenizer::create(const PreTokenizerInfo& info) {
  std::shared_ptr<PreTokenizer> p(new PreTokenizer());
  p->info_ = info;
  for (const std::string& rx : info.regexes) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rx.data()), rx.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return make_error(ErrorCode::Internal, "pre-tokenizer {}: regex /{}/ at offset {}: {}",
                        info.name, rx, err_off, reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if no JIT
    p->codes_.push_back(code);
  }
  return std::shared_ptr<const PreTokenizer>(std::move(p));
}

PreTokenizer::~PreTokenizer() {
  for (void* c : codes_) pcre2_code_free(static_cast<pcre2_code*>(c));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  for_each_word(text, [&](std::string_view w) {
    out.push_back(w);
    return true;
  });
}

bool PreTokenizer::for_each_word(std::string_view text,
                                 const std::function<bool(std::string_view)>& fn) const {
  if (text.empty()) return true;
  if (codes_.empty()) return fn(text);
  // Match blocks and a JIT stack per call: the pre-tokenizer is const and may run on many threads.
  pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  pcre2_jit_stack_assign(mctx, nullptr, stack);
  std::vector<Stage> stages;
  for (void* c : codes_) {
    const auto* re = static_cast<const pcre2_code*>(c);
    stages.push_back({re, pcre2_match_data_create_from_pattern(re, nullptr)});
  }
  const bool done = visit(stages, 0, mctx, text, fn);
  for (const Stage& st : stages) pcre2_match_data_free(st.md);
  pcre2_jit_stack_free(stack);
  pcre2_match_context_free(mctx);
  return done;
}

std::string nfc_normalize(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii &= (uint8_t(c) < 0x80);
  if (ascii) return std::string(text);
  UErrorCode st = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(st);
  if (U_FAILURE(st)) return std::string(text);
  const icu::StringPiece sp(text.data(), int32_t(text.size()));
  if (nfc->isNormalizedUTF8(sp, st) && U_SUCCESS(st)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  st = U_ZERO_ERROR;
  nfc->normalizeUTF8(0, sp, sink, nullptr, st);
  if (U_FAILURE(st)) return std::string(text);
  return out;
}

}  // namespace kamera
