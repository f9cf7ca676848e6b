// Jinja tests (`x is defined`, `x is divisibleby 3`, ...) and the global functions every template
// sees: range, namespace, dict, raise_exception and transformers' strftime_now.
#include <algorithm>
#include <unordered_map>

#include "jinja/builtins.h"

namespace kamera::jinja {
namespace {

template <class... Args>
Error bad(fmt::format_string<Args...> f, Args&&... args) {
  return make_error(ErrorCode::InvalidArgument, f, std::forward<Args>(args)...);
}

constexpr int64_t kMaxRange = int64_t(1) << 20;

using TestImpl = Result<bool> (*)(const Value&, const CallArgs&);

Result<const Value*> one_arg(const CallArgs& a, std::string_view test) {
  if (a.pos.size() != 1 || !a.kw.empty()) return bad("test '{}' takes one argument", test);
  return &a.pos[0];
}

template <int kSign>  // -1: <, 0: ==, 1: >, 2: <=, 3: >=, 4: !=
Result<bool> compare_test(const Value& v, const CallArgs& a) {
  KAMERA_ASSIGN_OR_RETURN(const Value* o, one_arg(a, "comparison"));
  if (kSign == 0) return equals(v, *o);
  if (kSign == 4) return !equals(v, *o);
  KAMERA_ASSIGN_OR_RETURN(int c, compare(v, *o));
  switch (kSign) {
    case -1:
      return c < 0;
    case 1:
      return c > 0;
    case 2:
      return c <= 0;
    default:
      return c >= 0;
  }
}

Result<bool> parity(const Value& v, int64_t mod, int64_t want) {
  if (!v.is_int() && !v.is_bool()) return bad("'{}' is not an integer", v.type_name());
  const int64_t r = v.as_int() % mod;
  return (r < 0 ? r + mod : r) == want;
}

const std::unordered_map<std::string_view, TestImpl>& tests() {
  using V = const Value&;
  using A = const CallArgs&;
  static const std::unordered_map<std::string_view, TestImpl> table = {
      {"defined", [](V v, A) -> Result<bool> { return !v.is_undefined(); }},
      {"undefined", [](V v, A) -> Result<bool> { return v.is_undefined(); }},
      {"none", [](V v, A) -> Result<bool> { return v.is_none(); }},
      {"boolean", [](V v, A) -> Result<bool> { return v.is_bool(); }},
      {"true", [](V v, A) -> Result<bool> { return v.is_bool() && v.as_bool(); }},
      {"false", [](V v, A) -> Result<bool> { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](V v, A) -> Result<bool> { return v.is_int(); }},
      {"float", [](V v, A) -> Result<bool> { return v.is_float(); }},
      {"number", [](V v, A) -> Result<bool> { return v.is_number() || v.is_bool(); }},
      {"string", [](V v, A) -> Result<bool> { return v.is_string(); }},
      {"mapping",
       [](V v, A) -> Result<bool> { return v.is_object() && !v.object_ref().is_namespace; }},
      {"iterable",
       [](V v, A) -> Result<bool> {
         return v.is_undefined() || v.is_string() || v.is_array() || v.is_object();
       }},
      {"sequence",
       [](V v, A) -> Result<bool> {
         return v.is_undefined() || v.is_string() || v.is_array() || v.is_object();
       }},
      {"callable", [](V v, A) -> Result<bool> { return v.is_callable(); }},
      {"odd", [](V v, A) { return parity(v, 2, 1); }},
      {"even", [](V v, A) { return parity(v, 2, 0); }},
      {"divisibleby",
       [](V v, A a) -> Result<bool> {
         KAMERA_ASSIGN_OR_RETURN(const Value* n, one_arg(a, "divisibleby"));
         if (!n->is_int() || n->as_int() == 0) return bad("divisibleby needs a nonzero integer");
         return parity(v, std::llabs(n->as_int()), 0);
       }},
      {"lower",
       [](V v, A) -> Result<bool> {
         return v.is_string() && std::none_of(v.as_string().begin(), v.as_string().end(),
                                              [](char c) { return c >= 'A' && c <= 'Z'; });
       }},
      {"upper",
       [](V v, A) -> Result<bool> {
         return v.is_string() && std::none_of(v.as_string().begin(), v.as_string().end(),
                                              [](char c) { return c >= 'a' && c <= 'z'; });
       }},
      {"eq", compare_test<0>},
      {"equalto", compare_test<0>},
      {"==", compare_test<0>},
      {"ne", compare_test<4>},
      {"!=", compare_test<4>},
      {"lt", compare_test<-1>},
      {"lessthan", compare_test<-1>},
      {"<", compare_test<-1>},
      {"gt", compare_test<1>},
      {"greaterthan", compare_test<1>},
      {">", compare_test<1>},
      {"le", compare_test<2>},
      {"<=", compare_test<2>},
      {"ge", compare_test<3>},
      {">=", compare_test<3>},
      {"sameas",
       [](V v, A a) -> Result<bool> {
         KAMERA_ASSIGN_OR_RETURN(const Value* o, one_arg(a, "sameas"));
         if (v.kind() != o->kind()) return false;
         if (v.is_array()) return &v.array_ref() == &o->array_ref();
         if (v.is_object()) return &v.object_ref() == &o->object_ref();
         return equals(v, *o);
       }},
      {"in",
       [](V v, A a) -> Result<bool> {
         KAMERA_ASSIGN_OR_RETURN(const Value* seq, one_arg(a, "in"));
         if (seq->is_string())
           return v.is_string() && seq->as_string().find(v.as_string()) != std::string::npos;
         if (seq->is_array()) {
           const Array& items = seq->array_ref();
           return std::any_of(items.begin(), items.end(), [&](V x) { return equals(x, v); });
         }
         if (seq->is_object()) return v.is_string() && seq->object_ref().find(v.as_string());
         return bad("test 'in' needs a sequence, not {}", seq->type_name());
       }},
      {"filter", [](V v, A) -> Result<bool> { return v.is_string() && is_filter(v.as_string()); }},
      {"test", [](V v, A) -> Result<bool> { return v.is_string() && is_test(v.as_string()); }},
  };
  return table;
}

Result<Value> range(CallArgs& a) {
  if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3)
    return bad("range() takes 1 to 3 integers");
  int64_t v[3] = {0, 0, 1};
  for (const Value& x : a.pos) {
    if (!x.is_int() && !x.is_bool()) return bad("range() takes integers, not {}", x.type_name());
  }
  if (a.pos.size() == 1) {
    v[1] = a.pos[0].as_int();
  } else {
    for (size_t i = 0; i < a.pos.size(); ++i) v[i] = a.pos[i].as_int();
  }
  if (v[2] == 0) return bad("range() step must not be zero");
  const double n = std::max(0.0, std::ceil((double(v[1]) - double(v[0])) / double(v[2])));
  if (n > double(kMaxRange))
    return bad("range() of {} items is over the limit of {}", n, kMaxRange);
  Array out;
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
    out.push_back(Value::integer(i));
  return Value::array(std::move(out));
}

// namespace(...) and dict(...): keyword arguments (and an optional dict first) as an object.
Result<Value> make_object(CallArgs& a, bool is_namespace) {
  const char* name = is_namespace ? "namespace" : "dict";
  if (a.pos.size() > 1) return bad("{}() takes at most one positional argument", name);
  Object o;
  o.is_namespace = is_namespace;
  if (a.pos.size() == 1) {
    if (!a.pos[0].is_object())
      return bad("{}() expects a dict, not {}", name, a.pos[0].type_name());
    o.items = a.pos[0].object_ref().items;
  }
  for (auto& [k, v] : a.kw) o.set(k, v);
  return Value::object(std::move(o));
}

Result<Value> strftime_now(CallArgs& a, std::time_t now) {
  if (a.pos.size() != 1 || !a.pos[0].is_string() || !a.kw.empty()) {
    return bad("strftime_now() takes one format string");
  }
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof buf, a.pos[0].as_string().c_str(), &tm);
  if (n == 0 && !a.pos[0].as_string().empty()) return bad("strftime_now(): format too long");
  return Value::string(std::string(buf, n));
}

}  // namespace

bool is_test(std::string_view name) {
  return tests().count(name) > 0;
}

Result<bool> apply_test(std::string_view name, const Value& input, CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) return make_error(ErrorCode::Unsupported, "unknown test '{}'", name);
  auto r = it->second(input, args);
  if (!r.ok()) return with_context(r.error(), fmt::format("test '{}'", name));
  return r;
}

Object make_globals(const BuiltinLimits&, std::time_t now) {
  Object g;
  g.set("range", Value::callable("range", range));
  g.set("namespace",
        Value::callable("namespace", [](CallArgs& a) { return make_object(a, true); }));
  g.set("dict", Value::callable("dict", [](CallArgs& a) { return make_object(a, false); }));
  g.set("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Result<Value> {
          std::string msg;
          if (!a.pos.empty()) {
            KAMERA_ASSIGN_OR_RETURN(msg, to_str(a.pos[0]));
          }
          return make_error(ErrorCode::InvalidArgument, "{}{}", kRaisedPrefix, msg);
        }));
  g.set("strftime_now",
        Value::callable("strftime_now", [now](CallArgs& a) { return strftime_now(a, now); }));
  return g;
}

}  // namespace kamera::jinja
