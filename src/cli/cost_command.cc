#include "cli/cost_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ostream>
#include <set>

#include "absl/time/clock.h"
#include "api/job_status.h"
#include "api/paths.h"
#include "cli/gpuctl.h"
#include "cli/remote.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

std::string StrAt(const Json& j, const char* object, const char* key) {
  auto o = j.find(object);
  if (o == j.end() || !o->is_object()) return "";
  auto v = o->find(key);
  return v != o->end() && v->is_string() ? v->get<std::string>() : "";
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

absl::StatusOr<std::vector<CostRow>> CostRows(const std::vector<Json>& jobs, const std::string& by,
                                              int64_t now_ms) {
  if (by != "namespace" && by != "queue" && by != "job" && by != "class") {
    return absl::InvalidArgumentError(
        Cat("--by: \"", by, "\" is not namespace, queue, job or class"));
  }
  std::map<std::string, CostRow> rows;
  for (const Json& job : jobs) {
    absl::StatusOr<api::JobStatus> st = api::JobStatusOf(job);
    if (!st.ok()) continue;
    std::map<std::string, double> cost = api::CostSoFar(*st, now_ms);
    if (cost.empty()) continue;
    const std::string ns = StrAt(job, "metadata", "namespace");
    std::string queue = StrAt(job, "spec", "queue");
    if (queue.empty()) queue = "default";
    auto key_of = [&](const std::string& billing) {
      return by == "namespace" ? ns
             : by == "queue"   ? queue
             : by == "job"     ? Cat(ns, "/", StrAt(job, "metadata", "name"))
                               : billing;
    };
    std::set<std::string> counted;  // a job counts once in each group it is in
    for (const auto& [billing, usd] : cost) {
      const std::string key = key_of(billing);
      CostRow& row = rows[key];
      row.key = key;
      row.by_class[billing] += usd;
      row.total += usd;
      if (counted.insert(key).second) ++row.jobs;
    }
  }
  std::vector<CostRow> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(),
                   [](const CostRow& a, const CostRow& b) { return a.total > b.total; });
  return out;
}

std::string FormatCost(const std::vector<CostRow>& rows, const std::string& by,
                       const std::string& output) {
  std::set<std::string> classes;
  for (const CostRow& r : rows) {
    for (const auto& [c, v] : r.by_class) classes.insert(c);
  }
  if (output == "json") {
    Json list = Json::array();
    for (const CostRow& r : rows) {
      list.push_back(
          {{by, r.key}, {"totalUsd", r.total}, {"byClass", r.by_class}, {"jobs", r.jobs}});
    }
    return list.dump(2) + "\n";
  }
  if (output == "csv") {
    std::string out = Cat(by, ",jobs,total_usd");
    for (const std::string& c : classes) out += Cat(",", c, "_usd");
    out += "\n";
    for (const CostRow& r : rows) {
      out += fmt::format("{},{},{:.4f}", r.key, r.jobs, r.total);
      for (const std::string& c : classes) {
        auto it = r.by_class.find(c);
        out += fmt::format(",{:.4f}", it == r.by_class.end() ? 0.0 : it->second);
      }
      out += "\n";
    }
    return out;
  }
  std::string out = fmt::format("{:<32} {:>6} {:>12}", Upper(by), "JOBS", "TOTAL");
  for (const std::string& c : classes) out += fmt::format(" {:>12}", Upper(c));
  out += "\n";
  double total = 0;
  for (const CostRow& r : rows) {
    out += fmt::format("{:<32} {:>6} {:>12}", r.key, r.jobs, fmt::format("${:.2f}", r.total));
    for (const std::string& c : classes) {
      auto it = r.by_class.find(c);
      out +=
          fmt::format(" {:>12}", fmt::format("${:.2f}", it == r.by_class.end() ? 0.0 : it->second));
    }
    out += "\n";
    total += r.total;
  }
  out += fmt::format("{:<32} {:>6} {:>12}\n", "total", "", fmt::format("${:.2f}", total));
  return out;
}

int RunCost(const api::Client& client, const std::string& ns, const std::string& by,
            const std::string& output, std::ostream& out, std::ostream& err) {
  if (output != "table" && output != "json" && output != "csv") {
    err << "gpuctl: -o: \"" << output << "\" is not table, json or csv\n";
    return kExitUsage;
  }
  std::optional<api::HttpResponse> r =
      Send(client, "GET", ns.empty() ? api::AllJobsPath() : api::JobsPath(ns), "", err,
           ns.empty() ? "jobs of every namespace (admins only; -n NS)" : "");
  if (!r) return kExitInvalid;
  Json list = Json::parse(r->body, nullptr, false);
  if (list.is_discarded()) {
    err << "gpuctl: the server's answer is not JSON\n";
    return kExitInvalid;
  }
  std::vector<Json> jobs;
  if (auto items = list.find("items"); items != list.end() && items->is_array()) {
    for (const Json& j : *items) jobs.push_back(j);
  }
  absl::StatusOr<std::vector<CostRow>> rows = CostRows(jobs, by, absl::ToUnixMillis(absl::Now()));
  if (!rows.ok()) {
    err << "gpuctl: " << rows.status().message() << "\n";
    return kExitUsage;
  }
  out << FormatCost(*rows, by, output);
  return kExitOk;
}

}  // namespace gpucloud::cli
