#include "tokenizer/hf_import.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"

namespace kamera {

namespace {

using json = nlohmann::json;

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::Io, "{}: cannot open file", path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(ErrorCode::Io, "{}: read error", path);
  return s;
}

Result<json> parse(const std::string& text, const std::string& name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::CorruptData, "{}: not a JSON object", name);
  return j;
}

// One merge in GGUF's "left right" form; a space inside a part is written as U+0120, as
// llama.cpp's converter does for the pair format.
Result<std::string> merge_text(const json& m, size_t i, const std::string& name) {
  if (m.is_string()) return m.get<std::string>();
  if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string())
    return make_error(ErrorCode::CorruptData, "{}: model.merges[{}] is neither \"a b\" nor [a, b]",
                      name, i);
  std::string out;
  for (int k = 0; k < 2; ++k) {
    if (k) out.push_back(' ');
    for (char c : m[k].get<std::string>())
      out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
  }
  return out;
}

// The Split patterns of tokenizer.json's pre_tokenizer, in order, as kamera's tables write them
// (Digits with individual_digits is \p{N}; a ByteLevel that splits uses GPT-2's pattern). Empty
// with a message in `why` when a step is not one kamera can run.
std::vector<std::string> hf_split_patterns(const json& pre, std::string& why) {
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers"))
    for (const json& s : pre["pretokenizers"]) steps.push_back(s);
  else if (pre.is_object())
    steps.push_back(pre);
  std::vector<std::string> out;
  for (const json& s : steps) {
    const std::string type = s.value("type", "");
    if (type == "Split" && s.value("behavior", "") == "Isolated" && !s.value("invert", false) &&
        s.contains("pattern") && s["pattern"].contains("Regex")) {
      out.push_back(s["pattern"]["Regex"].get<std::string>());
    } else if (type == "Digits" && s.value("individual_digits", false)) {
      out.emplace_back(R"(\p{N})");
    } else if (type == "ByteLevel") {
      if (s.value("add_prefix_space", false)) {
        why = "ByteLevel with add_prefix_space";
        return {};
      }
      if (s.value("use_regex", true)) {
        auto gpt2 = pre_tokenizer_info("gpt2");
        out.push_back(gpt2->regexes[0]);
      }
    } else {
      why = fmt::format("pre-tokenizer step '{}'", s.dump());
      return {};
    }
  }
  return out;
}

// "NFC", "none" or the JSON of a normalizer kamera does not run.
std::string hf_normalizer(const json& n) {
  if (n.is_null()) return "none";
  const std::string type = n.value("type", "");
  if (type == "NFC") return "NFC";
  if (type == "Sequence" && n.contains("normalizers")) {
    if (n["normalizers"].empty()) return "none";
    if (n["normalizers"].size() == 1) return hf_normalizer(n["normalizers"][0]);
  }
  return n.dump();
}

// A pattern with literal control characters written as escapes (tokenizer.json files have both
// "[^\r\n]" spellings; they are the same expression).
std::string escape_controls(const std::string& rx) {
  std::string out;
  for (char c : rx) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::string> detect_pre(const json& tj, const std::string& name) {
  std::string why;
  std::vector<std::string> pats = hf_split_patterns(tj.value("pre_tokenizer", json()), why);
  for (std::string& p : pats) p = escape_controls(p);
  const std::string norm = hf_normalizer(tj.value("normalizer", json()));
  for (const std::string& cand : pre_tokenizer_names()) {
    auto info = pre_tokenizer_info(cand);
    if (!info.ok() || info->name != cand) continue;  // canonical names only
    for (std::string& p : info->regexes) p = escape_controls(p);
    if (!pats.empty() && pats == info->regexes && norm == (info->nfc ? "NFC" : "none")) return cand;
  }
  return make_error(ErrorCode::Unsupported,
                    "{}: the pre-tokenizer ({}) with normalizer {} is not one kamera recognizes; "
                    "name one with --vocab-pre (known: {})",
                    name, why.empty() ? tj.value("pre_tokenizer", json()).dump() : why, norm,
                    fmt::join(pre_tokenizer_names(), ", "));
}

// A special token of tokenizer_config.json ("<s>" or {"content": "<s>", ...}) -> id, or -1.
int32_t config_token(const json& cfg, const std::string& key,
                     const std::unordered_map<std::string, int32_t>& added,
                     const std::unordered_map<std::string, int32_t>& vocab) {
  if (!cfg.contains(key)) return -1;
  const json& e = cfg[key];
  std::string content;
  if (e.is_string()) {
    content = e.get<std::string>();
  } else if (e.is_object() && e.contains("content") && e["content"].is_string()) {
    content = e["content"].get<std::string>();
  } else {
    return -1;
  }
  if (auto it = added.find(content); it != added.end()) return it->second;
  if (auto it = vocab.find(content); it != vocab.end()) return it->second;
  return -1;
}

Status apply_config(const json& cfg, const std::unordered_map<std::string, int32_t>& added,
                    const std::unordered_map<std::string, int32_t>& vocab, Vocab& v,
                    bool& add_bos_known) {
  if (cfg.contains("chat_template")) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) v.chat_template = t.get<std::string>();
    if (t.is_array())
      for (const json& e : t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template"))
          v.chat_template = e["template"].get<std::string>();
  }
  v.bos = config_token(cfg, "bos_token", added, vocab);
  v.eos = config_token(cfg, "eos_token", added, vocab);
  v.unk = config_token(cfg, "unk_token", added, vocab);
  v.pad = config_token(cfg, "pad_token", added, vocab);
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    v.add_bos = cfg["add_bos_token"].get<bool>();
    add_bos_known = true;
  }
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
    v.add_eos = cfg["add_eos_token"].get<bool>();
  return Status::Ok();
}

// A TemplateProcessing post-processor that puts a special token first means "add BOS".
void apply_post_processor(const json& tj, Vocab& v, bool& add_bos_known,
                          const std::unordered_map<std::string, int32_t>& added) {
  if (add_bos_known || !tj.contains("post_processor")) return;
  const json& pp = tj["post_processor"];
  std::vector<json> procs;
  if (pp.is_object() && pp.value("type", "") == "Sequence" && pp.contains("processors"))
    for (const json& p : pp["processors"]) procs.push_back(p);
  else if (pp.is_object())
    procs.push_back(pp);
  for (const json& p : procs) {
    if (p.value("type", "") != "TemplateProcessing" || !p.contains("single")) continue;
    const json& single = p["single"];
    if (!single.is_array() || single.empty()) continue;
    add_bos_known = true;
    v.add_bos = single[0].contains("SpecialToken");
    if (v.add_bos && v.bos < 0) {
      const std::string id = single[0]["SpecialToken"].value("id", "");
      if (auto it = added.find(id); it != added.end()) v.bos = it->second;
    }
  }
}

// The ids of tokenizer.json: the model vocabulary, then added tokens (which may reuse or extend
// it); n is one past the largest.
struct HfIds {
  std::unordered_map<std::string, int32_t> vocab, added;
  json added_list;
  int64_t n = 0;
};

Result<HfIds> read_ids(const json& tj, const std::string& name) {
  HfIds r;
  for (const auto& [tok, id] : tj["model"]["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= INT32_MAX)
      return make_error(ErrorCode::CorruptData, "{}: vocab entry '{}' has no valid id", name, tok);
    r.vocab.emplace(tok, int32_t(id.get<int64_t>()));
    r.n = std::max(r.n, id.get<int64_t>() + 1);
  }
  r.added_list = tj.value("added_tokens", json::array());
  for (const json& a : r.added_list) {
    if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() >= INT32_MAX)
      return make_error(ErrorCode::CorruptData, "{}: malformed added token {}", name, a.dump());
    r.added.emplace(a["content"].get<std::string>(), int32_t(a["id"].get<int64_t>()));
    r.n = std::max(r.n, a["id"].get<int64_t>() + 1);
  }
  return r;
}

// The text llama.cpp's converter takes for a control token although Hugging Face does not mark it
// special (its does_token_look_special): Gemma's <unused*> and <mask>, <|...|> and <｜...｜>.
bool looks_special(const std::string& t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

// Whether a SentencePiece-style tokenizer.json adds the "▁" prefix: its normalizer is Gemma's
// Replace(" " -> "▁") (no prefix) or Llama-2's Prepend("▁") then that Replace (a prefix);
// anything else is refused, naming it. Its pre-tokenizer must be none, or Gemma's Split on " "
// (which never matches once spaces are "▁").
Result<bool> spm_space_prefix(const json& tj, const std::string& name) {
  const json n = tj.value("normalizer", json());
  const auto is_replace = [](const json& r) {
    return r.value("type", "") == "Replace" && r.contains("pattern") &&
           r["pattern"].value("String", "") == " " && r.value("content", "") == "\xE2\x96\x81";
  };
  const auto is_prepend = [](const json& r) {
    return r.value("type", "") == "Prepend" && r.value("prepend", "") == "\xE2\x96\x81";
  };
  std::optional<bool> prefix;
  if (n.is_object() && is_replace(n)) prefix = false;
  if (n.is_object() && n.value("type", "") == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].size() == 2 && is_prepend(n["normalizers"][0]) &&
      is_replace(n["normalizers"][1]))
    prefix = true;
  if (!prefix)
    return make_error(ErrorCode::Unsupported,
                      "{}: SentencePiece-style normalizer {} is not one kamera runs (Replace ' ' "
                      "with U+2581, optionally after Prepend U+2581)",
                      name, n.dump());
  const json pre = tj.value("pre_tokenizer", json());
  const bool gemma_split = pre.is_object() && pre.value("type", "") == "Split" &&
                           pre.contains("pattern") && pre["pattern"].value("String", "") == " ";
  if (!pre.is_null() && !gemma_split)
    return make_error(ErrorCode::Unsupported,
                      "{}: SentencePiece-style pre-tokenizer {} is not one kamera runs", name,
                      pre.dump());
  return *prefix;
}

// A SentencePiece BPE vocabulary with byte fallback (Gemma's tokenizer.json) as llama.cpp's
// converter writes it from the model's tokenizer.model (_create_vocab_sentencepiece): pieces by
// id, "<0xXX>" byte pieces typed Byte, the unknown piece Unknown; every added token control (if
// special or looks_special) or user-defined with "▁" written as a space (the converter's
// pre-normalization), score -1000. tokenizer.json has no piece scores: a normal piece scores -id,
// the order in which SentencePiece's BPE trainer made the pieces (Gemma 3's merges list the
// merged pieces in id order apart from its user-defined runs; tests/model/test_bpe_real.cpp
// (SpmReal) checks the result against Hugging Face's ids). The pieces, scores and types of the
// model vocabulary (added tokens not yet typed).
Vocab spm_pieces(const HfIds& ids, const std::string& unk) {
  Vocab v;
  v.kind = VocabKind::Spm;
  v.pieces.resize(size_t(ids.n));
  v.scores.assign(size_t(ids.n), -1000.0f);
  v.types.assign(size_t(ids.n), TokenType::Unused);
  for (int64_t i = 0; i < ids.n; ++i) v.pieces[size_t(i)] = fmt::format("[PAD{}]", i);
  for (const auto& [tok, id] : ids.vocab) {
    v.pieces[size_t(id)] = tok;
    v.scores[size_t(id)] = -float(id);
    v.types[size_t(id)] = tok == unk                        ? TokenType::Unknown
                          : spm::byte_piece_value(tok) >= 0 ? TokenType::Byte
                                                            : TokenType::Normal;
  }
  return v;
}

// Added tokens as the converter types them (tokenizer_config.json's added_tokens_decoder, the same
// list as tokenizer.json's added_tokens).
void spm_added(Vocab& v, const json& added_list, const std::string& unk) {
  for (const json& a : added_list) {
    const size_t id = size_t(a["id"].get<int64_t>());
    std::string text = a["content"].get<std::string>();
    if (text == unk) continue;  // stays the unknown piece
    const bool control = a.value("special", false) || looks_special(text);
    if (!control) text = spm::unescape_spaces(text);
    v.pieces[id] = std::move(text);
    v.types[id] = control ? TokenType::Control : TokenType::UserDefined;
    v.scores[id] = -1000.0f;
  }
}

Result<Vocab> import_spm_bpe(const json& tj, const std::string& config_text,
                             const std::string& name) {
  KAMERA_ASSIGN_OR_RETURN(const bool prefix, spm_space_prefix(tj, name));
  KAMERA_ASSIGN_OR_RETURN(HfIds ids, read_ids(tj, name));
  const json& model = tj["model"];
  const std::string unk =
      model.value("unk_token", json()).is_string() ? model["unk_token"].get<std::string>() : "";
  Vocab v = spm_pieces(ids, unk);
  spm_added(v, ids.added_list, unk);
  v.add_space_prefix = prefix;
  v.unk = ids.vocab.count(unk) ? ids.vocab[unk] : 0;
  v.bos = 1;
  v.eos = 2;
  if (config_text.empty()) return v;
  KAMERA_ASSIGN_OR_RETURN(json cfg, parse(config_text, name + " (tokenizer config)"));
  bool add_bos_known = false;
  Vocab c;
  KAMERA_TRY(apply_config(cfg, ids.added, ids.vocab, c, add_bos_known));
  v.chat_template = c.chat_template;
  if (c.bos >= 0) v.bos = c.bos;
  if (c.eos >= 0) v.eos = c.eos;
  if (c.unk >= 0) v.unk = c.unk;
  v.pad = c.pad;
  if (add_bos_known) v.add_bos = c.add_bos;
  v.add_eos = c.add_eos;
  return v;
}

}  // namespace

Result<Vocab> import_hf_tokenizer_text(const std::string& text, const std::string& config_text,
                                       const std::string& name, const std::string& pre) {
  KAMERA_ASSIGN_OR_RETURN(json tj, parse(text, name));
  if (!tj.contains("model") || !tj["model"].is_object())
    return make_error(ErrorCode::CorruptData, "{}: no \"model\" object", name);
  const json& model = tj["model"];
  if (model.value("type", "") == "BPE" && model.value("byte_fallback", false) &&
      model.contains("vocab") && model["vocab"].is_object()) {
    if (!pre.empty())
      return make_error(ErrorCode::InvalidArgument,
                        "{}: a SentencePiece-style vocabulary has no pre-tokenizer to name ('{}')",
                        name, pre);
    return import_spm_bpe(tj, config_text, name);
  }
  if (model.value("type", "") != "BPE" || model.value("byte_fallback", false) ||
      !model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges"))
    return make_error(ErrorCode::Unsupported,
                      "{}: not a byte-level BPE tokenizer (model.type '{}', byte_fallback {})",
                      name, model.value("type", ""), model.value("byte_fallback", false));

  KAMERA_ASSIGN_OR_RETURN(HfIds ids, read_ids(tj, name));
  const std::unordered_map<std::string, int32_t>& vocab = ids.vocab;
  const std::unordered_map<std::string, int32_t>& added = ids.added;
  const json& added_list = ids.added_list;
  const int64_t n = ids.n;

  Vocab v;
  v.kind = VocabKind::Bpe;
  v.add_space_prefix = false;
  v.bos = v.eos = v.unk = -1;
  v.pieces.resize(size_t(n));
  v.types.assign(size_t(n), TokenType::Unused);
  for (int64_t i = 0; i < n; ++i) v.pieces[size_t(i)] = fmt::format("[PAD{}]", i);
  for (const auto& [tok, id] : vocab) {
    v.pieces[size_t(id)] = tok;
    v.types[size_t(id)] = TokenType::Normal;
  }
  for (const json& a : added_list) {
    const size_t id = size_t(a["id"].get<int64_t>());
    v.pieces[id] = a["content"].get<std::string>();
    v.types[id] = a.value("special", false) ? TokenType::Control : TokenType::UserDefined;
  }
  v.scores.assign(size_t(n), 0.0f);
  const json& merges = model["merges"];
  if (!merges.is_array())
    return make_error(ErrorCode::CorruptData, "{}: model.merges is not an array", name);
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    KAMERA_ASSIGN_OR_RETURN(std::string m, merge_text(merges[i], i, name));
    v.merges.push_back(std::move(m));
  }
  if (model.contains("unk_token") && model["unk_token"].is_string())
    if (auto it = vocab.find(model["unk_token"].get<std::string>()); it != vocab.end())
      v.unk = it->second;

  if (pre.empty()) {
    KAMERA_ASSIGN_OR_RETURN(v.pre, detect_pre(tj, name));
  } else {
    KAMERA_ASSIGN_OR_RETURN(PreTokenizerInfo info, pre_tokenizer_info(pre));
    v.pre = info.name;
  }
  bool add_bos_known = false;
  if (!config_text.empty()) {
    KAMERA_ASSIGN_OR_RETURN(json cfg, parse(config_text, name + " (tokenizer config)"));
    KAMERA_TRY(apply_config(cfg, added, vocab, v, add_bos_known));
  }
  apply_post_processor(tj, v, add_bos_known, added);
  if (!add_bos_known) v.add_bos = pre_tokenizer_info(v.pre)->add_bos;
  return v;
}

Result<Vocab> import_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_path,
                                  const std::string& pre) {
  KAMERA_ASSIGN_OR_RETURN(std::string text, read_text(tokenizer_json));
  std::string cfg;
  if (!config_path.empty()) {
    KAMERA_ASSIGN_OR_RETURN(cfg, read_text(config_path));
  }
  return import_hf_tokenizer_text(text, cfg, tokenizer_json, pre);
}

}  // namespace kamera
