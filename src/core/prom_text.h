// One writer of Prometheus' text exposition format (version 0.0.4), for every daemon's
// /metrics: a family's HELP and TYPE lines, then its samples, contiguous; label values escaped
// (backslash, double quote, newline) and HELP text escaped (backslash, newline); values printed
// in their shortest exact form, with NaN and +Inf/-Inf spelled as Prometheus reads them.
// A PromText is a value being built; thread-compatible.
#ifndef GPUCLOUD_CORE_PROM_TEXT_H_
#define GPUCLOUD_CORE_PROM_TEXT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpucloud {

// A sample's labels, in the order they are printed.
using PromLabels = std::vector<std::pair<std::string_view, std::string>>;

std::string PromEscapeLabelValue(std::string_view value);
std::string PromEscapeHelp(std::string_view help);
std::string PromValue(double v);

class PromText {
 public:
  // Starts the family `name` of `type` ("counter", "gauge", "histogram", "summary", "untyped").
  // The samples that follow belong to it until the next Family.
  PromText& Family(std::string_view name, std::string_view type, std::string_view help);

  // One sample of the current family: `suffix` is appended to the family's name ("_bucket",
  // "_sum", "_count"; "" for the family's own samples).
  PromText& Sample(const PromLabels& labels, double value, std::string_view suffix = "");
  PromText& Sample(double value) { return Sample({}, value); }

  // A histogram's samples from its bucket upper bounds and cumulative counts (one more count
  // than bounds: the last is +Inf), its sum and count, each with `labels` and an `le`.
  PromText& Histogram(const PromLabels& labels, const std::vector<double>& bounds,
                      const std::vector<double>& cumulative, double sum, double count);

  // Text already in the exposition format (another writer's whole families), appended as is.
  PromText& Append(std::string_view text);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string family_;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_PROM_TEXT_H_
