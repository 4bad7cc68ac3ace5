// Renders a parsed template. Scopes follow jinja2's: a for loop's body gets
// a scope per iteration (a `set` there does not outlive it: namespace()
// carries state out), `if` none, a macro one per call over the scope that
// defined it.

#include "engine/template/jinja_ast.hpp"
#include "engine/template/jinja_builtins.hpp"
#include "engine/template/jinja_template.hpp"

#include <algorithm>
#include <memory>
#include <optional>

namespace troupe::jinja {
namespace {

struct scope {
  std::vector<std::pair<std::string, value>> vars;
  std::shared_ptr<scope> parent;

  auto find(std::string_view name) const -> const value* {
    for (const auto* s = this; s != nullptr; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, value v) {
    for (auto& [k, old] : vars)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using scope_ptr = std::shared_ptr<scope>;

auto child(const scope_ptr& parent) -> scope_ptr {
  auto s = std::make_shared<scope>();
  s->parent = parent;
  return s;
}

enum class flow { normal, break_, continue_ };

[[noreturn]] void fail(int line, const std::string& what) {
  throw render_error("line " + std::to_string(line) + ": " + what);
}

class evaluator {
public:
  evaluator(const object& variables, const render_options& options) : vars_(variables), options_(options) {}

  auto eval(const expr& e, const scope_ptr& s) -> value {
    try {
      return eval_inner(e, s);
    } catch (const raised_error&) {
      throw;
    } catch (const render_error& err) {
      if (std::string_view(err.what()).rfind("line ", 0) == 0) throw;
      fail(e.line, err.what());
    }
  }

  auto exec(const node_list& nodes, const scope_ptr& s, std::string& out) -> flow {
    for (const auto& n : nodes) {
      const auto f = exec_one(*n, s, out);
      try {
        check_text_size(out.size());
      } catch (const render_error& err) {
        fail(n->line, err.what());
      }
      if (f != flow::normal) return f;
    }
    return flow::normal;
  }

private:
  auto lookup(const std::string& name, const scope_ptr& s) -> value {
    if (const auto* v = s->find(name)) return *v;
    if (const auto* v = vars_.find(name)) return *v;
    return builtin_global(name);
  }

  auto builtin_global(const std::string& name) -> value {
    if (name == "raise_exception")
      return function{name, [](const call_args& a) -> value {
                        throw raised_error(a.positional.empty() ? "raise_exception" : to_str(a.positional[0]));
                      }};
    if (name == "strftime_now")
      return function{name, [this](const call_args& a) -> value {
                        if (a.positional.size() != 1 || !a.positional[0].is_string())
                          throw render_error("strftime_now takes one format string");
                        if (!options_.now) throw render_error("strftime_now: no clock was given");
                        const auto tm = options_.now();
                        std::string buf(256, '\0');
                        const auto n = std::strftime(buf.data(), buf.size(), a.positional[0].str().c_str(), &tm);
                        buf.resize(n);
                        return buf;
                      }};
    if (name == "range")
      return function{name, [](const call_args& a) -> value {
                        std::int64_t start = 0, stop = 0, step = 1;
                        for (const auto& x : a.positional)
                          if (!x.is_int() && !x.is_bool()) throw render_error("range() takes integers");
                        if (a.positional.size() == 1) stop = a.positional[0].as_int();
                        else if (a.positional.size() >= 2) {
                          start = a.positional[0].as_int();
                          stop = a.positional[1].as_int();
                          if (a.positional.size() == 3) step = a.positional[2].as_int();
                        }
                        if (a.positional.empty() || a.positional.size() > 3 || step == 0)
                          throw render_error("range() takes 1 to 3 integers, the step not 0");
                        const auto span = static_cast<long double>(stop) - static_cast<long double>(start);
                        if (span / static_cast<long double>(step) > 100000) throw render_error("range() too large");
                        const auto label = "range(" + std::to_string(start) + ", " + std::to_string(stop) +
                                           (step != 1 ? ", " + std::to_string(step) : "") + ")";
                        return sequence{sequence::kind::range, [start, stop, step] {
                                          array out;
                                          for (auto i = start; step > 0 ? i < stop : i > stop;) {
                                            out.emplace_back(i);
                                            if (__builtin_add_overflow(i, step, &i)) break;
                                          }
                                          return out;
                                        },
                                        label};
                      }};
    if (name == "namespace" || name == "dict")
      return function{name, [ns = name == "namespace"](const call_args& a) -> value {
                        auto o = std::make_shared<object>();
                        o->is_namespace = ns;
                        for (const auto& p : a.positional) {
                          if (!p.is_object()) throw render_error("namespace()/dict() take a mapping or keywords");
                          for (const auto& [k, v] : p.obj().entries) o->set(k, v);
                        }
                        for (const auto& [k, v] : a.named) o->set(k, v);
                        return value(std::move(o));
                      }};
    return {};
  }

  auto args_of(const expr& e, std::size_t first, const scope_ptr& s) -> call_args {
    call_args a;
    for (std::size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], s));
    for (const auto& [k, v] : e.kwargs) a.named.emplace_back(k, eval(*v, s));
    return a;
  }

  auto call(const value& callee, const call_args& a, const expr& e) -> value {
    if (callee.is_undefined()) {
      const auto& c = *e.args[0];
      fail(e.line, (c.k == expr::kind::name ? "'" + c.name + "'" : std::string("the callee")) + " is undefined");
    }
    if (!callee.is_function()) fail(e.line, "object is not callable");
    return callee.fn().call(a);
  }

  auto eval_inner(const expr& e, const scope_ptr& s) -> value {
    switch (e.k) {
    case expr::kind::literal: return e.literal;
    case expr::kind::name: return lookup(e.name, s);
    case expr::kind::list:
    case expr::kind::tuple: {
      array out;
      for (const auto& x : e.args) out.push_back(eval(*x, s));
      return e.k == expr::kind::tuple ? value::tuple(std::move(out)) : value(std::move(out));
    }
    case expr::kind::dict: {
      object o;
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const auto key = eval(*e.args[i], s);
        if (!key.is_string()) fail(e.line, "dict keys other than strings are not supported");
        o.set(key.str(), eval(*e.args[i + 1], s));
      }
      return o;
    }
    case expr::kind::attr: return get_attr(eval(*e.args[0], s), e.name);
    case expr::kind::item: return get_item(eval(*e.args[0], s), eval(*e.args[1], s));
    case expr::kind::slice: {
      const auto part = [&](std::size_t i) { return e.args[i] ? eval(*e.args[i], s) : value::none(); };
      return get_slice(eval(*e.args[0], s), part(1), part(2), part(3));
    }
    case expr::kind::call: return call(eval(*e.args[0], s), args_of(e, 1, s), e);
    case expr::kind::filter: return apply_filter(e.name, eval(*e.args[0], s), args_of(e, 1, s));
    case expr::kind::test: return apply_test(e.name, eval(*e.args[0], s), args_of(e, 1, s)) != e.negated;
    case expr::kind::unary: {
      const auto v = eval(*e.args[0], s);
      if (e.name == "not") return !v.truthy();
      return unary_minus(v, e.name == "-");
    }
    case expr::kind::binary: return binary_op(e.name, eval(*e.args[0], s), eval(*e.args[1], s));
    case expr::kind::compare: {
      auto left = eval(*e.args[0], s);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        auto right = eval(*e.args[i + 1], s);
        if (!compare_op(e.ops[i], left, right)) return false;
        left = std::move(right);
      }
      return true;
    }
    case expr::kind::logical: {
      auto left = eval(*e.args[0], s);
      if ((e.name == "and") != left.truthy()) return left; // Python returns the deciding operand
      return eval(*e.args[1], s);
    }
    case expr::kind::cond:
      if (eval(*e.args[1], s).truthy()) return eval(*e.args[0], s);
      return e.args[2] ? eval(*e.args[2], s) : value{};
    }
    return {};
  }

  void assign(const node& n, const std::vector<std::string>& targets, const value& v, scope& s) {
    if (targets.size() == 1) {
      s.set(targets[0], v);
      return;
    }
    const auto items = iterate(v);
    if (items.size() != targets.size())
      fail(n.line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()));
    for (std::size_t i = 0; i < targets.size(); ++i) s.set(targets[i], items[i]);
  }

  auto exec_for(const node& n, const scope_ptr& s, std::string& out) -> flow {
    const auto source = eval(*n.e, s);
    auto all = iterate(source);
    array items;
    if (n.filter) {
      for (auto& x : all) {
        auto probe = child(s);
        assign(n, n.targets, x, *probe);
        if (eval(*n.filter, probe).truthy()) items.push_back(std::move(x));
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) return exec(n.else_body, s, out);
    const auto length = static_cast<std::int64_t>(items.size());
    // loop.changed(x): whether x differs from its value at the last call.
    auto last_changed = std::make_shared<std::optional<array>>();
    for (std::int64_t i = 0; i < length; ++i) {
      if (++steps_ > k_max_steps) fail(n.line, "the template runs more than " + std::to_string(k_max_steps) + " loop steps");
      auto body = child(s);
      assign(n, n.targets, items[static_cast<std::size_t>(i)], *body);
      object loop;
      loop.set("index", i + 1);
      loop.set("index0", i);
      loop.set("revindex", length - i);
      loop.set("revindex0", length - i - 1);
      loop.set("first", i == 0);
      loop.set("last", i == length - 1);
      loop.set("length", length);
      loop.set("depth", 1);
      loop.set("depth0", 0);
      loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : value{});
      loop.set("nextitem", i + 1 < length ? items[static_cast<std::size_t>(i + 1)] : value{});
      loop.set("cycle", function{"cycle", [i](const call_args& a) -> value {
                                   if (a.positional.empty()) throw render_error("no items for cycling given");
                                   return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
                                 }});
      loop.set("changed", function{"changed", [last_changed](const call_args& a) -> value {
                                     const auto& now = a.positional;
                                     const bool same = last_changed->has_value() && (*last_changed)->size() == now.size() &&
                                                       std::equal(now.begin(), now.end(), (*last_changed)->begin(), equals);
                                     if (same) return false;
                                     *last_changed = now;
                                     return true;
                                   }});
      body->set("loop", std::move(loop));
      if (exec(n.body, body, out) == flow::break_) break;
    }
    return flow::normal;
  }

  // The scope is held weakly: it holds the macro (a cycle otherwise), and
  // outlives every call made while rendering.
  auto make_macro(const node& n, const scope_ptr& defining) -> value {
    return function{n.text, [this, &n, weak = std::weak_ptr<scope>(defining)](const call_args& a) -> value {
                      const auto defining = weak.lock();
                      if (!defining) throw render_error("macro '" + n.text + "' called outside its scope");
                      return run_macro(n.text, n.params, n.body, defining, a);
                    }};
  }

  auto run_macro(const std::string& name, const std::vector<std::pair<std::string, expr_ptr>>& params,
                 const node_list& body, const scope_ptr& defining, const call_args& a) -> value {
    if (++depth_ > k_max_depth) throw render_error("macros nested more than " + std::to_string(k_max_depth) + " deep");
    struct leave {
      int& d;
      ~leave() { --d; }
    } guard{depth_};
    if (a.positional.size() > params.size())
      throw render_error("macro '" + name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    auto s = child(defining);
    for (const auto& named : a.named) {
      const auto& key = named.first;
      const bool known = key == "caller" || std::any_of(params.begin(), params.end(), [&](auto& p) { return p.first == key; });
      if (!known) throw render_error("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& [pname, def] = params[i];
      if (const auto* v = a.get(i, pname)) s->set(pname, *v);
      else s->set(pname, def ? eval(*def, s) : value{});
    }
    if (const auto* c = a.get(static_cast<std::size_t>(-1), "caller")) s->set("caller", *c);
    std::string out;
    (void)exec(body, s, out);
    return out;
  }

  auto exec_one(const node& n, const scope_ptr& s, std::string& out) -> flow {
    switch (n.k) {
    case node::kind::text: out += n.text; break;
    case node::kind::output: {
      const auto v = eval(*n.e, s);
      if (v.is_function()) fail(n.line, "cannot print the callable " + v.fn().name);
      out += to_str(v);
      break;
    }
    case node::kind::if_: return exec(eval(*n.e, s).truthy() ? n.body : n.else_body, s, out);
    case node::kind::for_: return exec_for(n, s, out);
    case node::kind::set: {
      auto v = eval(*n.e, s);
      if (n.text.empty()) {
        assign(n, n.targets, v, *s);
        break;
      }
      const auto ns = lookup(n.targets[0], s);
      if (!ns.is_object() || !ns.obj().is_namespace) fail(n.line, "cannot assign attribute on non-namespace object");
      ns.obj_ptr()->set(n.text, std::move(v));
      break;
    }
    case node::kind::set_block: {
      std::string text;
      (void)exec(n.body, s, text);
      s->set(n.targets[0], std::move(text));
      break;
    }
    case node::kind::macro: s->set(n.text, make_macro(n, s)); break;
    case node::kind::call_block: {
      const auto& c = *n.e;
      auto callee = eval(*c.args[0], s);
      auto a = args_of(c, 1, s);
      a.named.emplace_back("caller", function{"caller", [this, &n, s](const call_args& ca) -> value {
                                                return run_macro("caller", n.params, n.body, s, ca);
                                              }});
      out += to_str(call(callee, a, c));
      break;
    }
    case node::kind::break_: return flow::break_;
    case node::kind::continue_: return flow::continue_;
    case node::kind::generation: return exec(n.body, s, out);
    }
    return flow::normal;
  }

  // Bounds on a template's work, far above any chat template's.
  static constexpr int k_max_depth = 100;
  static constexpr std::int64_t k_max_steps = 1'000'000;

  const object& vars_;
  const render_options& options_;
  int depth_ = 0;
  std::int64_t steps_ = 0;
};

} // namespace

jinja_template::jinja_template(std::string_view source)
    : program_(std::make_shared<const program>(parse_template(source))) {}

auto jinja_template::render(const object& variables, const render_options& options) const -> std::string {
  evaluator ev(variables, options);
  std::string out;
  (void)ev.exec(program_->body, std::make_shared<scope>(), out);
  return out;
}

} // namespace troupe::jinja
