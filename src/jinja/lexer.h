// Jinja lexer: template source -> a flat token list. Text between tags becomes one Text token;
// each `{{ ... }}` and `{% ... %}` becomes VarBegin/BlockBegin, its expression tokens, and
// VarEnd/BlockEnd; comments `{# ... #}` vanish; `{% raw %}...{% endraw %}` becomes Text.
//
// Whitespace follows jinja2 as transformers configures it (trim_blocks and lstrip_blocks on):
//   - a `-` inside a tag (`{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}`) strips all whitespace on that
//     side of the tag;
//   - trim_blocks drops the first newline after a block or comment tag (not after `}}`);
//   - lstrip_blocks drops spaces and tabs between the start of a line and a block or comment tag;
//   - `{%+` and `+%}` switch the last two off for that tag;
//   - "\r\n" and "\r" read as "\n", and one newline at the very end of the source is dropped
//     (keep_trailing_newline off).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera::jinja {

enum class Tok : uint8_t {
  Text,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,    // identifiers and keywords (if, for, in, not, and, true, none, ...)
  String,  // text holds the unescaped value
  Int,     // ival
  Float,   // fval
  Op,      // text: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  Eof,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
  int line = 1;  // 1-based position of the token's first character in the source
  int col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Errors (InvalidArgument) name "<name>:LINE:COL" and what is wrong: an unterminated tag,
// string or comment, or a character that starts no token.
Result<std::vector<Token>> lex(std::string_view source, std::string_view name,
                               const LexOptions& options = {});

}  // namespace kamera::jinja
