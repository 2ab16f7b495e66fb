#include "cli/service_commands.h"

#include <fmt/format.h>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

const Json& Sub(const Json& j, const char* key) {
  static const Json kEmpty = Json::object();
  if (!j.is_object()) return kEmpty;
  auto it = j.find(key);
  return it == j.end() || !it->is_object() ? kEmpty : *it;
}

std::string Text(const Json& j, const char* key, const std::string& absent = "-") {
  if (!j.is_object() || !j.contains(key)) return absent;
  const Json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string Load(const Json& status, const Json& spec) {
  const Json& load = Sub(status, "load");
  const Json& a = Sub(spec, "autoscaling");
  const std::string metric = Text(a, "metric", "concurrency");
  const std::string unit = metric == "rps"          ? "req/s"
                           : metric == "p95Latency" ? "ms p95"
                                                    : "in flight";
  if (!load.contains("stable")) return "-";
  return Cat(Text(load, "stable"), " ", unit, " (panic ", Text(load, "panic"), ")");
}

}  // namespace

void PrintServicesTable(const std::vector<Json>& items, bool with_namespace, std::ostream& out) {
  const std::string header = fmt::format("{:<24} {:<7} {:<12} {:<16} {:<24} {}", "NAME", "READY",
                                         "REPLICAS", "TARGET", "LOAD", "REASON");
  out << (with_namespace ? fmt::format("{:<16} ", "NAMESPACE") : "") << header << "\n";
  for (const Json& item : items) {
    const Json& meta = Sub(item, "metadata");
    const Json& spec = Sub(item, "spec");
    const Json& st = Sub(item, "status");
    const Json& replicas = Sub(spec, "replicas");
    const Json& a = Sub(spec, "autoscaling");
    if (with_namespace) out << fmt::format("{:<16} ", Text(meta, "namespace"));
    out << fmt::format("{:<24} {:<7} {:<12} {:<16} {:<24} {}\n", Text(meta, "name"),
                       Cat(Text(st, "readyReplicas", "0"), "/", Text(st, "desiredReplicas", "0")),
                       Cat(Text(st, "replicas", "0"), " (", Text(replicas, "min", "1"), "-",
                           Text(replicas, "max", "1"), ")"),
                       Cat(Text(a, "target", "10"), " ", Text(a, "metric", "concurrency")),
                       Load(st, spec), Text(st, "reason"));
  }
}

void DescribeService(const Json& svc, std::ostream& out) {
  const Json& meta = Sub(svc, "metadata");
  const Json& spec = Sub(svc, "spec");
  const Json& st = Sub(svc, "status");
  const Json& tmpl = Sub(spec, "template");
  const Json& a = Sub(spec, "autoscaling");
  const Json& gpu = Sub(Sub(tmpl, "resources"), "gpu");
  out << "Name:          " << Text(meta, "name") << "\n"
      << "Namespace:     " << Text(meta, "namespace") << "\n"
      << "Runs:          " << Text(tmpl, "image", "a host process") << "  command "
      << Text(tmpl, "command") << "\n"
      << "GPU/replica:   " << (gpu.empty() ? std::string("none") : gpu.dump()) << "\n"
      << "Replicas:      " << Text(st, "replicas", "0") << " (ready "
      << Text(st, "readyReplicas", "0") << ", desired " << Text(st, "desiredReplicas", "0")
      << ", min " << Text(Sub(spec, "replicas"), "min", "1") << ", max "
      << Text(Sub(spec, "replicas"), "max", "1") << ")\n"
      << "Target:        " << Text(a, "target", "10") << " " << Text(a, "metric", "concurrency")
      << " per replica; windows " << Text(a, "stableWindow", "60s") << " stable, "
      << Text(a, "panicWindow", "6s") << " panic; to zero after "
      << Text(a, "scaleToZeroAfter", "30s") << "\n"
      << "Load:          " << Load(st, spec) << ", queued " << Text(Sub(st, "load"), "queued", "0")
      << "\n"
      << "Reason:        " << Text(st, "reason") << "\n"
      << "Priority:      " << Text(spec, "priority", "0") << " in queue "
      << Text(spec, "queue", "default") << "\n"
      << "Gateway:       /" << Text(meta, "namespace") << "/" << Text(meta, "name")
      << "/...  timeout " << Text(spec, "requestTimeout", "60s") << ", retries "
      << Text(spec, "retries", "2")
      << (spec.contains("batching") ? Cat(", batching ", Text(Sub(spec, "batching"), "path"))
                                    : std::string())
      << "\n";
  out << "Replicas:\n"
      << fmt::format("  {:<24} {:<16} {:<22} {:<6} {}\n", "JOB", "NODE", "ADDRESS", "READY",
                     "TEMPLATE");
  for (const Json& e : st.value("endpoints", Json::array())) {
    out << fmt::format("  {:<24} {:<16} {:<22} {:<6} {}\n", Text(e, "job"), Text(e, "node"),
                       Text(e, "address"), Text(e, "ready"),
                       e.value("current", true) ? "current" : "old");
  }
  out << "Scaling events:\n";
  for (const Json& h : st.value("history", Json::array())) {
    out << fmt::format("  {}  {} -> {}  {}\n", Text(h, "time"), Text(h, "from"), Text(h, "to"),
                       Text(h, "reason"));
  }
}

}  // namespace gpucloud::cli
