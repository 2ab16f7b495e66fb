#include "core/prom_text.h"

#include <cmath>

#include "core/text.h"

namespace gpucloud {

std::string PromEscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PromEscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PromValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return Cat(v);  // fmt: the shortest form that reads back exactly
}

PromText& PromText::Family(std::string_view name, std::string_view type, std::string_view help) {
  family_ = std::string(name);
  out_ += Cat("# HELP ", name, " ", PromEscapeHelp(help), "\n# TYPE ", name, " ", type, "\n");
  return *this;
}

PromText& PromText::Sample(const PromLabels& labels, double value, std::string_view suffix) {
  out_ += family_;
  out_ += suffix;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += Cat(labels[i].first, "=\"", PromEscapeLabelValue(labels[i].second), "\"");
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += PromValue(value);
  out_ += '\n';
  return *this;
}

PromText& PromText::Histogram(const PromLabels& labels, const std::vector<double>& bounds,
                              const std::vector<double>& cumulative, double sum, double count) {
  for (size_t i = 0; i <= bounds.size(); ++i) {
    PromLabels with = labels;
    with.emplace_back("le", i < bounds.size() ? PromValue(bounds[i]) : "+Inf");
    double n = i < cumulative.size() ? cumulative[i] : count;
    Sample(with, n, "_bucket");
  }
  Sample(labels, sum, "_sum");
  Sample(labels, count, "_count");
  return *this;
}

PromText& PromText::Append(std::string_view text) {
  out_ += text;
  family_.clear();
  return *this;
}

}  // namespace gpucloud
