#include "cli/cost_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/paths.h"
#include "cli/gpuctl.h"
#include "cli/remote.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The groups a record's dollars go to, with the dollars per hour of each.
std::map<std::string, double> RatesBy(const api::AttemptUsage& u, const std::string& by) {
  if (by == "class") return u.usd_per_hour;
  if (by == "pool") {
    std::map<std::string, double> out;
    for (const auto& [pool, rate] : u.usd_per_hour_by_pool) out[pool.empty() ? "-" : pool] = rate;
    return out;
  }
  double total = 0;
  for (const auto& [billing, rate] : u.usd_per_hour) total += rate;
  const std::string key = by == "namespace" ? u.ns
                          : by == "queue"   ? u.queue
                                            : Cat(u.ns, "/", u.job);
  return {{key, total}};
}

std::string Dollars(double v) { return fmt::format("${:.2f}", v); }

// --since and --until (ParseCostTime; each left as it is when not given) into a window; false
// after saying why on `err`. `empty_ok`: since == until is a window (of nothing).
bool ParseWindow(const std::string& since_text, const std::string& until_text, int64_t now_ms,
                 bool empty_ok, int64_t* since, int64_t* until, std::ostream& err) {
  for (auto [flag, text, into] :
       {std::tuple{"--since", &since_text, since}, {"--until", &until_text, until}}) {
    if (text->empty()) continue;
    absl::StatusOr<int64_t> t = ParseCostTime(flag, *text, now_ms);
    if (!t.ok()) {
      err << "gpuctl: " << t.status().message() << "\n";
      return false;
    }
    *into = *t;
  }
  if (*until < *since || (!empty_ok && *until == *since)) {
    err << (empty_ok ? "gpuctl: --until: is before --since\n"
                     : "gpuctl: --until: is not after --since\n");
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<CostRow>> CostRows(const std::vector<api::AttemptUsage>& usage,
                                              const std::string& by, int64_t since_ms,
                                              int64_t until_ms) {
  if (by != "namespace" && by != "queue" && by != "job" && by != "class" && by != "pool") {
    return absl::InvalidArgumentError(
        Cat("--by: \"", by, "\" is not namespace, queue, job, class or pool"));
  }
  std::map<std::string, CostRow> rows;
  std::map<std::string, std::set<std::string>> jobs;  // group -> job uids
  for (const api::AttemptUsage& u : usage) {
    const double hours = u.HoursIn(since_ms, until_ms);
    if (hours <= 0) continue;
    const double part = u.hours() > 0 ? hours / u.hours() : 0.0;  // of the attempt's energy
    std::map<std::string, double> rates = RatesBy(u, by);
    double total_rate = 0;
    for (const auto& [key, rate] : rates) total_rate += rate;
    for (const auto& [key, rate] : rates) {
      // GPU time and energy follow the dollars where an attempt spans groups (classes, pools).
      const double weight = total_rate > 0 ? rate / total_rate : 1.0 / rates.size();
      CostRow& row = rows[key];
      row.key = key;
      row.total += rate * hours;
      if (by != "pool") {
        for (const auto& [billing, r] : u.usd_per_hour) {
          if (by != "class" || billing == key) row.by_class[billing] += r * hours;
        }
      }
      row.gpu_hours += weight * u.gpus * hours;
      row.energy_kwh += weight * u.energy_j * part / 3.6e6;
      row.co2e_kg += weight * u.co2e_g() * part / 1000.0;
      if (jobs[key].insert(u.uid.empty() ? Cat(u.ns, "/", u.job) : u.uid).second) ++row.jobs;
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
  auto class_usd = [](const CostRow& r, const std::string& c) {
    auto it = r.by_class.find(c);
    return it == r.by_class.end() ? 0.0 : it->second;
  };
  if (output == "json") {
    Json list = Json::array();
    for (const CostRow& r : rows) {
      list.push_back({{by, r.key},
                      {"totalUsd", r.total},
                      {"byClass", r.by_class},
                      {"jobs", r.jobs},
                      {"gpuHours", r.gpu_hours},
                      {"energyKwh", r.energy_kwh},
                      {"co2eKg", r.co2e_kg}});
    }
    return list.dump(2) + "\n";
  }
  if (output == "csv") {
    std::string out = Cat(by, ",jobs,total_usd,gpu_hours,energy_kwh,co2e_kg");
    for (const std::string& c : classes) out += Cat(",", c, "_usd");
    out += "\n";
    for (const CostRow& r : rows) {
      out += fmt::format("{},{},{:.4f},{:.4f},{:.4f},{:.4f}", r.key, r.jobs, r.total, r.gpu_hours,
                         r.energy_kwh, r.co2e_kg);
      for (const std::string& c : classes) out += fmt::format(",{:.4f}", class_usd(r, c));
      out += "\n";
    }
    return out;
  }
  std::string out = fmt::format("{:<32} {:>6} {:>12} {:>10} {:>10} {:>10}", Upper(by), "JOBS",
                                "TOTAL", "GPU-HOURS", "KWH", "KG-CO2E");
  for (const std::string& c : classes) out += fmt::format(" {:>12}", Upper(c));
  out += "\n";
  CostRow sum;
  for (const CostRow& r : rows) {
    out += fmt::format("{:<32} {:>6} {:>12} {:>10.2f} {:>10.2f} {:>10.2f}", r.key, r.jobs,
                       Dollars(r.total), r.gpu_hours, r.energy_kwh, r.co2e_kg);
    for (const std::string& c : classes) out += fmt::format(" {:>12}", Dollars(class_usd(r, c)));
    out += "\n";
    sum.total += r.total;
    sum.gpu_hours += r.gpu_hours;
    sum.energy_kwh += r.energy_kwh;
    sum.co2e_kg += r.co2e_kg;
  }
  out += fmt::format("{:<32} {:>6} {:>12} {:>10.2f} {:>10.2f} {:>10.2f}\n", "total", "",
                     Dollars(sum.total), sum.gpu_hours, sum.energy_kwh, sum.co2e_kg);
  return out;
}

absl::StatusOr<int64_t> ParseCostTime(const std::string& flag, const std::string& text,
                                      int64_t now_ms) {
  // "30d": absl parses hours and smaller; days are 24 h (UTC has no DST).
  if (text.size() > 1 && text.back() == 'd') {
    int64_t days = 0;
    if (absl::SimpleAtoi(text.substr(0, text.size() - 1), &days) && days >= 0 && days <= 100'000) {
      return std::max<int64_t>(0, now_ms - days * 86'400'000);
    }
  }
  absl::Duration d;
  if (absl::ParseDuration(text, &d) && d >= absl::ZeroDuration()) {
    return std::max<int64_t>(0, now_ms - absl::ToInt64Milliseconds(d));
  }
  absl::Time t;
  std::string ignored;
  if (absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &ignored) ||
      absl::ParseTime(absl::RFC3339_full, text, &t, &ignored)) {
    return absl::ToUnixMillis(t);
  }
  return absl::InvalidArgumentError(
      Cat(flag, ": \"", text,
          "\" is not a duration back from now (30d, 12h, 90m), a date (2026-12-01) or an RFC "
          "3339 time (2026-12-01T09:00:00Z)"));
}

absl::StatusOr<std::vector<api::AttemptUsage>> ReadUsage(const api::Client& client,
                                                         const std::string& ns, int64_t since_ms,
                                                         int64_t until_ms, int64_t now_ms,
                                                         std::ostream& err) {
  const std::string what = ns.empty() ? "jobs of every namespace (admins only; -n NS)" : "";
  // The jobs first: an attempt that ends between the two reads is then in both, and the live
  // copy is dropped; read the other way round it would be in neither.
  std::optional<api::HttpResponse> jobs =
      Send(client, "GET", ns.empty() ? api::AllJobsPath() : api::JobsPath(ns), "", err, what);
  if (!jobs) return absl::UnavailableError("");
  std::optional<api::HttpResponse> records =
      Send(client, "GET",
           Cat(ns.empty() ? api::ClusterScopedPath("usage") : api::NamespacedPath(ns, "usage"),
               "?since=", since_ms, "&until=", until_ms),
           "", err, what);
  if (!records) return absl::UnavailableError("");
  std::vector<api::AttemptUsage> usage;
  std::set<std::pair<std::string, int>> ended;
  Json list = Json::parse(records->body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    return absl::InvalidArgumentError("the server's usage list is not JSON with items");
  }
  for (const Json& j : list["items"]) {
    absl::StatusOr<api::AttemptUsage> u = api::UsageFromJson(j);
    if (!u.ok()) return u.status();
    ended.insert({u->uid, u->attempt});
    usage.push_back(*std::move(u));
  }
  Json job_list = Json::parse(jobs->body, nullptr, false);
  if (!job_list.is_object() || !job_list.contains("items") || !job_list["items"].is_array()) {
    return absl::InvalidArgumentError("the server's job list is not JSON with items");
  }
  for (const Json& job : job_list["items"]) {
    std::optional<api::AttemptUsage> live = api::AttemptUsageOf(job, now_ms);
    if (live && !ended.contains({live->uid, live->attempt})) usage.push_back(*std::move(live));
  }
  return usage;
}

int RunCost(const api::Client& client, const CostFlags& f, std::ostream& out, std::ostream& err) {
  if (f.output != "table" && f.output != "json" && f.output != "csv") {
    err << "gpuctl: -o: \"" << f.output << "\" is not table, json or csv\n";
    return kExitUsage;
  }
  const int64_t now = absl::ToUnixMillis(absl::Now());
  int64_t since = 0, until = now;
  if (!ParseWindow(f.since, f.until, now, /*empty_ok=*/true, &since, &until, err)) {
    return kExitUsage;
  }
  absl::StatusOr<std::vector<CostRow>> rows = CostRows({}, f.by, since, until);
  if (!rows.ok()) {  // --by is checked before anything is read
    err << "gpuctl: " << rows.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<api::AttemptUsage>> usage =
      ReadUsage(client, f.ns, since, until, now, err);
  if (!usage.ok()) {
    if (!usage.status().message().empty()) err << "gpuctl: " << usage.status().message() << "\n";
    return kExitInvalid;
  }
  out << FormatCost(*CostRows(*usage, f.by, since, until), f.by, f.output);
  return kExitOk;
}

std::vector<TcoUsage> TcoUsageOf(const std::vector<api::AttemptUsage>& usage,
                                 const std::string& default_type) {
  std::vector<TcoUsage> out;
  for (const api::AttemptUsage& u : usage) {
    std::map<std::string, double> by_type = u.gpus_by_type;
    if (by_type.empty()) by_type[default_type] = u.gpus;
    double gpus = 0;
    for (const auto& [type, n] : by_type) gpus += n;
    for (const auto& [type, n] : by_type) {
      out.push_back(
          {type, u.start_ms, u.end_ms, n, u.spot_tolerant, gpus > 0 ? u.energy_j * n / gpus : 0.0});
    }
  }
  return out;
}

int RunCostTco(const api::Client& client, const TcoFlags& f, std::ostream& out, std::ostream& err) {
  if (f.output != "table" && f.output != "json") {
    err << "gpuctl: -o: \"" << f.output << "\" is not table or json\n";
    return kExitUsage;
  }
  const int64_t now = absl::ToUnixMillis(absl::Now());
  TcoOptions o = f.options;
  o.since_ms = 0;
  o.until_ms = now;
  if (!ParseWindow(f.since, f.until, now, /*empty_ok=*/false, &o.since_ms, &o.until_ms, err)) {
    return kExitUsage;
  }
  absl::StatusOr<std::vector<api::AttemptUsage>> usage =
      ReadUsage(client, f.ns, o.since_ms, o.until_ms, now, err);
  if (!usage.ok()) {
    if (!usage.status().message().empty()) err << "gpuctl: " << usage.status().message() << "\n";
    return kExitInvalid;
  }
  TcoReport r = ComputeTco(TcoUsageOf(*usage, "unknown"), o);
  if (f.output == "json") {
    Json j = {{"gpuHours", r.gpu_hours},
              {"hours", r.hours},
              {"peakGpus", r.peak_gpus},
              {"cheapest", r.scenarios[r.cheapest].name},
              {"scenarios", Json::array()}};
    for (const TcoScenario& s : r.scenarios) {
      j["scenarios"].push_back({{"name", s.name}, {"usd", s.usd}, {"how", s.how}});
    }
    out << j.dump(2) << "\n";
  } else {
    out << FormatTco(r);
  }
  return kExitOk;
}

namespace {

// "5000.00 USD a month; alerts at 50%, 80%, 100%; over budget: new jobs wait" for a
// spec.budget object.
std::string BudgetLine(const Json& b) {
  std::string amount = b.contains("monthlyUsd") ? b["monthlyUsd"].dump() : "?";
  if (amount.size() > 1 && amount.front() == '"') amount = amount.substr(1, amount.size() - 2);
  std::vector<std::string> alerts;
  for (const Json& p : b.value("alertAt", Json::array({50, 80, 100}))) {
    alerts.push_back(Cat(p.dump(), "%"));
  }
  return Cat(amount, " ", b.value("currency", "USD"), " a month; alerts at ", Join(alerts, ", "),
             "; over budget: ",
             b.value("onExceeded", "wait") == "stop" ? "running jobs stop too" : "new jobs wait");
}

}  // namespace

namespace {

// What `gpuctl budget NS` shows: the budget and this month's alerts.
void ShowBudget(const std::string& ns, const Json& doc, std::ostream& out) {
  const Json spec = doc.value("spec", Json::object());
  if (!spec.contains("budget")) {
    out << "namespace " << ns << " has no budget\n";
    return;
  }
  out << "namespace " << ns << ": " << BudgetLine(spec["budget"]) << "\n";
  const Json state = doc.value("status", Json::object()).value("budget", Json::object());
  if (state.contains("month")) {
    out << "alerted in " << state.value("month", "") << ": "
        << state.value("alertedPercent", Json::array()).dump() << " (spent "
        << fmt::format("{:.2f}", state.value("spent", 0.0)) << " at the last)\n";
  }
}

// spec.budget from the flags; an error for the usage ("" when none).
std::string BudgetOfFlags(const BudgetFlags& f, Json* out) {
  if (f.monthly_usd.empty()) return "--monthly-usd is required to set a budget";
  Json b = {{"monthlyUsd", f.monthly_usd}};
  if (!f.currency.empty()) b["currency"] = f.currency;
  if (!f.on_exceeded.empty()) b["onExceeded"] = f.on_exceeded;
  if (!f.alert_at.empty()) {
    b["alertAt"] = Json::array();
    for (const std::string& p : SplitAny(f.alert_at, ",")) {
      int64_t percent = 0;
      if (!absl::SimpleAtoi(p, &percent)) {
        return Cat("--alert-at: \"", p, "\" is not a whole percentage");
      }
      b["alertAt"].push_back(percent);
    }
  }
  *out = std::move(b);
  return "";
}

}  // namespace

int RunBudget(const api::Client& client, const BudgetFlags& f, std::ostream& out,
              std::ostream& err) {
  if (!NamesAreLabels({{"NAMESPACE", f.ns}}, err)) return kExitUsage;
  const bool set = !f.monthly_usd.empty() || !f.alert_at.empty() || !f.on_exceeded.empty() ||
                   !f.currency.empty();
  if (f.clear && set) {
    err << "gpuctl budget: --clear takes no other flag\n";
    return kExitUsage;
  }
  Json budget;
  if (set) {
    if (std::string e = BudgetOfFlags(f, &budget); !e.empty()) {
      err << "gpuctl budget: " << e << "\n";
      return kExitUsage;
    }
  }
  const std::string path = api::ClusterScopedPath(Cat("namespaces/", f.ns));
  std::optional<api::HttpResponse> got = Send(client, "GET", path, "", err);
  if (!got) return kExitInvalid;
  Json doc = Json::parse(got->body, nullptr, false);
  if (!doc.is_object()) {
    err << "gpuctl: the server's namespace is not JSON\n";
    return kExitInvalid;
  }
  if (!set && !f.clear) {
    ShowBudget(f.ns, doc, out);
    return kExitOk;
  }
  if (!doc.contains("spec") || !doc["spec"].is_object()) doc["spec"] = Json::object();
  if (f.clear) {
    doc["spec"].erase("budget");
  } else {
    doc["spec"]["budget"] = budget;
  }
  doc.erase("status");
  // Sent with the resourceVersion read: a concurrent change is refused (409), not overwritten.
  if (!Send(client, "PUT", path, doc.dump(), err)) return kExitInvalid;
  out << "namespace " << f.ns << ": "
      << (f.clear ? std::string("budget cleared") : BudgetLine(budget)) << "\n";
  return kExitOk;
}

}  // namespace gpucloud::cli
