#include "jinja/eval.h"

#include <cmath>
#include <iterator>
#include <memory>

#include "jinja/builtins.h"

namespace kamera::jinja {
namespace {

enum class Flow { Normal, Break, Continue };

Error undefined_error(const Value& v) {
  return make_error(ErrorCode::InvalidArgument, "{}",
                    v.undefined_name().empty() ? "value is undefined" : v.undefined_name());
}

class Evaluator {
 public:
  Evaluator(std::string_view name, const RenderLimits& limits, std::time_t now)
      : name_(name), limits_(limits), blimits_{limits.max_output_bytes} {
    frames_.emplace_back();
    for (auto& [k, v] : make_globals(blimits_, now).items) set_in(frames_[0], k, v);
  }

  Result<Text> run(const Body& body, const Object& context) {
    for (const auto& [k, v] : context.items) set_in(frames_[0], k, v);
    Text out;
    out_ = &out;
    KAMERA_ASSIGN_OR_RETURN(Flow f, exec_body(body));
    (void)f;
    return out;
  }

 private:
  // ---- errors, budget, scopes ----

  template <class... Args>
  Error fail(int line, int col, fmt::format_string<Args...> f, Args&&... args) const {
    return make_error(ErrorCode::InvalidArgument, "{}:{}:{}: {}", name_, line, col,
                      fmt::format(f, std::forward<Args>(args)...));
  }
  Error located(int line, int col, const Error& e) const {
    return Error{e.code, fmt::format("{}:{}:{}: {}", name_, line, col, e.message)};
  }

  Status tick(int line, int col) { return charge(1, line, col); }

  Status charge(uint64_t steps, int line, int col) {
    steps_ += steps;
    if (steps_ > limits_.max_steps) {
      return fail(line, col, "template evaluation exceeded its budget of {} steps",
                  limits_.max_steps);
    }
    return Status::Ok();
  }

  Status check_size(size_t bytes, int line, int col) const {
    if (bytes > limits_.max_output_bytes) {
      return fail(line, col, "template output exceeded its limit of {} bytes",
                  limits_.max_output_bytes);
    }
    return Status::Ok();
  }

  // A scope: names and values (few per scope, so a vector beats a hash map).
  using Frame = std::vector<std::pair<std::string, Value>>;

  static void set_in(Frame& f, const std::string& name, Value v) {
    for (auto& [k, old] : f) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    f.emplace_back(name, std::move(v));
  }
  static const Value* find_in(const Frame& f, const std::string& name) {
    for (const auto& [k, v] : f) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > barrier_;) {
      if (const Value* v = find_in(frames_[i], name)) return *v;
    }
    if (const Value* v = find_in(frames_[0], name)) return *v;
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  void assign(const std::string& name, Value v) { set_in(frames_.back(), name, std::move(v)); }

  // ---- statements ----

  Result<Flow> exec_body(const Body& body) {
    for (const StmtPtr& s : body) {
      KAMERA_ASSIGN_OR_RETURN(Flow f, exec(*s));
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Result<Flow> exec(const Stmt& s) {
    KAMERA_TRY(tick(s.line, s.col));
    switch (s.kind) {
      case StmtKind::Text:
        KAMERA_TRY(write(s.text, s.line, s.col));
        break;
      case StmtKind::Output: {
        KAMERA_ASSIGN_OR_RETURN(Value v, eval(*s.exprs[0]));
        auto text = to_text(v);
        if (!text.ok()) return located(s.line, s.col, text.error());
        KAMERA_TRY(write(*text, s.line, s.col));
        break;
      }
      case StmtKind::If: {
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i < s.exprs.size()) {
            KAMERA_ASSIGN_OR_RETURN(Value c, eval(*s.exprs[i]));
            if (!c.truthy()) continue;
          }
          return exec_body(s.bodies[i]);
        }
        break;
      }
      case StmtKind::For:
        KAMERA_TRY(exec_for(s));
        break;
      case StmtKind::Set:
        KAMERA_TRY(exec_set(s));
        break;
      case StmtKind::SetBlock: {
        KAMERA_ASSIGN_OR_RETURN(Text text, capture(s.bodies[0]));
        assign(s.targets[0], Value::text(std::move(text)));
        break;
      }
      case StmtKind::Macro:
        define_macro(s);
        break;
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
      case StmtKind::Block:
        return exec_body(s.bodies[0]);
    }
    return Flow::Normal;
  }

  Status write(const Text& text, int line, int col) {
    out_->append(text);
    return check_size(out_->str.size(), line, col);
  }
  Status write(std::string_view own, int line, int col) {  // the template's own text
    out_->append(own);
    return check_size(out_->str.size(), line, col);
  }

  // Runs `body` into a string of its own (set blocks, macro calls).
  Result<Text> capture(const Body& body) {
    Text buf;
    Text* saved = out_;
    out_ = &buf;
    auto r = exec_body(body);
    out_ = saved;
    if (!r.ok()) return r.error();
    return buf;
  }

  // The items a for loop walks: a list's items, a dict's keys, a string's characters.
  Result<Array> iterate(const Value& v, int line, int col) const {
    if (auto items = iteration_items(v)) return std::move(*items);
    return fail(line, col, "'{}' object is not iterable", v.type_name());
  }

  Status bind_targets(const std::vector<std::string>& targets, const Value& item, int line,
                      int col) {
    if (targets.size() == 1) {
      assign(targets[0], item);
      return Status::Ok();
    }
    const bool iterable = item.is_array() || item.is_string() || item.is_object();
    if (!iterable) return fail(line, col, "cannot unpack {}", item.type_name());
    KAMERA_ASSIGN_OR_RETURN(Array parts, iterate(item, line, col));
    if (parts.size() != targets.size()) {
      return fail(line, col, "cannot unpack {} values into {} names", parts.size(), targets.size());
    }
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
    return Status::Ok();
  }

  // Pushes a scope for the lifetime of the guard.
  struct Scope {
    explicit Scope(Evaluator* e) : e_(e) { e_->frames_.emplace_back(); }
    ~Scope() { e_->frames_.pop_back(); }
    Evaluator* e_;
  };

  Result<Array> loop_items(const Stmt& s) {
    KAMERA_ASSIGN_OR_RETURN(Value seq, eval(*s.exprs[0]));
    KAMERA_ASSIGN_OR_RETURN(Array all, iterate(seq, s.line, s.col));
    KAMERA_TRY(charge(all.size() / 16, s.line, s.col));
    if (!s.exprs[1]) return all;
    Array kept;
    for (const Value& item : all) {
      Scope scope(this);
      KAMERA_TRY(bind_targets(s.targets, item, s.line, s.col));
      KAMERA_ASSIGN_OR_RETURN(Value keep, eval(*s.exprs[1]));
      if (keep.truthy()) kept.push_back(item);
    }
    return kept;
  }

  // The `loop` variable: one object for the whole loop, updated in place each iteration (as
  // jinja2's LoopContext is).
  static Value make_loop(std::shared_ptr<size_t> pos) {
    Object loop;
    for (const char* k : {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                          "depth", "depth0", "previtem", "nextitem"}) {
      loop.items.emplace_back(k, Value());
    }
    loop.items.emplace_back(
        "cycle", Value::callable("loop.cycle", [pos](CallArgs& a) -> Result<Value> {
          if (a.pos.empty()) return make_error(ErrorCode::InvalidArgument, "no items for cycling");
          return a.pos[*pos % a.pos.size()];
        }));
    return Value::object(std::move(loop));
  }

  static void update_loop(Object& loop, const Array& items, size_t i) {
    const int64_t n = int64_t(items.size()), k = int64_t(i);
    const Value values[] = {Value::integer(k + 1),
                            Value::integer(k),
                            Value::integer(n - k),
                            Value::integer(n - k - 1),
                            Value::boolean(i == 0),
                            Value::boolean(k == n - 1),
                            Value::integer(n),
                            Value::integer(1),
                            Value::integer(0),
                            i > 0 ? items[i - 1] : Value::undefined("no previtem"),
                            k + 1 < n ? items[i + 1] : Value::undefined("no nextitem")};
    for (size_t j = 0; j < std::size(values); ++j) loop.items[j].second = values[j];
  }

  Status exec_for(const Stmt& s) {
    KAMERA_ASSIGN_OR_RETURN(Array items, loop_items(s));
    auto pos = std::make_shared<size_t>(0);
    const Value loop = make_loop(pos);
    for (size_t i = 0; i < items.size(); ++i) {
      KAMERA_TRY(tick(s.line, s.col));
      Scope scope(this);
      KAMERA_TRY(bind_targets(s.targets, items[i], s.line, s.col));
      *pos = i;
      update_loop(loop.object_ref(), items, i);
      assign("loop", loop);
      KAMERA_ASSIGN_OR_RETURN(Flow f, exec_body(s.bodies[0]));
      if (f == Flow::Break) break;
    }
    if (items.empty()) {
      KAMERA_ASSIGN_OR_RETURN(Flow f, exec_body(s.bodies[1]));
      (void)f;
    }
    return Status::Ok();
  }

  Status exec_set(const Stmt& s) {
    KAMERA_ASSIGN_OR_RETURN(Value v, eval(*s.exprs[0]));
    if (!s.attr.empty()) {
      Value ns = lookup(s.targets[0]);
      if (!ns.is_object() || !ns.object_ref().is_namespace) {
        return fail(s.line, s.col, "cannot set attribute '{}' on '{}': it is not a namespace()",
                    s.attr, s.targets[0]);
      }
      if (reaches(v, &ns.object_ref())) {
        return fail(s.line, s.col, "'{}.{}' would make the namespace contain itself", s.targets[0],
                    s.attr);
      }
      ns.object_ref().set(s.attr, std::move(v));
      return Status::Ok();
    }
    return bind_targets(s.targets, v, s.line, s.col);
  }

  void define_macro(const Stmt& s) {
    const Stmt* def = &s;
    assign(s.name, Value::callable(
                       s.name, [this, def](CallArgs& a) { return call_macro(*def, a); }, true));
  }

  Result<Value> call_macro(const Stmt& s, CallArgs& a) {
    if (a.pos.size() > s.params.size()) {
      return fail(s.line, s.col, "macro '{}' takes {} arguments, {} given", s.name, s.params.size(),
                  a.pos.size());
    }
    if (depth_ >= limits_.max_call_depth) {
      return fail(s.line, s.col, "macro calls nest deeper than {}", limits_.max_call_depth);
    }
    const size_t saved_barrier = barrier_;
    barrier_ = frames_.size();
    ++depth_;
    frames_.emplace_back();
    auto result = [&]() -> Result<Value> {
      for (size_t i = 0; i < s.params.size(); ++i) {
        Value v = i < a.pos.size() ? a.pos[i] : Value::undefined();
        for (auto& [k, kv] : a.kw) {
          if (k == s.params[i]) v = kv;
        }
        if (v.is_undefined() && i >= a.pos.size() && s.exprs[i]) {
          KAMERA_ASSIGN_OR_RETURN(v, eval(*s.exprs[i]));
        }
        if (v.is_undefined() && v.undefined_name().empty()) {
          v = Value::undefined(fmt::format("macro argument '{}' is undefined", s.params[i]));
        }
        assign(s.params[i], std::move(v));
      }
      KAMERA_ASSIGN_OR_RETURN(Text text, capture(s.bodies[0]));
      return Value::text(std::move(text));
    }();
    frames_.pop_back();
    --depth_;
    barrier_ = saved_barrier;
    return result;
  }

  // ---- expressions ----

  // Every expression costs a step, plus its result's size: a string costs a step per 256 bytes,
  // a list one per 16 items, so no template can copy big values around for free.
  Result<Value> eval(const Expr& e) {
    KAMERA_TRY(tick(e.line, e.col));
    KAMERA_ASSIGN_OR_RETURN(Value v, eval_kind(e));
    const size_t cost = v.is_string()  ? v.as_string().size() / 256
                        : v.is_array() ? v.array_ref().size() / 16
                                       : 0;
    if (cost > 0) KAMERA_TRY(charge(cost, e.line, e.col));
    return v;
  }

  Result<Value> eval_kind(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Literal:
        return e.value;
      case ExprKind::Name:
        return lookup(e.name);
      case ExprKind::List:
      case ExprKind::Tuple: {
        Array items;
        for (const ExprPtr& a : e.args) {
          KAMERA_ASSIGN_OR_RETURN(Value v, eval(*a));
          items.push_back(std::move(v));
        }
        if (e.kind == ExprKind::Tuple) return Value::tuple(std::move(items));
        return Value::array(std::move(items));
      }
      case ExprKind::Dict:
        return eval_dict(e);
      case ExprKind::Attr:
        return eval_attr(e);
      case ExprKind::Item:
        return eval_item(e);
      case ExprKind::Slice:
        return eval_slice(e);
      case ExprKind::Call:
        return eval_call(e);
      case ExprKind::Filter:
        return eval_filter(e);
      case ExprKind::Test:
        return eval_test(e);
      case ExprKind::Unary:
        return eval_unary(e);
      case ExprKind::Binary:
        return eval_binary(e);
      case ExprKind::Compare:
        return eval_compare(e);
      case ExprKind::And:
      case ExprKind::Or: {
        KAMERA_ASSIGN_OR_RETURN(Value l, eval(*e.args[0]));
        if (l.truthy() == (e.kind == ExprKind::Or)) return l;
        return eval(*e.args[1]);
      }
      case ExprKind::Not: {
        KAMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
        return Value::boolean(!v.truthy());
      }
      case ExprKind::Cond: {
        KAMERA_ASSIGN_OR_RETURN(Value c, eval(*e.args[1]));
        if (c.truthy()) return eval(*e.args[0]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("the inline if had no else");
      }
    }
    return fail(e.line, e.col, "unknown expression");
  }

  Result<Value> eval_dict(const Expr& e) {
    Object o;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      KAMERA_ASSIGN_OR_RETURN(Value k, eval(*e.args[i]));
      KAMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[i + 1]));
      if (!k.is_string()) {
        return fail(e.line, e.col, "dict keys must be strings, not {}", k.type_name());
      }
      if (has_pieces(k.literal()))  // a key keeps no spans: the piece would print as text
        return fail(e.line, e.col, "a dict key cannot hold a chunk part of a message");
      o.literal_keys = o.literal_keys || k.any_literal();  // then every key of it is
      o.set(k.as_string(), std::move(v));
    }
    return Value::object(std::move(o));
  }

  // obj.name and obj[key]: a method of the receiver's type, else a dict key; missing is
  // undefined, but looking into an undefined value is an error (as in jinja2).
  Result<Value> member(const Value& obj, const Value& key, bool attr_syntax, const Expr& e) {
    if (obj.is_undefined()) return located(e.line, e.col, undefined_error(obj));
    if (key.is_string()) {
      const std::string& k = key.as_string();
      if (attr_syntax || !obj.is_object()) {
        if (auto m = method(obj, k, blimits_)) return *m;
      }
      if (obj.is_object()) {
        if (const Value* v = obj.object_ref().find(k)) return *v;
        if (auto m = method(obj, k, blimits_)) return *m;
      }
    } else if (key.is_int() && (obj.is_array() || obj.is_string())) {
      return index(obj, key.as_int());
    }
    KAMERA_ASSIGN_OR_RETURN(std::string ks, to_repr(key));
    return Value::undefined(fmt::format("'{}' has no attribute or item {}", obj.type_name(), ks));
  }

  static Value index(const Value& obj, int64_t i) {
    if (obj.is_array()) {
      const Array& a = obj.array_ref();
      const int64_t n = int64_t(a.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list index out of range");
      return a[size_t(i)];
    }
    const int64_t n = int64_t(utf8_decode(obj.as_string()).size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index out of range");
    return code_points(obj, {size_t(i)});
  }

  Result<Value> eval_attr(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0]));
    return member(obj, Value::string(e.name), true, e);
  }

  Result<Value> eval_item(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0]));
    KAMERA_ASSIGN_OR_RETURN(Value key, eval(*e.args[1]));
    return member(obj, key, false, e);
  }

  Result<Value> eval_slice(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0]));
    if (obj.is_undefined()) return located(e.line, e.col, undefined_error(obj));
    std::optional<int64_t> b[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.args[size_t(k) + 1]) continue;
      KAMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[size_t(k) + 1]));
      if (v.is_none()) continue;
      if (!v.is_int() && !v.is_bool()) {
        return fail(e.line, e.col, "slice indices must be integers, not {}", v.type_name());
      }
      b[k] = v.as_int();
    }
    const int64_t step = b[2].value_or(1);
    if (step == 0) return fail(e.line, e.col, "slice step cannot be zero");
    const bool is_str = obj.is_string();
    if (!is_str && !obj.is_array()) {
      return fail(e.line, e.col, "'{}' object is not subscriptable", obj.type_name());
    }
    const std::u32string chars = is_str ? utf8_decode(obj.as_string()) : std::u32string();
    const int64_t n = is_str ? int64_t(chars.size()) : int64_t(obj.array_ref().size());
    // Python's slice.indices(n).
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t start = clamp(b[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(b[1], step > 0 ? n : -1);
    std::vector<size_t> picked;
    Array a;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (is_str) {
        picked.push_back(size_t(i));
      } else {
        a.push_back(obj.array_ref()[size_t(i)]);
      }
    }
    return is_str ? code_points(obj, picked) : Value::array(std::move(a));
  }

  Result<CallArgs> eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) {
      KAMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[i]));
      a.pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      KAMERA_ASSIGN_OR_RETURN(Value v, eval(*x));
      a.kw.emplace_back(k, std::move(v));
    }
    return a;
  }

  Result<Value> eval_call(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value fn, eval(*e.args[0]));
    if (fn.is_undefined()) return located(e.line, e.col, undefined_error(fn));
    if (!fn.is_callable()) {
      return fail(e.line, e.col, "'{}' object is not callable", fn.type_name());
    }
    KAMERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1));
    const Callable& c = fn.callable_ref();
    auto r = c.fn(args);
    if (!r.ok() && !c.is_macro) return located(e.line, e.col, r.error());
    return r;
  }

  Result<Value> eval_filter(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value input, eval(*e.args[0]));
    KAMERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1));
    auto r = apply_filter(e.name, input, args, blimits_);
    if (!r.ok()) return located(e.line, e.col, r.error());
    return r;
  }

  Result<Value> eval_test(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value input, eval(*e.args[0]));
    KAMERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1));
    auto r = apply_test(e.name, input, args);
    if (!r.ok()) return located(e.line, e.col, r.error());
    return Value::boolean(*r != e.negated);
  }

  Result<Value> eval_unary(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
    if (v.is_undefined()) return located(e.line, e.col, undefined_error(v));
    if (!v.is_number() && !v.is_bool()) {
      return fail(e.line, e.col, "bad operand type for unary {}: '{}'", e.name, v.type_name());
    }
    if (e.name == "+") return v.is_bool() ? Value::integer(v.as_int()) : v;
    if (v.is_float()) return Value::number(-v.as_double());
    if (v.as_int() == INT64_MIN) return fail(e.line, e.col, "integer overflow");
    return Value::integer(-v.as_int());
  }

  Result<Value> eval_binary(const Expr& e);
  Result<Value> arithmetic(const Expr& e, const Value& l, const Value& r);
  Result<Value> repeat(const Expr& e, const Value& seq, int64_t times);

  Result<Value> eval_compare(const Expr& e) {
    KAMERA_ASSIGN_OR_RETURN(Value left, eval(*e.args[0]));
    for (size_t i = 0; i < e.ops.size(); ++i) {
      KAMERA_ASSIGN_OR_RETURN(Value right, eval(*e.args[i + 1]));
      KAMERA_ASSIGN_OR_RETURN(bool ok, compare_op(e, e.ops[i], left, right));
      if (!ok) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  Result<bool> compare_op(const Expr& e, const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in" || op == "not in") {
      KAMERA_ASSIGN_OR_RETURN(bool in, contains(e, r, l));
      return in == (op == "in");
    }
    for (const Value* v : {&l, &r}) {
      if (v->is_undefined()) return located(e.line, e.col, undefined_error(*v));
    }
    auto c = compare(l, r);
    if (!c.ok()) return located(e.line, e.col, c.error());
    if (op == "<") return *c < 0;
    if (op == "<=") return *c <= 0;
    if (op == ">") return *c > 0;
    return *c >= 0;
  }

  Result<bool> contains(const Expr& e, const Value& haystack, const Value& needle) {
    switch (haystack.kind()) {
      case Value::Kind::Undefined:
        return false;
      case Value::Kind::String:
        if (!needle.is_string()) {
          return fail(e.line, e.col, "'in <string>' requires string as left operand, not {}",
                      needle.type_name());
        }
        return haystack.as_string().find(needle.as_string()) != std::string::npos;
      case Value::Kind::Array:
        for (const Value& v : haystack.array_ref()) {
          if (equals(v, needle)) return true;
        }
        return false;
      case Value::Kind::Object:
        return needle.is_string() && haystack.object_ref().find(needle.as_string()) != nullptr;
      default:
        return fail(e.line, e.col, "argument of type '{}' is not iterable", haystack.type_name());
    }
  }

  std::string name_;
  RenderLimits limits_;
  BuiltinLimits blimits_;
  std::vector<Frame> frames_;
  size_t barrier_ = 1;  // frames below it, except the globals at 0, belong to macro callers
  Text* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
};

Result<Value> Evaluator::eval_binary(const Expr& e) {
  KAMERA_ASSIGN_OR_RETURN(Value l, eval(*e.args[0]));
  KAMERA_ASSIGN_OR_RETURN(Value r, eval(*e.args[1]));
  if (e.name == "~") {
    KAMERA_ASSIGN_OR_RETURN(Text a, to_text(l));
    KAMERA_ASSIGN_OR_RETURN(Text b, to_text(r));
    KAMERA_TRY(check_size(a.str.size() + b.str.size(), e.line, e.col));
    a.append(b);
    return Value::text(std::move(a));
  }
  for (const Value* v : {&l, &r}) {
    if (v->is_undefined()) return located(e.line, e.col, undefined_error(*v));
  }
  if (e.name == "+" && l.is_string() && r.is_string()) {
    KAMERA_TRY(check_size(l.as_string().size() + r.as_string().size(), e.line, e.col));
    Text t{l.as_string(), l.literal()};
    t.append(r.as_string(), r.literal());
    return Value::text(std::move(t));
  }
  if (e.name == "+" && l.is_array() && r.is_array()) {
    Array a = l.array_ref();
    a.insert(a.end(), r.array_ref().begin(), r.array_ref().end());
    KAMERA_TRY(check_size(a.size(), e.line, e.col));
    return Value::array(std::move(a));
  }
  if (e.name == "*" && (l.is_string() || l.is_array()) && (r.is_int() || r.is_bool())) {
    return repeat(e, l, r.as_int());
  }
  if (e.name == "*" && (r.is_string() || r.is_array()) && (l.is_int() || l.is_bool())) {
    return repeat(e, r, l.as_int());
  }
  const bool ln = l.is_number() || l.is_bool(), rn = r.is_number() || r.is_bool();
  if (!ln || !rn) {
    return fail(e.line, e.col, "unsupported operand type(s) for {}: '{}' and '{}'", e.name,
                l.type_name(), r.type_name());
  }
  return arithmetic(e, l, r);
}

Result<Value> Evaluator::repeat(const Expr& e, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::string("") : Value::array();
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.array_ref().size();
  if (unit > 0 && uint64_t(times) > limits_.max_output_bytes / unit) {
    return check_size(limits_.max_output_bytes + 1, e.line, e.col).error();
  }
  if (seq.is_string()) {
    Text t;
    t.str.reserve(unit * size_t(times));
    for (int64_t i = 0; i < times; ++i) t.append(seq.as_string(), seq.literal());
    return Value::text(std::move(t));
  }
  Array a;
  for (int64_t i = 0; i < times; ++i) {
    a.insert(a.end(), seq.array_ref().begin(), seq.array_ref().end());
  }
  return Value::array(std::move(a));
}

Result<Value> Evaluator::arithmetic(const Expr& e, const Value& l, const Value& r) {
  const std::string& op = e.name;
  const bool ints = !l.is_float() && !r.is_float();
  if ((op == "/" || op == "//" || op == "%") && r.as_double() == 0.0) {
    return fail(e.line, e.col, "division by zero");
  }
  if (ints && op != "/") {
    const int64_t a = l.as_int(), b = r.as_int();
    int64_t out = 0;
    bool overflow = false;
    if (op == "+") {
      overflow = __builtin_add_overflow(a, b, &out);
    } else if (op == "-") {
      overflow = __builtin_sub_overflow(a, b, &out);
    } else if (op == "*") {
      overflow = __builtin_mul_overflow(a, b, &out);
    } else if (op == "//" || op == "%") {
      if (a == INT64_MIN && b == -1) return fail(e.line, e.col, "integer overflow");
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {  // Python floors
        --q;
        m += b;
      }
      out = op == "//" ? q : m;
    } else if (op == "**") {
      if (b < 0) return Value::number(std::pow(double(a), double(b)));
      out = 1;
      int64_t base = a;
      for (int64_t k = b; k > 0 && !overflow; k >>= 1) {  // by squaring
        if (k & 1) overflow = __builtin_mul_overflow(out, base, &out);
        if (k > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
    }
    if (overflow) return fail(e.line, e.col, "integer overflow in {}", op);
    return Value::integer(out);
  }
  const double a = l.as_double(), b = r.as_double();
  if (op == "+") return Value::number(a + b);
  if (op == "-") return Value::number(a - b);
  if (op == "*") return Value::number(a * b);
  if (op == "/") return Value::number(a / b);
  if (op == "//") return Value::number(std::floor(a / b));
  if (op == "%") {
    double m = std::fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return Value::number(m);
  }
  return Value::number(std::pow(a, b));
}

}  // namespace

Result<Text> evaluate(const Body& body, const Object& context, std::string_view name,
                      const RenderLimits& limits, std::time_t now) {
  Evaluator ev(name, limits, now);
  return ev.run(body, context);
}

}  // namespace kamera::jinja
