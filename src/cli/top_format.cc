#include "cli/top_format.h"

#include <fmt/format.h>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

constexpr char kUnknown[] = "<unknown>";

std::optional<int64_t> IntField(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string Util(const TopUsage& u) {
  return u.utilization_percent ? Cat(*u.utilization_percent, "%") : kUnknown;
}

std::string Memory(const TopUsage& u) {
  if (!u.memory_used_mib || !u.memory_total_mib) return kUnknown;
  return Cat(HumanMiB(*u.memory_used_mib), "/", HumanMiB(*u.memory_total_mib));
}

}  // namespace

TopUsage TopUsageOf(const Json& object) {
  TopUsage u;
  const Json* usage = nullptr;
  if (object.is_object() && object.contains("status") && object["status"].is_object() &&
      object["status"].contains("gpuUsage")) {
    usage = &object["status"]["gpuUsage"];
  }
  if (usage == nullptr) return u;
  u.measured_gpus = static_cast<int>(IntField(*usage, "measuredGpus").value_or(0));
  if (std::optional<int64_t> v = IntField(*usage, "utilization")) {
    u.utilization_percent = static_cast<int>(*v);
  }
  u.memory_used_mib = IntField(*usage, "memoryUsedMiB");
  u.memory_total_mib = IntField(*usage, "memoryTotalMiB");
  return u;
}

TopUsage TopUsageOf(const std::optional<api::GpuUsage>& usage) {
  if (!usage) return {};
  return {usage->measured_gpus, usage->utilization_percent, usage->memory_used_mib,
          usage->memory_total_mib};
}

std::string HumanMiB(int64_t mib) {
  if (mib < 1024) return Cat(mib, "Mi");
  const int64_t tenths = (mib * 10 + 512) / 1024;  // GiB in tenths, rounded
  return tenths % 10 == 0 ? Cat(tenths / 10, "Gi")
                          : fmt::format("{}.{}Gi", tenths / 10, tenths % 10);
}

std::string FormatTopNodes(const std::vector<TopNodeRow>& rows) {
  constexpr const char* kRow = "{:<20} {:<28} {:>5} {:>5} {:>5} {:>5}  {:<9}  {:<17}  {}\n";
  std::string out =
      fmt::format(kRow, "NODE", "STATUS", "GPUS", "USED", "OUT", "FREE", "UTIL", "MEMORY", "JOBS");
  GpuCounts all;
  TopUsage total;
  int64_t util_sum = 0;
  for (const TopNodeRow& r : rows) {
    all.total += r.gpus.total;
    all.used += r.gpus.used;
    all.out += r.gpus.out;
    all.free += r.gpus.free;
    if (r.usage.utilization_percent) {
      util_sum += int64_t{*r.usage.utilization_percent} * r.usage.measured_gpus;
      total.measured_gpus += r.usage.measured_gpus;
    }
    if (r.usage.memory_used_mib && r.usage.memory_total_mib) {
      total.memory_used_mib = total.memory_used_mib.value_or(0) + *r.usage.memory_used_mib;
      total.memory_total_mib = total.memory_total_mib.value_or(0) + *r.usage.memory_total_mib;
    }
    out += fmt::format(kRow, r.name, r.status, r.gpus.total, r.gpus.used, r.gpus.out, r.gpus.free,
                       Util(r.usage), Memory(r.usage), r.jobs.empty() ? "-" : Join(r.jobs, ","));
  }
  if (total.measured_gpus > 0) {
    total.utilization_percent =
        static_cast<int>((util_sum + total.measured_gpus / 2) / total.measured_gpus);
  }
  out += fmt::format(kRow, "TOTAL", "", all.total, all.used, all.out, all.free, Util(total),
                     Memory(total), "");
  return out;
}

std::string FormatTopJobs(const std::vector<TopJobRow>& rows) {
  constexpr const char* kRow = "{:<40} {:>5}  {:<9}  {:<17}  {}\n";
  std::string out = fmt::format(kRow, "JOB", "GPUS", "UTIL", "MEMORY", "NODES");
  for (const TopJobRow& r : rows) {
    const bool none = r.gpus == 0;
    out += fmt::format(kRow, r.job, r.gpus, none ? "-" : Util(r.usage),
                       none ? "-" : Memory(r.usage), r.nodes.empty() ? "-" : Join(r.nodes, ","));
  }
  return out;
}

}  // namespace gpucloud::cli
