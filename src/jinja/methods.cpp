// Methods templates call on values: Python's str methods and dict.items/keys/values/get. Lists
// have none here: transformers renders in an immutable sandbox, so append and friends fail there
// too.
#include <algorithm>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/literal_text.h"
#include "jinja/strings.h"

namespace kamera::jinja {
namespace {

template <class... Args>
Error bad(fmt::format_string<Args...> f, Args&&... args) {
  return make_error(ErrorCode::InvalidArgument, f, std::forward<Args>(args)...);
}

Status arity(const CallArgs& a, std::string_view name, size_t lo, size_t hi) {
  if (!a.kw.empty()) return bad("{}() takes no keyword arguments", name);
  if (a.pos.size() < lo || a.pos.size() > hi) {
    return bad("{}() takes {} to {} arguments ({} given)", name, lo, hi, a.pos.size());
  }
  return Status::Ok();
}

// Optional string argument i: null when absent or none.
Result<const std::string*> opt_str(const CallArgs& a, size_t i, std::string_view name) {
  if (i >= a.pos.size() || a.pos[i].is_none()) return static_cast<const std::string*>(nullptr);
  if (!a.pos[i].is_string()) {
    return bad("{}() argument must be str or None, not {}", name, a.pos[i].type_name());
  }
  return &a.pos[i].as_string();
}

Result<int64_t> opt_int(const CallArgs& a, size_t i, int64_t def, std::string_view name) {
  if (i >= a.pos.size()) return def;
  if (!a.pos[i].is_int() && !a.pos[i].is_bool()) {
    return bad("{}() argument must be an integer, not {}", name, a.pos[i].type_name());
  }
  return a.pos[i].as_int();
}

// startswith/endswith with a string or a tuple (list) of strings.
Result<Value> affix(const std::string& s, const CallArgs& a, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  KAMERA_TRY(arity(a, name, 1, 1));
  Array options = a.pos[0].is_array() ? a.pos[0].array_ref() : Array{a.pos[0]};
  for (const Value& o : options) {
    if (!o.is_string()) return bad("{}() needs str or a tuple of str, not {}", name, o.type_name());
    const std::string& x = o.as_string();
    if (x.size() > s.size()) continue;
    if (prefix ? s.compare(0, x.size(), x) == 0
               : s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

Result<Value> char_class(const std::string& s, std::string_view name) {
  const std::u32string u = utf8_decode(s);
  if (u.empty()) return Value::boolean(false);
  auto all = [&](auto pred) { return std::all_of(u.begin(), u.end(), pred); };
  if (name == "isdigit")
    return Value::boolean(all([](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isspace") return Value::boolean(all(is_python_space));
  const auto alpha = [](char32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; };
  if (name == "isalpha") return Value::boolean(all(alpha));
  if (name == "isalnum") {
    return Value::boolean(all([&](char32_t c) { return alpha(c) || (c >= '0' && c <= '9'); }));
  }
  const bool any_cased = std::any_of(u.begin(), u.end(), alpha);
  if (name == "islower") return Value::boolean(any_cased && ascii_lower(s) == s);
  return Value::boolean(any_cased && ascii_upper(s) == s);  // isupper
}

// find, rfind, count and join.
Result<Value> search_or_join(const Value& recv, std::string_view name, CallArgs& a,
                             const BuiltinLimits& limits) {
  KAMERA_TRY(arity(a, name, 1, 1));
  const std::string& s = recv.as_string();
  if (name == "join") {
    if (!a.pos[0].is_array()) return bad("join() needs a list");
    Text out;
    const Array& items = a.pos[0].array_ref();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return bad("join(): sequence item {} is {}, not str", i, items[i].type_name());
      }
      if (i) out.append(s, recv.literal());
      out.append(items[i].as_string(), items[i].literal());
      if (out.str.size() > limits.max_string_bytes) return bad("join() result is over the limit");
    }
    return Value::text(std::move(out));
  }
  if (!a.pos[0].is_string()) return bad("{}() needs a str", name);
  const std::string& x = a.pos[0].as_string();
  if (name == "count") {
    if (x.empty()) return Value::integer(int64_t(utf8_decode(s).size()) + 1);
    return Value::integer(int64_t(python_split(s, &x, -1).size()) - 1);
  }
  const size_t at = name == "find" ? s.find(x) : s.rfind(x);
  if (at == std::string::npos) return Value::integer(-1);
  return Value::integer(int64_t(utf8_decode(std::string_view(s).substr(0, at)).size()));
}

Result<Value> string_method(const Value& recv, std::string_view name, CallArgs& a,
                            const BuiltinLimits& limits) {
  const std::string& s = recv.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    KAMERA_TRY(arity(a, name, 0, 1));
    KAMERA_ASSIGN_OR_RETURN(const std::string* chars, opt_str(a, 0, name));
    return strip_value(recv, chars, name != "rstrip", name != "lstrip");
  }
  if (name == "split" || name == "rsplit") {
    KAMERA_TRY(arity(a, name, 0, 2));
    KAMERA_ASSIGN_OR_RETURN(const std::string* sep, opt_str(a, 0, name));
    if (sep && sep->empty()) return bad("{}(): empty separator", name);
    KAMERA_ASSIGN_OR_RETURN(int64_t maxsplit, opt_int(a, 1, -1, name));
    return split_value(recv, sep, maxsplit, name == "rsplit");
  }
  if (name == "splitlines") {
    KAMERA_TRY(arity(a, name, 0, 1));
    return splitlines_value(recv, !a.pos.empty() && a.pos[0].truthy());
  }
  if (name == "startswith" || name == "endswith") return affix(s, a, name == "startswith");
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    KAMERA_TRY(arity(a, name, 0, 0));
    return same_shape(recv, name == "upper"   ? ascii_upper(s)
                            : name == "lower" ? ascii_lower(s)
                            : name == "title" ? python_title(s)
                                              : python_capitalize(s));
  }
  if (name == "replace") {
    KAMERA_TRY(arity(a, name, 2, 3));
    if (!a.pos[0].is_string() || !a.pos[1].is_string()) return bad("replace() needs two str");
    KAMERA_ASSIGN_OR_RETURN(int64_t count, opt_int(a, 2, -1, name));
    Value r = replace_value(recv, a.pos[0].as_string(), a.pos[1], count);
    if (r.as_string().size() > limits.max_string_bytes)
      return bad("replace() result is over the limit");
    return r;
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "join") {
    return search_or_join(recv, name, a, limits);
  }
  KAMERA_TRY(arity(a, name, 0, 0));
  return char_class(s, name);
}

bool is_string_method(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "strip",      "lstrip",   "rstrip",  "split",   "rsplit", "splitlines",
      "startswith", "endswith", "upper",   "lower",   "title",  "capitalize",
      "replace",    "find",     "rfind",   "count",   "join",   "isdigit",
      "isspace",    "isalpha",  "isalnum", "islower", "isupper"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Result<Value> dict_method(const Value& d, std::string_view name, CallArgs& a) {
  const Object& o = d.object_ref();
  if (name == "get") {
    KAMERA_TRY(arity(a, name, 1, 2));
    if (a.pos[0].is_string()) {
      if (const Value* v = o.find(a.pos[0].as_string())) return *v;
    }
    return a.pos.size() > 1 ? a.pos[1] : Value::none();
  }
  KAMERA_TRY(arity(a, name, 0, 0));
  Array out;
  for (const auto& [k, v] : o.items) {
    if (name == "keys") {
      out.push_back(o.key(k));
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::tuple({o.key(k), v}));
    }
  }
  return Value::array(std::move(out));
}

}  // namespace

std::optional<Value> method(const Value& receiver, std::string_view name,
                            const BuiltinLimits& limits) {
  const std::string n(name);
  if (receiver.is_string() && is_string_method(name)) {
    return Value::callable(n, [receiver, n, limits](CallArgs& a) -> Result<Value> {
      KAMERA_ASSIGN_OR_RETURN(Value r, string_method(receiver, n, a, limits));
      return keep_literal(std::move(r), receiver, a);
    });
  }
  if (receiver.is_object() && !receiver.object_ref().is_namespace &&
      (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::callable(n, [receiver, n](CallArgs& a) { return dict_method(receiver, n, a); });
  }
  return std::nullopt;
}

}  // namespace kamera::jinja
