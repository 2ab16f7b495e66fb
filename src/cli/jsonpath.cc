#include "cli/jsonpath.h"

#include <cctype>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;
using Step = JsonPath::Step;
using Node = JsonPath::Node;

absl::Status Unsupported(std::string_view expr, std::string_view what) {
  return absl::InvalidArgumentError(Cat("jsonpath: {", expr, "}: ", what,
                                        " is not supported (fields, [N], [*], range/end and "
                                        "string literals are)"));
}

// One bracket step at `s[i]` == '[': "[*]", "[N]" or "['name']"; advances `i` past it.
absl::StatusOr<Step> ParseBracket(std::string_view expr, std::string_view s, size_t& i) {
  size_t close = s.find(']', i);
  if (close == std::string_view::npos)
    return absl::InvalidArgumentError(Cat("jsonpath: {", expr, "}: unclosed ["));
  std::string_view inside = s.substr(i + 1, close - i - 1);
  i = close + 1;
  if (inside == "*") return Step{Step::Kind::kAll, "", 0};
  if (inside.size() >= 2 && (inside.front() == '\'' || inside.front() == '"') &&
      inside.back() == inside.front()) {
    return Step{Step::Kind::kField, std::string(inside.substr(1, inside.size() - 2)), 0};
  }
  bool negative = !inside.empty() && inside[0] == '-';
  std::string_view digits = negative ? inside.substr(1) : inside;
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos) {
    if (inside.starts_with("?")) return Unsupported(expr, "a filter [?()]");
    if (inside.find(':') != std::string_view::npos) return Unsupported(expr, "a slice [a:b]");
    if (inside.find(',') != std::string_view::npos) return Unsupported(expr, "a union [a,b]");
    return Unsupported(expr, Cat("[", inside, "]"));
  }
  long n = std::stol(std::string(digits));
  return Step{Step::Kind::kIndex, "", negative ? -n : n};
}

absl::StatusOr<std::vector<Step>> ParsePath(std::string_view expr) {
  std::string_view s = expr;
  if (s.starts_with("$") || s.starts_with("@")) s.remove_prefix(1);
  std::vector<Step> steps;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '[') {
      absl::StatusOr<Step> step = ParseBracket(expr, s, i);
      if (!step.ok()) return step.status();
      steps.push_back(*step);
      continue;
    }
    if (s[i] != '.') return Unsupported(expr, Cat("\"", s.substr(i), "\""));
    ++i;
    if (i < s.size() && s[i] == '.') return Unsupported(expr, "recursive descent (..)");
    size_t end = s.find_first_of(".[", i);
    if (end == std::string_view::npos) end = s.size();
    std::string_view name = s.substr(i, end - i);
    if (name == "*") {
      steps.push_back({Step::Kind::kAll, "", 0});
    } else if (!name.empty()) {
      for (char c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '/') {
          return Unsupported(expr, Cat("the character '", std::string(1, c), "'"));
        }
      }
      steps.push_back({Step::Kind::kField, std::string(name), 0});
    }
    i = end;
  }
  return steps;
}

absl::StatusOr<std::string> ParseLiteral(std::string_view expr) {
  std::string out;
  for (size_t i = 1; i + 1 < expr.size(); ++i) {
    if (expr[i] != '\\' || i + 2 >= expr.size()) {
      out += expr[i];
      continue;
    }
    char c = expr[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

std::vector<const Json*> Evaluate(const std::vector<Step>& steps, const Json& root) {
  std::vector<const Json*> current = {&root};
  for (const Step& step : steps) {
    std::vector<const Json*> next;
    for (const Json* j : current) {
      if (step.kind == Step::Kind::kField && j->is_object()) {
        if (auto it = j->find(step.field); it != j->end()) next.push_back(&*it);
      } else if (step.kind == Step::Kind::kAll && (j->is_array() || j->is_object())) {
        for (const Json& e : *j) next.push_back(&e);
      } else if (step.kind == Step::Kind::kIndex && j->is_array()) {
        long n = step.index < 0 ? static_cast<long>(j->size()) + step.index : step.index;
        if (n >= 0 && n < static_cast<long>(j->size())) next.push_back(&(*j)[n]);
      }
    }
    current = std::move(next);
  }
  return current;
}

std::string Print(const Json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

void Run(const std::vector<Node>& nodes, const Json& data, std::string& out) {
  for (const Node& n : nodes) {
    if (n.kind == Node::Kind::kText) {
      out += n.text;
      continue;
    }
    std::vector<const Json*> values = Evaluate(n.steps, data);
    if (n.kind == Node::Kind::kRange) {
      for (const Json* v : values) Run(n.body, *v, out);
      continue;
    }
    for (size_t i = 0; i < values.size(); ++i) out += (i > 0 ? " " : "") + Print(*values[i]);
  }
}

// Adds the expression between braces to the node list on top of `stack`.
absl::Status AddExpression(std::string_view expr, std::vector<std::vector<Node>>& stack,
                           std::vector<Node>& ranges) {
  if (expr.size() >= 2 && expr.front() == '"' && expr.back() == '"') {
    absl::StatusOr<std::string> text = ParseLiteral(expr);
    if (!text.ok()) return text.status();
    stack.back().push_back({Node::Kind::kText, *text, {}, {}});
    return absl::OkStatus();
  }
  if (expr == "end") {
    if (ranges.empty()) return absl::InvalidArgumentError("jsonpath: {end} without a {range}");
    ranges.back().body = std::move(stack.back());
    stack.pop_back();
    stack.back().push_back(std::move(ranges.back()));
    ranges.pop_back();
    return absl::OkStatus();
  }
  bool range = expr.starts_with("range ");
  std::string_view path = range ? expr.substr(6) : expr;
  while (!path.empty() && path.front() == ' ') path.remove_prefix(1);
  absl::StatusOr<std::vector<Step>> steps = ParsePath(path);
  if (!steps.ok()) return steps.status();
  if (!range) {
    stack.back().push_back({Node::Kind::kPath, "", std::move(*steps), {}});
    return absl::OkStatus();
  }
  ranges.push_back({Node::Kind::kRange, "", std::move(*steps), {}});
  stack.emplace_back();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JsonPath> JsonPath::Parse(std::string_view text) {
  std::vector<std::vector<Node>> stack(1);
  std::vector<Node> ranges;  // open {range}s, innermost last
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find('{', i);
    if (open == std::string_view::npos) open = text.size();
    if (open > i)
      stack.back().push_back({Node::Kind::kText, std::string(text.substr(i, open - i)), {}, {}});
    if (open == text.size()) break;
    size_t close = text.find('}', open);
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(Cat("jsonpath: unclosed { at offset ", open));
    }
    std::string_view expr = text.substr(open + 1, close - open - 1);
    while (!expr.empty() && expr.front() == ' ') expr.remove_prefix(1);
    while (!expr.empty() && expr.back() == ' ') expr.remove_suffix(1);
    if (absl::Status s = AddExpression(expr, stack, ranges); !s.ok()) return s;
    i = close + 1;
  }
  if (!ranges.empty()) return absl::InvalidArgumentError("jsonpath: {range} without an {end}");
  JsonPath p;
  p.nodes_ = std::move(stack.back());
  return p;
}

std::string JsonPath::Execute(const nlohmann::json& data) const {
  std::string out;
  Run(nodes_, data, out);
  return out;
}

}  // namespace gpucloud::cli
