#include "jinja/jinja.h"

#include "jinja/parser.h"

namespace kamera::jinja {

Result<Template> Template::parse(std::string_view source, std::string name,
                                 const LexOptions& options) {
  KAMERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, lex(source, name, options));
  KAMERA_ASSIGN_OR_RETURN(Body body, jinja::parse(tokens, name));
  Template t;
  t.name_ = std::move(name);
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::render(const Object& context, const RenderLimits& limits,
                                     std::time_t now) const {
  KAMERA_ASSIGN_OR_RETURN(Text t, render_text(context, limits, now));
  return std::move(t.str);
}

Result<Text> Template::render_text(const Object& context, const RenderLimits& limits,
                                   std::time_t now) const {
  KAMERA_ASSERT(body_ != nullptr);
  return evaluate(*body_, context, name_, limits, now);
}

}  // namespace kamera::jinja
