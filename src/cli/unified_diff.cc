#include "cli/unified_diff.h"

#include <vector>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

constexpr size_t kContext = 3;

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// One line of the edit script: ' ' kept, '-' only in `from`, '+' only in `to`.
struct Edit {
  char op;
  size_t from_line, to_line;  // 0-based positions before this edit
  const std::string* text;
};

std::vector<Edit> EditScript(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  std::vector<std::vector<size_t>> lcs(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;) {
    for (size_t j = b.size(); j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<Edit> edits;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      edits.push_back({' ', i, j, &a[i]});
      ++i, ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      edits.push_back({'-', i, j, &a[i]});  // removals first, as diff -u prints them
      ++i;
    } else {
      edits.push_back({'+', i, j, &b[j]});
      ++j;
    }
  }
  return edits;
}

// "@@ -start,count +start,count @@" and the lines of edits[begin, end).
std::string Hunk(const std::vector<Edit>& edits, size_t begin, size_t end) {
  size_t from_count = 0, to_count = 0;
  std::string body;
  for (size_t k = begin; k < end; ++k) {
    if (edits[k].op != '+') ++from_count;
    if (edits[k].op != '-') ++to_count;
    body += Cat(std::string(1, edits[k].op), *edits[k].text, "\n");
  }
  // diff -u numbers an empty side by the line before it.
  size_t from_start = edits[begin].from_line + (from_count > 0 ? 1 : 0);
  size_t to_start = edits[begin].to_line + (to_count > 0 ? 1 : 0);
  return Cat("@@ -", from_start, ",", from_count, " +", to_start, ",", to_count, " @@\n", body);
}

}  // namespace

std::string UnifiedDiff(std::string_view from, std::string_view to, std::string_view from_name,
                        std::string_view to_name) {
  std::vector<std::string> a = Lines(from), b = Lines(to);
  std::vector<Edit> edits = EditScript(a, b);
  std::string out;
  size_t k = 0;
  while (k < edits.size()) {
    while (k < edits.size() && edits[k].op == ' ') ++k;
    if (k == edits.size()) break;
    size_t begin = k >= kContext ? k - kContext : 0;
    // Extend over changes closer than two contexts apart, then add the trailing context.
    size_t last_change = k;
    for (size_t m = k; m < edits.size() && m <= last_change + 2 * kContext; ++m) {
      if (edits[m].op != ' ') last_change = m;
    }
    size_t end = std::min(edits.size(), last_change + 1 + kContext);
    out += Hunk(edits, begin, end);
    k = end;
  }
  if (out.empty()) return "";
  return Cat("--- ", from_name, "\n+++ ", to_name, "\n", out);
}

}  // namespace gpucloud::cli
