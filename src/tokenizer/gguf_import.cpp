#include "tokenizer/gguf_import.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "core/log.h"
#include "gguf/keys.h"
#include "tokenizer/pretokenizer.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

Status read_pieces(const GgufFile& f, Tokenizer::Vocab& v) {
  const auto* tokens = f.get_string_array(gk::kTokens);
  if (!tokens)
    return make_error(ErrorCode::CorruptData, "{}: {} missing or not a string array", f.name(),
                      gk::kTokens);
  v.pieces = *tokens;
  const size_t n = tokens->size();
  if (const auto* scores = f.get_float_array(gk::kScores)) {
    if (scores->size() != n)
      return make_error(ErrorCode::CorruptData, "{}: {} has {} entries for {} tokens", f.name(),
                        gk::kScores, scores->size(), n);
    v.scores.assign(scores->begin(), scores->end());
  } else {
    v.scores.assign(n, 0.0f);
  }
  if (const auto* types = f.get_int_array(gk::kTokenType)) {
    if (types->size() != n)
      return make_error(ErrorCode::CorruptData, "{}: {} has {} entries for {} tokens", f.name(),
                        gk::kTokenType, types->size(), n);
    v.types.clear();
    v.types.reserve(n);
    for (int64_t t : *types) v.types.push_back(t >= 0 && t <= 6 ? TokenType(t) : TokenType::Normal);
  } else {
    v.types.assign(n, TokenType::Normal);
  }
  if (auto t = f.get_string(gk::kChatTemplate)) v.chat_template = *t;
  return Status::Ok();
}

// A special id key; out of range is ignored with a warning (as llama.cpp does).
int32_t special_id(const GgufFile& f, const char* key, int32_t dflt, size_t n) {
  const auto v = f.get_int(key);
  if (!v) return dflt;
  if (*v < 0 || size_t(*v) >= n) {
    log().warn("{}: {} = {} is not a token id (the vocabulary has {}); ignored", f.name(), key, *v,
               n);
    return dflt;
  }
  return int32_t(*v);
}

Result<Tokenizer> read_bpe(const GgufFile& f) {
  Tokenizer::Vocab v;
  v.kind = VocabKind::Bpe;
  KAMERA_TRY(read_pieces(f, v));
  const auto* merges = f.get_string_array(gk::kMerges);
  if (!merges)
    return make_error(ErrorCode::CorruptData, "{}: byte-level BPE vocabulary without {}", f.name(),
                      gk::kMerges);
  v.merges = *merges;
  const auto pre = f.get_string(gk::kTokenizerPre);
  if (!pre)
    log().warn("{}: no {}; using llama.cpp's 'default' pre-tokenizer", f.name(), gk::kTokenizerPre);
  v.pre = pre.value_or("default");
  auto info = pre_tokenizer_info(v.pre);
  if (!info.ok()) return with_context(info.error(), f.name());
  const size_t n = v.pieces.size();
  v.bos = special_id(f, gk::kBosId, -1, n);
  v.eos = special_id(f, gk::kEosId, -1, n);
  v.unk = special_id(f, gk::kUnknownId, -1, n);
  v.pad = special_id(f, gk::kPaddingId, -1, n);
  v.eot = special_id(f, gk::kEotId, -1, n);
  v.eom = special_id(f, gk::kEomId, -1, n);
  v.add_bos = f.get_bool(gk::kAddBos).value_or(info->add_bos);
  v.add_eos = f.get_bool(gk::kAddEos).value_or(false);
  v.add_space_prefix = false;
  auto tok = Tokenizer::from_vocab(std::move(v));
  if (!tok.ok()) return with_context(tok.error(), f.name() + ": embedded tokenizer");
  return tok;
}

Result<Tokenizer> read_spm(const GgufFile& f) {
  Tokenizer::Vocab v;
  KAMERA_TRY(read_pieces(f, v));
  v.bos = int32_t(f.get_int(gk::kBosId).value_or(1));
  v.eos = int32_t(f.get_int(gk::kEosId).value_or(2));
  v.unk = int32_t(f.get_int(gk::kUnknownId).value_or(0));
  v.add_space_prefix = f.get_bool(gk::kAddSpacePrefix).value_or(true);
  std::string name = f.get_string(gk::kName).value_or("");
  for (char& c : name) c = char(std::tolower(uint8_t(c)));
  v.rstrip_special =
      name.find("phi3") != std::string::npos || name.find("phi-3") != std::string::npos;
  v.add_bos = f.get_bool(gk::kAddBos).value_or(true);
  v.add_eos = f.get_bool(gk::kAddEos).value_or(false);
  auto tok = Tokenizer::from_vocab(std::move(v));
  if (!tok.ok())
    return make_error(ErrorCode::CorruptData, "{}: embedded tokenizer: {}", f.name(),
                      tok.message());
  return tok;
}

}  // namespace

Result<Tokenizer> tokenizer_from_gguf(const GgufFile& f) {
  const auto model = f.get_string(gk::kTokenizerModel);
  if (!model)
    return make_error(ErrorCode::CorruptData, "{}: no embedded tokenizer ({})", f.name(),
                      gk::kTokenizerModel);
  if (*model == "llama") return read_spm(f);
  if (*model == "gpt2") return read_bpe(f);
  return make_error(ErrorCode::Unsupported,
                    "{}: tokenizer model '{}' is not supported (kamera reads SentencePiece "
                    "'llama' and byte-level BPE 'gpt2' vocabularies)",
                    f.name(), *model);
}

void write_tokenizer_gguf(GgufWriter& w, const Tokenizer::Vocab& v) {
  std::vector<int32_t> types;
  types.reserve(v.types.size());
  for (TokenType t : v.types) types.push_back(int32_t(t));
  const auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.set_u32(key, uint32_t(value));
  };
  if (v.kind == VocabKind::Spm) {
    w.set_string(gk::kTokenizerModel, "llama");
    w.set_string_array(gk::kTokens, v.pieces);
    w.set_f32_array(gk::kScores, v.scores);
    w.set_i32_array(gk::kTokenType, types);
    id(gk::kBosId, v.bos);
    id(gk::kEosId, v.eos);
    id(gk::kUnknownId, v.unk);
    // written only where it is off (Gemma's), so files without it read as before
    if (!v.add_space_prefix) w.set_bool(gk::kAddSpacePrefix, false);
  } else {
    w.set_string(gk::kTokenizerModel, "gpt2");
    w.set_string(gk::kTokenizerPre, v.pre);
    w.set_string_array(gk::kTokens, v.pieces);
    w.set_i32_array(gk::kTokenType, types);
    w.set_string_array(gk::kMerges, v.merges);
    id(gk::kBosId, v.bos);
    id(gk::kEosId, v.eos);
    id(gk::kUnknownId, v.unk);
    id(gk::kPaddingId, v.pad);
    id(gk::kEotId, v.eot);
    id(gk::kEomId, v.eom);
  }
  w.set_bool(gk::kAddBos, v.add_bos);
  w.set_bool(gk::kAddEos, v.add_eos);
  if (!v.chat_template.empty()) w.set_string(gk::kChatTemplate, v.chat_template);
}

}  // namespace kamera
