#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <unordered_map>

#include "jinja/literal_text.h"
#include "jinja/strings.h"

namespace kamera::jinja {
namespace {

template <class... Args>
Error bad(fmt::format_string<Args...> f, Args&&... args) {
  return make_error(ErrorCode::InvalidArgument, f, std::forward<Args>(args)...);
}

// A builtin's parameters by position or keyword; rejects extra or unknown arguments.
class Params {
 public:
  Params(const CallArgs& a, std::string_view fn, std::initializer_list<std::string_view> names)
      : a_(a), fn_(fn), names_(names) {}

  Status check() const {
    if (a_.pos.size() > names_.size()) {
      return bad("{}() takes at most {} arguments ({} given)", fn_, names_.size(), a_.pos.size());
    }
    for (const auto& [k, v] : a_.kw) {
      if (std::find(names_.begin(), names_.end(), k) == names_.end()) {
        return bad("{}() got an unexpected keyword argument '{}'", fn_, k);
      }
    }
    return Status::Ok();
  }
  const Value* get(size_t i) const {
    if (i < a_.pos.size()) return &a_.pos[i];
    for (const auto& [k, v] : a_.kw) {
      if (k == names_[i]) return &v;
    }
    return nullptr;
  }
  bool flag(size_t i, bool def = false) const {
    const Value* v = get(i);
    return v ? v->truthy() : def;
  }
  Result<std::string> str(size_t i, std::string def = {}) const {
    const Value* v = get(i);
    if (!v || v->is_none()) return def;
    if (!v->is_string())
      return bad("{}(): '{}' must be a string, not {}", fn_, names_[i], v->type_name());
    return v->as_string();
  }
  Result<int64_t> integer(size_t i, int64_t def) const {
    const Value* v = get(i);
    if (!v || v->is_none()) return def;
    if (!v->is_int() && !v->is_bool()) {
      return bad("{}(): '{}' must be an integer, not {}", fn_, names_[i], v->type_name());
    }
    return v->as_int();
  }

 private:
  const CallArgs& a_;
  std::string_view fn_;
  std::vector<std::string_view> names_;
};

// Elements of a list, a dict's keys, a string's characters; undefined is empty.
Result<Array> elements(const Value& v, std::string_view fn) {
  if (auto items = iteration_items(v)) return std::move(*items);
  return bad("{}: '{}' object is not iterable", fn, v.type_name());
}

// Jinja's attribute lookup for filters (map, selectattr, sort, ...): "a.b" walks dict keys.
Value attribute(const Value& v, std::string_view path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string_view part = path.substr(start, dot - start);
    const Value* next = cur.is_object() ? cur.object_ref().find(part) : nullptr;
    if (!next) return Value::undefined(fmt::format("no attribute '{}'", part));
    cur = *next;
    start = dot + 1;
  }
  return cur;
}

Result<Value> length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return Value::integer(0);
    case Value::Kind::String:
      return Value::integer(int64_t(utf8_decode(v.as_string()).size()));
    case Value::Kind::Array:
      return Value::integer(int64_t(v.array_ref().size()));
    case Value::Kind::Object:
      return Value::integer(int64_t(v.object_ref().items.size()));
    default:
      return bad("object of type '{}' has no len()", v.type_name());
  }
}

Result<Value> tojson(const Value& v, CallArgs& a) {
  Params p(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  KAMERA_TRY(p.check());
  JsonStyle st;
  KAMERA_ASSIGN_OR_RETURN(int64_t indent, p.integer(1, -1));
  st.indent = int(std::clamp<int64_t>(indent, -1, 64));
  if (st.indent >= 0) st.item_sep.assign(1, ',');  // (assign: GCC 12 -Wrestrict)
  if (const Value* sep = p.get(2); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->array_ref().size() != 2 || !sep->array_ref()[0].is_string() ||
        !sep->array_ref()[1].is_string()) {
      return bad("tojson(): separators must be a pair of strings");
    }
    st.item_sep = sep->array_ref()[0].as_string();
    st.key_sep = sep->array_ref()[1].as_string();
  }
  st.sort_keys = p.flag(3);
  KAMERA_ASSIGN_OR_RETURN(Text t, to_json_text(v, st));
  Value out = Value::text(std::move(t));
  if (p.flag(0)) return like_whole(out, ascii_escape(out.as_string()));
  return out;
}

Result<Value> join(const Value& v, CallArgs& a) {
  Params p(a, "join", {"d", "attribute"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(std::string sep, p.str(0));
  KAMERA_ASSIGN_OR_RETURN(std::string attr, p.str(1));
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "join"));
  const Spans& sep_lit = p.get(0) && p.get(0)->is_string() ? p.get(0)->literal() : Spans();
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.append(sep, sep_lit);
    KAMERA_ASSIGN_OR_RETURN(Text s, to_text(attr.empty() ? items[i] : attribute(items[i], attr)));
    out.append(s);
  }
  return Value::text(std::move(out));
}

Result<Value> to_int(const Value& v, CallArgs& a) {
  Params p(a, "int", {"default", "base"});
  KAMERA_TRY(p.check());
  const Value def = p.get(0) ? *p.get(0) : Value::integer(0);
  if (v.is_undefined()) return bad("{}", v.undefined_name());  // int(Undefined) fails in jinja2
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return def;
    return Value::integer(int64_t(d));
  }
  if (!v.is_string()) return def;
  const std::string s = python_strip(v.as_string(), nullptr);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && end && *end == 0 && errno == 0) return Value::integer(i);
  const double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    return Value::integer(int64_t(d));
  }
  return def;
}

Result<Value> to_float(const Value& v, CallArgs& a) {
  Params p(a, "float", {"default"});
  KAMERA_TRY(p.check());
  const Value def = p.get(0) ? *p.get(0) : Value::number(0.0);
  if (v.is_undefined()) return bad("{}", v.undefined_name());
  if (v.is_number() || v.is_bool()) return Value::number(v.as_double());
  if (!v.is_string()) return def;
  const std::string s = python_strip(v.as_string(), nullptr);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end && *end == 0) return Value::number(d);
  return def;
}

Result<Value> round_filter(const Value& v, CallArgs& a) {
  Params p(a, "round", {"precision", "method"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(int64_t prec, p.integer(0, 0));
  KAMERA_ASSIGN_OR_RETURN(std::string method, p.str(1, "common"));
  if (!v.is_number() && !v.is_bool()) return bad("round: '{}' is not a number", v.type_name());
  const double scale = std::pow(10.0, double(std::clamp<int64_t>(prec, -300, 300)));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // half to even, as Python's round()
  } else if (method == "floor") {
    r = std::floor(x);
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else {
    return bad("round: method must be 'common', 'ceil' or 'floor'");
  }
  return Value::number(r / scale);
}

Result<Value> default_filter(const Value& v, CallArgs& a) {
  Params p(a, "default", {"default_value", "boolean"});
  KAMERA_TRY(p.check());
  const bool use_default = p.flag(1) ? !v.truthy() : v.is_undefined();
  if (!use_default) return v;
  return p.get(0) ? *p.get(0) : Value::string("");
}

Result<Value> items_filter(const Value& v) {
  if (v.is_undefined()) return Value::array();
  if (!v.is_object()) return bad("items: '{}' is not a mapping", v.type_name());
  Array out;
  const Object& o = v.object_ref();
  for (const auto& [k, x] : o.items) out.push_back(Value::tuple({o.key(k), x}));
  return Value::array(std::move(out));
}

// The key sort/unique/min/max compare: the item (or its attribute), lowercased strings unless
// case_sensitive.
Value sort_key(const Value& v, const std::string& attr, bool case_sensitive) {
  Value k = attr.empty() ? v : attribute(v, attr);
  if (!case_sensitive && k.is_string()) return Value::string(ascii_lower(k.as_string()));
  return k;
}

Result<Value> sort_filter(const Value& v, CallArgs& a) {
  Params p(a, "sort", {"reverse", "case_sensitive", "attribute"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "sort"));
  KAMERA_ASSIGN_OR_RETURN(std::string attr, p.str(2));
  const bool reverse = p.flag(0), cs = p.flag(1);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : items) keyed.emplace_back(sort_key(x, attr, cs), std::move(x));
  Status status;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    auto c = compare(l.first, r.first);
    if (!c.ok()) {
      if (status.ok()) status = c.error();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  KAMERA_TRY(status);
  Array out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::array(std::move(out));
}

Result<Value> unique_filter(const Value& v, CallArgs& a) {
  Params p(a, "unique", {"case_sensitive", "attribute"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "unique"));
  KAMERA_ASSIGN_OR_RETURN(std::string attr, p.str(1));
  Array out, seen;
  for (const Value& x : items) {
    Value k = sort_key(x, attr, p.flag(0));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      continue;
    }
    seen.push_back(std::move(k));
    out.push_back(x);
  }
  return Value::array(std::move(out));
}

Result<Value> min_max(const Value& v, CallArgs& a, bool want_max) {
  Params p(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "min/max"));
  KAMERA_ASSIGN_OR_RETURN(std::string attr, p.str(1));
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    KAMERA_ASSIGN_OR_RETURN(int c, compare(sort_key(items[i], attr, p.flag(0)),
                                           sort_key(items[best], attr, p.flag(0))));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Result<Value> dictsort(const Value& v, CallArgs& a) {
  Params p(a, "dictsort", {"case_sensitive", "by", "reverse"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Value pairs, items_filter(v));
  KAMERA_ASSIGN_OR_RETURN(std::string by, p.str(1, "key"));
  if (by != "key" && by != "value") return bad("dictsort: 'by' must be 'key' or 'value'");
  // Pairs are lists; sort by element 0 or 1.
  Array items = pairs.array_ref();
  const size_t idx = by == "key" ? 0 : 1;
  const bool cs = p.flag(0), rev = p.flag(2);
  Status status;
  std::stable_sort(items.begin(), items.end(), [&](const Value& l, const Value& r) {
    auto c = compare(sort_key(l.array_ref()[idx], "", cs), sort_key(r.array_ref()[idx], "", cs));
    if (!c.ok()) {
      if (status.ok()) status = c.error();
      return false;
    }
    return rev ? *c > 0 : *c < 0;
  });
  KAMERA_TRY(status);
  return Value::array(std::move(items));
}

Result<Value> sum_filter(const Value& v, CallArgs& a) {
  Params p(a, "sum", {"attribute", "start"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "sum"));
  KAMERA_ASSIGN_OR_RETURN(std::string attr, p.str(0));
  Value total = p.get(1) ? *p.get(1) : Value::integer(0);
  for (const Value& x : items) {
    const Value y = attr.empty() ? x : attribute(x, attr);
    if (!(y.is_number() || y.is_bool()) || !(total.is_number() || total.is_bool())) {
      return bad("sum: cannot add '{}' to '{}'", y.type_name(), total.type_name());
    }
    if (y.is_float() || total.is_float()) {
      total = Value::number(total.as_double() + y.as_double());
    } else {
      int64_t s;
      if (__builtin_add_overflow(total.as_int(), y.as_int(), &s)) return bad("sum: overflow");
      total = Value::integer(s);
    }
  }
  return total;
}

Result<Value> indent(const Value& v, CallArgs& a) {
  Params p(a, "indent", {"width", "first", "blank"});
  KAMERA_TRY(p.check());
  Text pad;
  if (const Value* w = p.get(0); w && w->is_string()) {
    pad = Text{w->as_string(), w->literal()};
  } else {
    KAMERA_ASSIGN_OR_RETURN(int64_t width, p.integer(0, 4));
    pad.str.assign(size_t(std::clamp<int64_t>(width, 0, 256)), ' ');
  }
  KAMERA_ASSIGN_OR_RETURN(Text s, to_text(v));
  Text out;
  size_t start = 0;
  bool first_line = true;
  while (start <= s.str.size()) {
    const size_t nl = std::min(s.str.find('\n', start), s.str.size());
    const bool pad_it = first_line ? p.flag(1) : (p.flag(2) || nl > start);
    if (!first_line) out.append(s.str, s.literal, start - 1, start);  // the line break
    if (pad_it) out.append(pad);
    out.append(s.str, s.literal, start, nl);
    first_line = false;
    start = nl + 1;
  }
  return Value::text(std::move(out));
}

// select/reject/selectattr/rejectattr: keep the items whose test (or truthiness) is `keep`.
Result<Value> select(const Value& v, CallArgs& a, bool by_attr, bool keep) {
  // jinja2 walks only a truthy input: none | selectattr(...) is empty.
  KAMERA_ASSIGN_OR_RETURN(Array items, v.truthy() ? elements(v, "select") : Array{});
  if (!a.kw.empty()) return bad("select filters take no keyword arguments");
  size_t k = 0;
  std::string attr, test;
  if (by_attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) return bad("selectattr needs an attribute name");
    attr = a.pos[k++].as_string();
  }
  if (k < a.pos.size()) {
    if (!a.pos[k].is_string() || !is_test(a.pos[k].as_string())) {
      return bad("select: unknown test");
    }
    test = a.pos[k++].as_string();
  }
  CallArgs targs;
  targs.pos.assign(a.pos.begin() + long(k), a.pos.end());
  Array out;
  for (const Value& x : items) {
    const Value subject = by_attr ? attribute(x, attr) : x;
    bool ok = subject.truthy();
    if (!test.empty()) {
      CallArgs copy = targs;
      KAMERA_ASSIGN_OR_RETURN(ok, apply_test(test, subject, copy));
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::array(std::move(out));
}

Result<Value> map_filter(const Value& v, CallArgs& a, const BuiltinLimits& limits) {
  KAMERA_ASSIGN_OR_RETURN(Array items, v.truthy() ? elements(v, "map") : Array{});  // as select
  Array out;
  const Value* attr = nullptr;
  const Value* def = nullptr;
  for (const auto& [k, x] : a.kw) {
    if (k == "attribute") attr = &x;
    if (k == "default") def = &x;
  }
  if (attr) {
    if (!attr->is_string()) return bad("map: attribute must be a string");
    for (const Value& x : items) {
      Value y = attribute(x, attr->as_string());
      out.push_back(y.is_undefined() && def ? *def : y);
    }
    return Value::array(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string() || !is_filter(a.pos[0].as_string())) {
    return bad("map: needs attribute= or the name of a known filter");
  }
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  for (const Value& x : items) {
    CallArgs copy = fargs;
    KAMERA_ASSIGN_OR_RETURN(Value y, apply_filter(a.pos[0].as_string(), x, copy, limits));
    out.push_back(std::move(y));
  }
  return Value::array(std::move(out));
}

Result<Value> replace_filter(const Value& v, CallArgs& a) {
  Params p(a, "replace", {"old", "new", "count"});
  KAMERA_TRY(p.check());
  KAMERA_ASSIGN_OR_RETURN(Text s, to_text(v));
  KAMERA_ASSIGN_OR_RETURN(std::string from, p.str(0));
  KAMERA_ASSIGN_OR_RETURN(std::string to, p.str(1));
  KAMERA_ASSIGN_OR_RETURN(int64_t count, p.integer(2, -1));
  const Value to_value = p.get(1) && p.get(1)->is_string() ? *p.get(1) : Value::string(to);
  return replace_value(Value::text(std::move(s)), from, to_value, count);
}

Result<Value> reverse(const Value& v) {
  if (v.is_string()) {
    std::u32string s = utf8_decode(v.as_string());
    std::reverse(s.begin(), s.end());
    return like_whole(v, utf8_encode(s));
  }
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "reverse"));
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

Result<Value> first_last(const Value& v, bool last) {
  if (v.is_undefined()) return Value::undefined("first/last of undefined");
  KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, last ? "last" : "first"));
  if (items.empty()) return Value::undefined("first/last of an empty sequence");
  return last ? items.back() : items.front();
}

Result<Value> string_filter(std::string_view name, const Value& v, CallArgs& a) {
  KAMERA_ASSIGN_OR_RETURN(Text text, to_text(v));
  const Value s = Value::text(std::move(text));
  const std::string& str = s.as_string();
  if (name == "trim") {
    Params p(a, "trim", {"chars"});
    KAMERA_TRY(p.check());
    KAMERA_ASSIGN_OR_RETURN(std::string chars, p.str(0));
    return strip_value(s, p.get(0) && !p.get(0)->is_none() ? &chars : nullptr, true, true);
  }
  if (!a.pos.empty() || !a.kw.empty()) return bad("{}() takes no arguments", name);
  if (name == "upper") return same_shape(s, ascii_upper(str));
  if (name == "lower") return same_shape(s, ascii_lower(str));
  if (name == "capitalize") return same_shape(s, python_capitalize(str));
  if (name == "title") return same_shape(s, jinja_title(str));
  if (name == "escape" || name == "e") return html_escape_value(s);
  return s;  // string, safe
}

using FilterImpl = Result<Value> (*)(const Value&, CallArgs&, const BuiltinLimits&);

const std::unordered_map<std::string_view, FilterImpl>& filters() {
  static const std::unordered_map<std::string_view, FilterImpl> table = {
      {"tojson", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return tojson(v, a); }},
      {"join", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return join(v, a); }},
      {"length", [](const Value& v, CallArgs&, const BuiltinLimits&) { return length(v); }},
      {"count", [](const Value& v, CallArgs&, const BuiltinLimits&) { return length(v); }},
      {"first",
       [](const Value& v, CallArgs&, const BuiltinLimits&) { return first_last(v, false); }},
      {"last", [](const Value& v, CallArgs&, const BuiltinLimits&) { return first_last(v, true); }},
      {"default",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return default_filter(v, a); }},
      {"d", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return default_filter(v, a); }},
      {"items", [](const Value& v, CallArgs&, const BuiltinLimits&) { return items_filter(v); }},
      {"list",
       [](const Value& v, CallArgs&, const BuiltinLimits&) -> Result<Value> {
         KAMERA_ASSIGN_OR_RETURN(Array items, elements(v, "list"));
         return Value::array(std::move(items));
       }},
      {"int", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return to_int(v, a); }},
      {"float", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return to_float(v, a); }},
      {"abs",
       [](const Value& v, CallArgs&, const BuiltinLimits&) -> Result<Value> {
         if (v.is_float()) return Value::number(std::fabs(v.as_double()));
         if (!v.is_int() && !v.is_bool()) return bad("abs: '{}' is not a number", v.type_name());
         if (v.as_int() == INT64_MIN) return bad("abs: integer overflow");
         return Value::integer(std::llabs(v.as_int()));
       }},
      {"round",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return round_filter(v, a); }},
      {"sort", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return sort_filter(v, a); }},
      {"unique",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return unique_filter(v, a); }},
      {"min",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return min_max(v, a, false); }},
      {"max",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return min_max(v, a, true); }},
      {"dictsort",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return dictsort(v, a); }},
      {"sum", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return sum_filter(v, a); }},
      {"indent", [](const Value& v, CallArgs& a, const BuiltinLimits&) { return indent(v, a); }},
      {"reverse", [](const Value& v, CallArgs&, const BuiltinLimits&) { return reverse(v); }},
      {"replace",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return replace_filter(v, a); }},
      {"map", map_filter},
      {"select",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return select(v, a, false, true); }},
      {"reject", [](const Value& v, CallArgs& a,
                    const BuiltinLimits&) { return select(v, a, false, false); }},
      {"selectattr",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return select(v, a, true, true); }},
      {"rejectattr",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) { return select(v, a, true, false); }},
      {"attr",
       [](const Value& v, CallArgs& a, const BuiltinLimits&) -> Result<Value> {
         if (a.pos.size() != 1 || !a.pos[0].is_string()) return bad("attr() needs one name");
         return attribute(v, a.pos[0].as_string());
       }},
  };
  return table;
}

bool is_string_filter(std::string_view name) {
  for (std::string_view n :
       {"trim", "upper", "lower", "capitalize", "title", "string", "safe", "escape", "e"}) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

Value keep_literal(Value result, const Value& input, const CallArgs& args) {
  if (!result.is_string() || result.as_string().empty() || result.any_literal()) return result;
  bool any = false, pieces = false;
  auto from = [&](const Value& x) {
    any = any || x.any_literal();
    pieces = pieces || has_pieces(x.literal());
  };
  from(input);
  for (const Value& x : args.pos) from(x);
  for (const auto& kv : args.kw) from(kv.second);
  if (!any) return result;
  const size_t n = result.as_string().size();  // the result of a piece is no piece any more
  return Value::text(Text{result.as_string(), {Span{0, n, pieces ? kBrokenPiece : 0}}});
}

bool is_filter(std::string_view name) {
  return is_string_filter(name) || filters().count(name) > 0;
}

Result<Value> apply_filter(std::string_view name, const Value& input, CallArgs& args,
                           const BuiltinLimits& limits) {
  Result<Value> r = Value();
  if (is_string_filter(name)) {
    r = string_filter(name, input, args);  // undefined reads as "", as jinja2's soft_str does
  } else if (auto it = filters().find(name); it != filters().end()) {
    r = it->second(input, args, limits);
  } else {
    return make_error(ErrorCode::Unsupported, "unknown filter '{}'", name);
  }
  if (!r.ok()) return with_context(r.error(), fmt::format("filter '{}'", name));
  r = keep_literal(std::move(*r), input, args);
  const Value& v = *r;
  const size_t size = v.is_string()  ? v.as_string().size()
                      : v.is_array() ? v.array_ref().size()
                                     : 0;
  if (size > limits.max_string_bytes) {
    return bad("filter '{}' built a value over the limit of {} bytes", name,
               limits.max_string_bytes);
  }
  return r;
}

}  // namespace kamera::jinja
