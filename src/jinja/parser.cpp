#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/builtins.h"

namespace kamera::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Text:
      return "text";
    case Tok::VarBegin:
      return "'{{'";
    case Tok::VarEnd:
      return "'}}'";
    case Tok::BlockBegin:
      return "'{%'";
    case Tok::BlockEnd:
      return "'%}'";
    case Tok::Name:
      return "'" + t.text + "'";
    case Tok::String:
      return "a string";
    case Tok::Int:
    case Tok::Float:
      return "number " + t.text;
    case Tok::Op:
      return "'" + t.text + "'";
    case Tok::Eof:
      return "the end of the template";
  }
  return "?";
}

class Parser {
 public:
  Parser(const std::vector<Token>& toks, std::string_view name) : t_(toks), name_(name) {}

  Result<Body> run() {
    KAMERA_ASSIGN_OR_RETURN(Body body, statements({}));
    if (cur().kind != Tok::Eof) return fail(cur(), "unexpected {}", describe(cur()));
    return body;
  }

 private:
  // ---- tokens ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == Tok::Name && cur().text == n; }

  template <class... Args>
  Error fail(const Token& at, fmt::format_string<Args...> f, Args&&... args) const {
    return make_error(ErrorCode::InvalidArgument, "{}:{}:{}: {}", name_, at.line, at.col,
                      fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  Error unsupported(const Token& at, fmt::format_string<Args...> f, Args&&... args) const {
    return make_error(ErrorCode::Unsupported, "{}:{}:{}: {}", name_, at.line, at.col,
                      fmt::format(f, std::forward<Args>(args)...));
  }

  Status expect_op(std::string_view op) {
    if (!is_op(op)) return fail(cur(), "expected '{}', got {}", op, describe(cur()));
    next();
    return Status::Ok();
  }
  Status expect_kind(Tok kind, std::string_view what) {
    if (cur().kind != kind) return fail(cur(), "expected {}, got {}", what, describe(cur()));
    next();
    return Status::Ok();
  }
  Result<std::string> expect_name() {
    if (cur().kind != Tok::Name) return fail(cur(), "expected a name, got {}", describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }

  // Bounds recursion; released when it goes out of scope.
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  Status check_depth() const {
    if (depth_ > kMaxParseDepth) {
      return fail(cur(), "template nests deeper than {} levels", kMaxParseDepth);
    }
    return Status::Ok();
  }

  ExprPtr node(ExprKind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  static ExprPtr binary(ExprKind kind, std::string op, ExprPtr a, ExprPtr b) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = a->line;
    e->col = a->col;
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // ---- statements ----

  // Statements until `{% <one of ends> ...`; leaves cur() at that keyword.
  Result<Body> statements(std::initializer_list<std::string_view> ends) {
    DepthGuard g(&depth_);
    KAMERA_TRY(check_depth());
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == Tok::Eof) {
        if (ends.size() == 0) return body;
        return fail(t, "unexpected end of template: expected '{{% {} %}}'", *(ends.end() - 1));
      }
      if (t.kind == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = t.line;
        s->col = t.col;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == Tok::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = t.line;
        s->col = t.col;
        next();
        KAMERA_ASSIGN_OR_RETURN(ExprPtr e, expression());
        s->exprs.push_back(std::move(e));
        KAMERA_TRY(expect_kind(Tok::VarEnd, "'}}'"));
        body.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        const Token& kw = peek();
        if (kw.kind == Tok::Name) {
          for (std::string_view e : ends) {
            if (kw.text == e) {
              next();
              return body;
            }
          }
        }
        next();
        KAMERA_ASSIGN_OR_RETURN(StmtPtr s, statement());
        body.push_back(std::move(s));
      } else {
        return fail(t, "unexpected {}", describe(t));
      }
    }
  }

  Result<StmtPtr> statement() {
    const Token kw = cur();
    if (kw.kind != Tok::Name) return fail(kw, "expected a tag name, got {}", describe(kw));
    auto s = std::make_unique<Stmt>();
    s->line = kw.line;
    s->col = kw.col;
    next();
    const std::string& k = kw.text;
    if (k == "if") {
      KAMERA_TRY(if_stmt(s.get()));
    } else if (k == "for") {
      KAMERA_TRY(for_stmt(s.get()));
    } else if (k == "set") {
      KAMERA_TRY(set_stmt(s.get()));
    } else if (k == "macro") {
      KAMERA_TRY(macro_stmt(s.get()));
    } else if (k == "break" || k == "continue") {
      if (loops_ == 0) return fail(kw, "'{}' outside a for loop", k);
      s->kind = k == "break" ? StmtKind::Break : StmtKind::Continue;
      KAMERA_TRY(expect_kind(Tok::BlockEnd, "'%}'"));
    } else if (k == "generation") {
      s->kind = StmtKind::Block;
      KAMERA_TRY(expect_kind(Tok::BlockEnd, "'%}'"));
      KAMERA_ASSIGN_OR_RETURN(Body b, statements({"endgeneration"}));
      s->bodies.push_back(std::move(b));
      KAMERA_TRY(end_tag());
    } else if (k == "endif" || k == "endfor" || k == "else" || k == "elif" || k == "endset" ||
               k == "endmacro" || k == "endgeneration") {
      return fail(kw, "'{}' without a matching opening tag", k);
    } else {
      return unsupported(kw, "tag '{}' is not supported", k);
    }
    return s;
  }

  // After an end keyword: the keyword, then '%}'.
  Status end_tag() {
    next();
    return expect_kind(Tok::BlockEnd, "'%}'");
  }

  Status if_stmt(Stmt* s) {
    s->kind = StmtKind::If;
    while (true) {
      KAMERA_ASSIGN_OR_RETURN(ExprPtr cond, expression());
      s->exprs.push_back(std::move(cond));
      KAMERA_TRY(expect_kind(Tok::BlockEnd, "'%}'"));
      KAMERA_ASSIGN_OR_RETURN(Body b, statements({"elif", "else", "endif"}));
      s->bodies.push_back(std::move(b));
      const std::string k = cur().text;
      if (k == "elif") {
        next();
        continue;
      }
      if (k == "else") {
        KAMERA_TRY(end_tag());
        KAMERA_ASSIGN_OR_RETURN(Body e, statements({"endif"}));
        s->bodies.push_back(std::move(e));
      }
      return end_tag();
    }
  }

  Result<std::vector<std::string>> targets() {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    while (true) {
      KAMERA_ASSIGN_OR_RETURN(std::string n, expect_name());
      names.push_back(std::move(n));
      if (!is_op(",")) break;
      next();
    }
    if (paren) KAMERA_TRY(expect_op(")"));
    return names;
  }

  Status for_stmt(Stmt* s) {
    s->kind = StmtKind::For;
    KAMERA_ASSIGN_OR_RETURN(s->targets, targets());
    if (!is_name("in")) return fail(cur(), "expected 'in', got {}", describe(cur()));
    next();
    KAMERA_ASSIGN_OR_RETURN(ExprPtr iter, or_expr());  // no inline if: `if` starts the filter
    s->exprs.push_back(std::move(iter));
    ExprPtr filter;
    if (is_name("if")) {
      next();
      KAMERA_ASSIGN_OR_RETURN(filter, expression());
    }
    s->exprs.push_back(std::move(filter));
    if (is_name("recursive")) return unsupported(cur(), "recursive loops are not supported");
    KAMERA_TRY(expect_kind(Tok::BlockEnd, "'%}'"));
    ++loops_;
    auto body = statements({"else", "endfor"});
    --loops_;
    if (!body.ok()) return body.error();
    s->bodies.push_back(std::move(body).value());
    Body else_body;
    if (cur().text == "else") {
      KAMERA_TRY(end_tag());
      KAMERA_ASSIGN_OR_RETURN(else_body, statements({"endfor"}));
    }
    s->bodies.push_back(std::move(else_body));
    return end_tag();
  }

  Status set_stmt(Stmt* s) {
    s->kind = StmtKind::Set;
    KAMERA_ASSIGN_OR_RETURN(std::string first, expect_name());
    s->targets.push_back(std::move(first));
    if (is_op(".")) {
      next();
      KAMERA_ASSIGN_OR_RETURN(s->attr, expect_name());
    } else {
      while (is_op(",")) {
        next();
        KAMERA_ASSIGN_OR_RETURN(std::string n, expect_name());
        s->targets.push_back(std::move(n));
      }
    }
    if (cur().kind == Tok::BlockEnd && s->attr.empty() && s->targets.size() == 1) {
      s->kind = StmtKind::SetBlock;
      next();
      KAMERA_ASSIGN_OR_RETURN(Body b, statements({"endset"}));
      s->bodies.push_back(std::move(b));
      return end_tag();
    }
    KAMERA_TRY(expect_op("="));
    KAMERA_ASSIGN_OR_RETURN(ExprPtr value, tuple_or_expression());
    s->exprs.push_back(std::move(value));
    return expect_kind(Tok::BlockEnd, "'%}'");
  }

  Status macro_stmt(Stmt* s) {
    s->kind = StmtKind::Macro;
    KAMERA_ASSIGN_OR_RETURN(s->name, expect_name());
    KAMERA_TRY(expect_op("("));
    while (!is_op(")")) {
      KAMERA_ASSIGN_OR_RETURN(std::string p, expect_name());
      s->params.push_back(std::move(p));
      ExprPtr def;
      if (is_op("=")) {
        next();
        KAMERA_ASSIGN_OR_RETURN(def, expression());
      }
      s->exprs.push_back(std::move(def));
      if (!is_op(",")) break;
      next();
    }
    KAMERA_TRY(expect_op(")"));
    KAMERA_TRY(expect_kind(Tok::BlockEnd, "'%}'"));
    const int outer_loops = loops_;
    loops_ = 0;  // break/continue do not cross a macro body
    auto body = statements({"endmacro"});
    loops_ = outer_loops;
    if (!body.ok()) return body.error();
    s->bodies.push_back(std::move(body).value());
    return end_tag();
  }

  // ---- expressions ----

  // `a, b` (a tuple, as `set x = a, b` writes it) or one expression.
  Result<ExprPtr> tuple_or_expression() {
    const Token at = cur();
    KAMERA_ASSIGN_OR_RETURN(ExprPtr first, expression());
    if (!is_op(",")) return first;
    ExprPtr t = node(ExprKind::Tuple, at);
    t->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (cur().kind == Tok::BlockEnd) break;
      KAMERA_ASSIGN_OR_RETURN(ExprPtr e, expression());
      t->args.push_back(std::move(e));
    }
    return t;
  }

  Result<ExprPtr> expression() {
    DepthGuard g(&depth_);
    KAMERA_TRY(check_depth());
    KAMERA_ASSIGN_OR_RETURN(ExprPtr e, or_expr());
    while (is_name("if")) {
      const Token at = cur();
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr cond, or_expr());
      ExprPtr other;
      if (is_name("else")) {
        next();
        KAMERA_ASSIGN_OR_RETURN(other, expression());
      }
      ExprPtr c = node(ExprKind::Cond, at);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  Result<ExprPtr> or_expr() {
    KAMERA_ASSIGN_OR_RETURN(ExprPtr e, and_expr());
    while (is_name("or")) {
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr r, and_expr());
      e = binary(ExprKind::Or, "or", std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> and_expr() {
    KAMERA_ASSIGN_OR_RETURN(ExprPtr e, not_expr());
    while (is_name("and")) {
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr r, not_expr());
      e = binary(ExprKind::And, "and", std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> not_expr() {
    if (is_name("not")) {
      DepthGuard g(&depth_);
      KAMERA_TRY(check_depth());
      ExprPtr n = node(ExprKind::Not, cur());
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr operand, not_expr());
      n->args.push_back(std::move(operand));
      return n;
    }
    return compare();
  }

  // The comparison operator at cur(), consumed, or "" when there is none.
  std::string compare_op() {
    if (cur().kind == Tok::Op) {
      for (std::string_view op : {"==", "!=", "<", "<=", ">", ">="}) {
        if (cur().text == op) {
          next();
          return std::string(op);
        }
      }
      return "";
    }
    if (is_name("in")) {
      next();
      return "in";
    }
    if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
      next();
      next();
      return "not in";
    }
    return "";
  }

  Result<ExprPtr> compare() {
    const Token at = cur();
    KAMERA_ASSIGN_OR_RETURN(ExprPtr first, math1());
    std::string op = compare_op();
    if (op.empty()) return first;
    ExprPtr c = node(ExprKind::Compare, at);
    c->args.push_back(std::move(first));
    while (!op.empty()) {
      KAMERA_ASSIGN_OR_RETURN(ExprPtr r, math1());
      c->ops.push_back(op);
      c->args.push_back(std::move(r));
      op = compare_op();
    }
    return c;
  }

  // One level of left-associative binary operators.
  template <class Next>
  Result<ExprPtr> binary_level(std::initializer_list<std::string_view> ops, Next next_level) {
    KAMERA_ASSIGN_OR_RETURN(ExprPtr e, (this->*next_level)());
    while (true) {
      std::string op;
      for (std::string_view o : ops) {
        if (is_op(o)) op = std::string(o);
      }
      if (op.empty()) return e;
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr r, (this->*next_level)());
      e = binary(ExprKind::Binary, op, std::move(e), std::move(r));
    }
  }
  Result<ExprPtr> math1() { return binary_level({"+", "-"}, &Parser::concat); }
  Result<ExprPtr> concat() { return binary_level({"~"}, &Parser::math2); }
  Result<ExprPtr> math2() { return binary_level({"*", "/", "//", "%"}, &Parser::pow); }
  Result<ExprPtr> pow() { return binary_level({"**"}, &Parser::unary_with_filters); }
  Result<ExprPtr> unary_with_filters() { return unary(true); }

  Result<ExprPtr> unary(bool with_filters) {
    DepthGuard g(&depth_);
    KAMERA_TRY(check_depth());
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(ExprKind::Unary, cur());
      e->name = cur().text;
      next();
      KAMERA_ASSIGN_OR_RETURN(ExprPtr operand, unary(false));
      e->args.push_back(std::move(operand));
    } else {
      KAMERA_ASSIGN_OR_RETURN(e, primary());
    }
    KAMERA_ASSIGN_OR_RETURN(e, postfix(std::move(e)));
    if (with_filters) {
      KAMERA_ASSIGN_OR_RETURN(e, filters(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> primary() {
    const Token t = cur();
    switch (t.kind) {
      case Tok::Name: {
        next();
        ExprPtr e = node(ExprKind::Literal, t);
        if (t.text == "true" || t.text == "True") {
          e->value = Value::boolean(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value::boolean(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::Name;
          e->name = t.text;
        }
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().kind == Tok::String) {  // adjacent literals concatenate
          s += cur().text;
          next();
        }
        ExprPtr e = node(ExprKind::Literal, t);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        next();
        ExprPtr e = node(ExprKind::Literal, t);
        e->value = t.kind == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
        return e;
      }
      case Tok::Op:
        if (t.text == "(") return parenthesized();
        if (t.text == "[") return sequence(ExprKind::List, "]");
        if (t.text == "{") return dict();
        break;
      default:
        break;
    }
    return fail(t, "expected an expression, got {}", describe(t));
  }

  Result<ExprPtr> parenthesized() {
    const Token at = cur();
    next();
    if (is_op(")")) {
      next();
      return node(ExprKind::Tuple, at);
    }
    KAMERA_ASSIGN_OR_RETURN(ExprPtr e, expression());
    if (is_op(")")) {
      next();
      return e;
    }
    ExprPtr t = node(ExprKind::Tuple, at);
    t->args.push_back(std::move(e));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      KAMERA_ASSIGN_OR_RETURN(ExprPtr item, expression());
      t->args.push_back(std::move(item));
    }
    KAMERA_TRY(expect_op(")"));
    return t;
  }

  Result<ExprPtr> sequence(ExprKind kind, std::string_view close) {
    ExprPtr e = node(kind, cur());
    next();
    while (!is_op(close)) {
      KAMERA_ASSIGN_OR_RETURN(ExprPtr item, expression());
      e->args.push_back(std::move(item));
      if (!is_op(",")) break;
      next();
    }
    KAMERA_TRY(expect_op(close));
    return e;
  }

  Result<ExprPtr> dict() {
    ExprPtr e = node(ExprKind::Dict, cur());
    next();
    while (!is_op("}")) {
      KAMERA_ASSIGN_OR_RETURN(ExprPtr k, expression());
      KAMERA_TRY(expect_op(":"));
      KAMERA_ASSIGN_OR_RETURN(ExprPtr v, expression());
      e->args.push_back(std::move(k));
      e->args.push_back(std::move(v));
      if (!is_op(",")) break;
      next();
    }
    KAMERA_TRY(expect_op("}"));
    return e;
  }

  Result<ExprPtr> postfix(ExprPtr e) {
    while (true) {
      const Token at = cur();
      if (is_op(".")) {
        next();
        ExprPtr a;
        if (cur().kind == Tok::Int) {  // foo.0 is foo[0]
          a = node(ExprKind::Item, at);
          ExprPtr idx = node(ExprKind::Literal, cur());
          idx->value = Value::integer(cur().ival);
          next();
          a->args.push_back(std::move(e));
          a->args.push_back(std::move(idx));
        } else {
          a = node(ExprKind::Attr, at);
          KAMERA_ASSIGN_OR_RETURN(a->name, expect_name());
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        next();
        KAMERA_ASSIGN_OR_RETURN(e, subscript(std::move(e), at));
      } else if (is_op("(")) {
        KAMERA_ASSIGN_OR_RETURN(e, call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  // After '[': an index or a slice [start:stop:step], then ']'.
  Result<ExprPtr> subscript(ExprPtr obj, const Token& at) {
    std::vector<ExprPtr> parts(1);
    int colons = 0;
    while (true) {
      if (is_op("]")) break;
      if (is_op(":")) {
        if (++colons > 2) return fail(cur(), "a slice has at most two ':'");
        parts.emplace_back();
        next();
        continue;
      }
      if (parts.back()) return fail(cur(), "expected ':' or ']', got {}", describe(cur()));
      KAMERA_ASSIGN_OR_RETURN(parts.back(), expression());
    }
    next();
    if (colons == 0) {
      if (!parts[0]) return fail(at, "empty subscript '[]'");
      ExprPtr e = node(ExprKind::Item, at);
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    parts.resize(3);
    ExprPtr e = node(ExprKind::Slice, at);
    e->args.push_back(std::move(obj));
    for (auto& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  // '(' args ')' into e->args (after any already there) and e->kwargs.
  Status call_args(Expr* e) {
    KAMERA_TRY(expect_op("("));
    while (!is_op(")")) {
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        KAMERA_ASSIGN_OR_RETURN(ExprPtr v, expression());
        e->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e->kwargs.empty()) {
          return fail(cur(), "positional argument after a keyword argument");
        }
        KAMERA_ASSIGN_OR_RETURN(ExprPtr v, expression());
        e->args.push_back(std::move(v));
      }
      if (!is_op(",")) break;
      next();
    }
    return expect_op(")");
  }

  Result<ExprPtr> call(ExprPtr callee) {
    ExprPtr e = node(ExprKind::Call, cur());
    e->args.push_back(std::move(callee));
    KAMERA_TRY(call_args(e.get()));
    return e;
  }

  Result<ExprPtr> filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        const Token at = cur();
        KAMERA_ASSIGN_OR_RETURN(std::string name, expect_name());
        if (!is_filter(name)) return unsupported(at, "unknown filter '{}'", name);
        ExprPtr f = node(ExprKind::Filter, at);
        f->name = std::move(name);
        f->args.push_back(std::move(e));
        if (is_op("(")) KAMERA_TRY(call_args(f.get()));
        e = std::move(f);
      } else if (is_name("is")) {
        KAMERA_ASSIGN_OR_RETURN(e, test(std::move(e)));
      } else if (is_op("(")) {
        KAMERA_ASSIGN_OR_RETURN(e, call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> test(ExprPtr subject) {
    next();  // 'is'
    bool negated = false;
    if (is_name("not")) {
      negated = true;
      next();
    }
    const Token at = cur();
    KAMERA_ASSIGN_OR_RETURN(std::string name, expect_name());
    if (!is_test(name)) return unsupported(at, "unknown test '{}'", name);
    ExprPtr t = node(ExprKind::Test, at);
    t->name = std::move(name);
    t->negated = negated;
    t->args.push_back(std::move(subject));
    if (is_op("(")) {
      KAMERA_TRY(call_args(t.get()));
    } else if ((cur().kind == Tok::Name && !is_name("else") && !is_name("or") && !is_name("and") &&
                !is_name("if") && !is_name("is") && !is_name("not") && !is_name("in")) ||
               cur().kind == Tok::String || cur().kind == Tok::Int || cur().kind == Tok::Float ||
               is_op("[") || is_op("{")) {
      KAMERA_ASSIGN_OR_RETURN(ExprPtr arg, primary());  // `x is divisibleby 3`
      KAMERA_ASSIGN_OR_RETURN(arg, postfix(std::move(arg)));
      t->args.push_back(std::move(arg));
    }
    return t;
  }

  const std::vector<Token>& t_;
  std::string name_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens, std::string_view name) {
  if (tokens.empty()) return Body{};
  return Parser(tokens, name).run();
}

}  // namespace kamera::jinja
