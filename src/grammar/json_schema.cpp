#include "grammar/json_schema.h"

#include <set>

namespace kamera::grammar {

namespace {

using ojson = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description", "default",     "examples",   "$schema",  "$id",
    "$comment", "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string, std::less<>> kKeywords = {"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "enum",
                                                      "const",
                                                      "items",
                                                      "minItems",
                                                      "maxItems",
                                                      "anyOf",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum",
                                                      "minLength",
                                                      "maxLength",
                                                      "$ref"};
const std::set<std::string, std::less<>> kTypes = {"object",  "array",   "string", "number",
                                                   "integer", "boolean", "null"};
constexpr int kMaxDepth = 64;
constexpr int kMaxItems = 1024;

std::string where(const std::string& path) {
  return path.empty() ? "at the root" : "at " + path;
}

Error schema_error(ErrorCode code, const std::string& path, const std::string& what) {
  return Error{code, "json_schema: " + what + " (" + where(path) + ")"};
}

bool has_type(const ojson& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  return v.is_number_integer() ||
         (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>())));
}

class SchemaCompiler {
 public:
  SchemaCompiler(JsonRules& rules, const ojson& root) : rules_(rules), root_(root) {}
  Result<Expr> value(const ojson& s, const std::string& path, int depth);

 private:
  Status check_keywords(const ojson& s, const std::string& path) const;
  Status alone(const ojson& s, std::string_view keyword, const std::string& path,
               bool allow_type) const;
  Result<std::vector<std::string>> types_of(const ojson& s, const std::string& path) const;
  Result<Expr> ref(const ojson& s, const std::string& path, int depth);
  Result<Expr> literals(const ojson& s, const std::string& path);
  Result<Expr> lit(const std::string& text);
  Result<Expr> any_of(const ojson& s, const std::string& path, int depth);
  Result<Expr> typed(const ojson& s, std::string_view type, const std::string& path, int depth);
  Result<Expr> object(const ojson& s, const std::string& path, int depth);
  Result<Expr> array(const ojson& s, const std::string& path, int depth);
  Result<Expr> number(const ojson& s, bool integer, const std::string& path);
  Result<Expr> string(const ojson& s, const std::string& path);
  Result<int> count(const ojson& s, const char* key, int dflt, const std::string& path) const;

  JsonRules& rules_;
  const ojson& root_;
  std::map<std::string, int32_t> refs_;
};

Status SchemaCompiler::check_keywords(const ojson& s, const std::string& path) const {
  for (const auto& [key, v] : s.items()) {
    (void)v;
    if (!kKeywords.count(key) && !kAnnotations.count(key))
      return schema_error(ErrorCode::Unsupported, path, "'" + key + "' is not supported");
  }
  return Status::Ok();
}

// `keyword` must stand alone among the constraining keywords (the type may join it).
Status SchemaCompiler::alone(const ojson& s, std::string_view keyword, const std::string& path,
                             bool allow_type) const {
  for (const auto& [key, v] : s.items()) {
    (void)v;
    if (key == keyword || kAnnotations.count(key) || (allow_type && key == "type")) continue;
    return schema_error(ErrorCode::Unsupported, path,
                        fmt::format("'{}' next to '{}' is not supported", keyword, key));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> SchemaCompiler::types_of(const ojson& s,
                                                          const std::string& path) const {
  std::vector<std::string> out;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    const ojson list = t.is_array() ? t : ojson::array({t});
    for (const ojson& x : list) {
      if (!x.is_string() || !kTypes.count(x.get<std::string>()))
        return schema_error(ErrorCode::InvalidArgument, path, "unknown type " + x.dump());
      out.push_back(x.get<std::string>());
    }
    if (out.empty()) return schema_error(ErrorCode::InvalidArgument, path, "'type' is empty");
    return out;
  }
  auto any = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (s.contains(k)) return true;
    return false;
  };
  if (any({"properties", "required", "additionalProperties"})) out.push_back("object");
  if (any({"items", "minItems", "maxItems"})) out.push_back("array");
  if (any({"minLength", "maxLength"})) out.push_back("string");
  if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) out.push_back("number");
  return out;
}

Result<Expr> SchemaCompiler::value(const ojson& s, const std::string& path, int depth) {
  if (depth > kMaxDepth)
    return schema_error(ErrorCode::Unsupported, path,
                        "nested deeper than " + std::to_string(kMaxDepth) + " schemas");
  if (Status st = rules_.budget().charge_nodes(1); !st.ok()) return st.error();
  if (s.is_boolean()) {
    if (!s.get<bool>())
      return schema_error(ErrorCode::InvalidArgument, path, "the schema false accepts nothing");
    auto v = rules_.any_value();
    if (!v.ok()) return v.error();
    return Expr::call(*v);
  }
  if (!s.is_object())
    return schema_error(ErrorCode::InvalidArgument, path, "a schema must be an object");
  if (Status st = check_keywords(s, path); !st.ok()) return st.error();
  if (s.contains("$ref")) return ref(s, path, depth);
  if (s.contains("const") || s.contains("enum")) return literals(s, path);
  if (s.contains("anyOf")) return any_of(s, path, depth);
  auto types = types_of(s, path);
  if (!types.ok()) return types.error();
  if (types->empty()) {
    auto v = rules_.any_value();
    if (!v.ok()) return v.error();
    return Expr::call(*v);
  }
  std::vector<Expr> options;
  for (const std::string& t : *types) {
    auto e = typed(s, t, path, depth);
    if (!e.ok()) return e.error();
    options.push_back(std::move(*e));
  }
  return Expr::alt(std::move(options));
}

Result<Expr> SchemaCompiler::ref(const ojson& s, const std::string& path, int depth) {
  if (Status st = alone(s, "$ref", path, false); !st.ok()) return st.error();
  const ojson& r = s["$ref"];
  if (!r.is_string() || r.get<std::string>().rfind('#', 0) != 0)
    return schema_error(ErrorCode::Unsupported, path,
                        "'$ref' must point inside the schema (\"#/...\"), got " + r.dump());
  const std::string ptr = r.get<std::string>().substr(1);
  if (auto it = refs_.find(ptr); it != refs_.end()) return Expr::call(it->second);
  const ojson* target = nullptr;
  try {
    const ojson::json_pointer p(ptr);
    if (root_.contains(p)) target = &root_.at(p);
  } catch (const ojson::exception&) {
  }
  if (!target)
    return schema_error(ErrorCode::InvalidArgument, path,
                        "'$ref' " + r.dump() + " points at nothing");
  Grammar& g = rules_.grammar();
  const int32_t id = g.declare("ref#" + ptr);
  refs_[ptr] = id;  // before compiling it: a recursive schema calls its own rule
  auto e = value(*target, "#" + ptr, depth + 1);
  if (!e.ok()) return e.error();
  auto a = e->compile(rules_.budget());
  if (!a.ok()) return with_context(a.error(), "json_schema " + where(path));
  if (Status st = g.define(id, *a); !st.ok()) return st.error();
  return Expr::call(id);
}

Result<Expr> SchemaCompiler::literals(const ojson& s, const std::string& path) {
  const bool is_const = s.contains("const");
  const char* key = is_const ? "const" : "enum";
  if (Status st = alone(s, key, path, true); !st.ok()) return st.error();
  const ojson one = is_const ? ojson::array({s["const"]}) : ojson();
  const ojson& values = is_const ? one : s["enum"];  // not a copy: an enum may be megabytes
  if (!values.is_array() || values.empty())
    return schema_error(ErrorCode::InvalidArgument, path, "'enum' must be a non-empty array");
  auto types = types_of(s, path);
  if (!types.ok()) return types.error();
  std::vector<Expr> options;
  for (const ojson& v : values) {
    bool fits = types->empty();
    for (const std::string& t : *types) fits = fits || has_type(v, t);
    if (!fits) continue;
    auto e = lit(v.dump());
    if (!e.ok()) return e.error();
    options.push_back(std::move(*e));
  }
  if (options.empty())
    return schema_error(ErrorCode::InvalidArgument, path,
                        std::string("no value of '") + key + "' has the schema's type");
  return Expr::alt(std::move(options));
}

// A literal of the request's text: its bytes charged to the budget before they become nodes.
Result<Expr> SchemaCompiler::lit(const std::string& text) {
  if (Status st = rules_.budget().charge_nodes(text.size()); !st.ok()) return st.error();
  return Expr::lit(text);
}

Result<Expr> SchemaCompiler::any_of(const ojson& s, const std::string& path, int depth) {
  if (Status st = alone(s, "anyOf", path, false); !st.ok()) return st.error();
  const ojson& list = s["anyOf"];
  if (!list.is_array() || list.empty())
    return schema_error(ErrorCode::InvalidArgument, path, "'anyOf' must be a non-empty array");
  std::vector<Expr> options;
  for (size_t i = 0; i < list.size(); ++i) {
    auto e = value(list[i], path + "/anyOf/" + std::to_string(i), depth + 1);
    if (!e.ok()) return e.error();
    options.push_back(std::move(*e));
  }
  return Expr::alt(std::move(options));
}

Result<Expr> SchemaCompiler::typed(const ojson& s, std::string_view type, const std::string& path,
                                   int depth) {
  if (type == "object") return object(s, path, depth);
  if (type == "array") return array(s, path, depth);
  if (type == "string") return string(s, path);
  if (type == "number" || type == "integer") return number(s, type == "integer", path);
  if (type == "boolean") return Expr::alt({Expr::lit("true"), Expr::lit("false")});
  return Expr::lit("null");
}

Result<int> SchemaCompiler::count(const ojson& s, const char* key, int dflt,
                                  const std::string& path) const {
  if (!s.contains(key)) return dflt;
  const ojson& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    return schema_error(ErrorCode::InvalidArgument, path,
                        std::string("'") + key + "' must be a non-negative integer");
  return int(std::min<int64_t>(v.get<int64_t>(), INT32_MAX));
}

Result<Expr> SchemaCompiler::string(const ojson& s, const std::string& path) {
  auto lo = count(s, "minLength", 0, path);
  if (!lo.ok()) return lo.error();
  auto hi = count(s, "maxLength", -1, path);
  if (!hi.ok()) return hi.error();
  auto id = rules_.string(*lo, *hi);
  if (!id.ok()) return schema_error(id.code(), path, id.message());
  return Expr::call(*id);
}

Result<Expr> SchemaCompiler::number(const ojson& s, bool integer, const std::string& path) {
  NumberBounds b;
  b.integer = integer;
  // Keeps the tighter of two bounds on one side; exclusive wins a tie.
  auto bound = [&](const char* key, bool lower, bool exclusive) -> Status {
    if (!s.contains(key)) return Status::Ok();
    const ojson& v = s[key];
    if (v.is_boolean()) return Status::Ok();  // draft 4's flag, read with its bound
    auto d = v.is_number() ? Decimal::from_json(v, integer) : std::nullopt;
    if (!d)
      return schema_error(ErrorCode::InvalidArgument, path,
                          std::string("'") + key + "' must be a finite number");
    auto& cur = lower ? b.lo : b.hi;
    bool& excl = lower ? b.lo_exclusive : b.hi_exclusive;
    const int c = cur ? compare(*d, *cur) : (lower ? 1 : -1);
    if ((lower && c > 0) || (!lower && c < 0) || (c == 0 && exclusive)) {
      cur = *d;
      excl = exclusive;
    }
    return Status::Ok();
  };
  const bool d4_lo =
      s.value("exclusiveMinimum", ojson()).is_boolean() && s["exclusiveMinimum"].get<bool>();
  const bool d4_hi =
      s.value("exclusiveMaximum", ojson()).is_boolean() && s["exclusiveMaximum"].get<bool>();
  for (Status st : {bound("minimum", true, d4_lo), bound("exclusiveMinimum", true, true),
                    bound("maximum", false, d4_hi), bound("exclusiveMaximum", false, true)})
    if (!st.ok()) return st.error();
  auto id = rules_.number(b);
  if (!id.ok()) return schema_error(id.code(), path, id.message());
  return Expr::call(*id);
}

Result<Expr> SchemaCompiler::object(const ojson& s, const std::string& path, int depth) {
  static const ojson kNoProperties = ojson::object(), kNoneRequired = ojson::array();
  const ojson& props = s.contains("properties") ? s["properties"] : kNoProperties;
  const ojson& required = s.contains("required") ? s["required"] : kNoneRequired;
  if (!props.is_object() || !required.is_array())
    return schema_error(ErrorCode::InvalidArgument, path,
                        "'properties' must be an object and 'required' an array");
  std::set<std::string> req;
  for (const ojson& r : required) {
    if (!r.is_string() || !props.contains(r.get<std::string>()))
      return schema_error(ErrorCode::Unsupported, path,
                          "required " + r.dump() + " is not one of the properties");
    req.insert(r.get<std::string>());
  }
  const ojson extra = s.value("additionalProperties", ojson(true));
  if (!extra.is_boolean())
    return schema_error(ErrorCode::Unsupported, path,
                        "'additionalProperties' as a schema is not supported");
  if (props.empty() && extra.get<bool>()) {
    auto o = rules_.any_object();
    if (!o.ok()) return o.error();
    return Expr::call(*o);
  }
  const Expr ws = rules_.ws();
  std::vector<Expr> kv;
  std::vector<bool> must;
  for (const auto& [key, sub] : props.items()) {
    auto v = value(sub, path + "/properties/" + key, depth + 1);
    if (!v.ok()) return v.error();
    auto name = lit(ojson(key).dump());
    if (!name.ok()) return name.error();
    kv.push_back(Expr::seq({*name, rules_.colon(), *v}));
    must.push_back(req.count(key) > 0);
  }
  // after[i]: properties i.. once one has been written (each comes with a comma);
  // first[i]: properties i.. while none has been (the first written has none).
  const size_t n = kv.size();
  std::vector<Expr> after(n + 1), first(n + 1);
  const Expr comma = rules_.comma();
  for (size_t i = n; i-- > 0;) {
    const Expr next = Expr::seq({comma, kv[i]});
    after[i] = Expr::seq({must[i] ? next : Expr::opt(next), after[i + 1]});
    const Expr take = Expr::seq({kv[i], after[i + 1]});
    first[i] = must[i] ? take : Expr::alt({take, first[i + 1]});
  }
  auto id =
      rules_.rule("object" + path, Expr::seq({Expr::lit("{"), ws, first[0], ws, Expr::lit("}")}));
  if (!id.ok()) return id.error();
  return Expr::call(*id);
}

Result<Expr> SchemaCompiler::array(const ojson& s, const std::string& path, int depth) {
  static const ojson kAnyItem = true;
  const ojson& items = s.contains("items") ? s["items"] : kAnyItem;
  if (items.is_array())
    return schema_error(ErrorCode::Unsupported, path,
                        "'items' as a list (a tuple) is not supported");
  auto item = value(items, path + "/items", depth + 1);
  if (!item.ok()) return item.error();
  auto lo = count(s, "minItems", 0, path);
  if (!lo.ok()) return lo.error();
  auto hi = count(s, "maxItems", -1, path);
  if (!hi.ok()) return hi.error();
  if (*lo > kMaxItems || *hi > kMaxItems)
    return schema_error(
        ErrorCode::Unsupported, path,
        "minItems / maxItems above " + std::to_string(kMaxItems) + " are not supported");
  if (*hi >= 0 && *hi < *lo)
    return schema_error(ErrorCode::InvalidArgument, path, "maxItems is below minItems");
  const Expr ws = rules_.ws();
  Expr body;
  if (*hi == 0) {
    body = Expr::seq({Expr::lit("["), ws, Expr::lit("]")});
  } else {
    const Expr more = Expr::seq({rules_.comma(), *item});
    const Expr list =
        Expr::seq({*item, Expr::repeat(more, std::max(*lo - 1, 0), *hi < 0 ? -1 : *hi - 1)});
    const Expr close = Expr::seq({list, ws, Expr::lit("]")});
    body = Expr::seq({Expr::lit("["), ws, *lo == 0 ? Expr::alt({Expr::lit("]"), close}) : close});
  }
  auto id = rules_.rule("array" + path, body);
  if (!id.ok()) return id.error();
  return Expr::call(*id);
}

}  // namespace

Result<Expr> json_schema_expr(JsonRules& rules, const ojson& schema) {
  SchemaCompiler c(rules, schema);
  return c.value(schema, "", 0);
}

namespace {

Result<std::shared_ptr<const Grammar>> finish_root(std::shared_ptr<Grammar> g, JsonRules& rules,
                                                   Result<Expr> doc) {
  if (!doc.ok()) return doc.error();
  auto root = rules.rule("root", Expr::seq({rules.ws(), *doc}));
  if (!root.ok()) return root.error();
  if (Status st = g->finish(*root); !st.ok()) return with_context(st.error(), "json_schema");
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace

Result<std::shared_ptr<const Grammar>> json_schema_grammar(const ojson& schema, Budget* budget) {
  auto g = std::make_shared<Grammar>();
  JsonRules rules(*g, budget);
  return finish_root(g, rules, json_schema_expr(rules, schema));
}

Result<std::shared_ptr<const Grammar>> json_object_grammar(Budget* budget) {
  auto g = std::make_shared<Grammar>();
  JsonRules rules(*g, budget);
  auto o = rules.any_object();
  if (!o.ok()) return o.error();
  return finish_root(g, rules, Expr::call(*o));
}

}  // namespace kamera::grammar
