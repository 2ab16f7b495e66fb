#include "server/budgets.h"

#include <fmt/format.h>

#include <algorithm>

#include "absl/time/time.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr double kMaxBudget = 1e12;

std::string ReadAmount(const Json& v, const std::string& field, double* out) {
  double amount = -1;
  if (v.is_number()) amount = v.get<double>();
  if (v.is_string()) {
    try {
      size_t used = 0;
      amount = std::stod(v.get<std::string>(), &used);
      if (used != v.get<std::string>().size()) amount = -1;
    } catch (const std::exception&) {
      amount = -1;
    }
  }
  if (!(amount >= 0 && amount <= kMaxBudget)) {
    return Cat(field, ": must be an amount of money from 0 to 1e12, such as 5000 or \"5000.00\"");
  }
  *out = amount;
  return "";
}

std::string ReadAlerts(const Json& v, std::vector<int>* out) {
  const std::string field = "spec.budget.alertAt";
  if (!v.is_array()) return Cat(field, ": must be a list of percentages, such as [50, 80, 100]");
  std::vector<int> alerts;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& p = v[i];
    if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 1000) {
      return Cat(field, "[", i, "]: must be a whole percentage from 1 to 1000");
    }
    const int percent = static_cast<int>(p.get<int64_t>());
    if (!alerts.empty() && percent <= alerts.back()) {
      return Cat(field, "[", i, "]: ", percent, " is not above the one before (", alerts.back(),
                 "): list them in ascending order");
    }
    alerts.push_back(percent);
  }
  *out = std::move(alerts);
  return "";
}

std::vector<int> AlertedOf(const Json& doc, const std::string& month) {
  std::vector<int> alerted;
  auto st = doc.find("status");
  if (st == doc.end() || !st->is_object()) return alerted;
  auto b = st->find("budget");
  if (b == st->end() || !b->is_object() || b->value("month", "") != month) return alerted;
  auto a = b->find("alertedPercent");
  if (a == b->end() || !a->is_array()) return alerted;
  for (const Json& p : *a) {
    if (p.is_number_integer()) alerted.push_back(static_cast<int>(p.get<int64_t>()));
  }
  return alerted;
}

}  // namespace

std::string ParseBudget(const Json& budget, std::string_view currency, Budget* out) {
  if (!budget.is_object()) return "spec.budget: must be an object";
  Budget b;
  b.currency = std::string(currency);
  bool amount = false;
  for (const auto& [key, v] : budget.items()) {
    const std::string field = Cat("spec.budget.", key);
    if (key == "monthlyUsd" || key == "monthly") {
      if (std::string e = ReadAmount(v, field, &b.monthly); !e.empty()) return e;
      amount = true;
    } else if (key == "currency") {
      if (!v.is_string() || v.get<std::string>() != currency) {
        return Cat(field, ": ", v.is_string() ? Cat("\"", v.get<std::string>(), "\"") : v.dump(),
                   " is not this server's currency (", currency,
                   "; set with gpucloud server --currency)");
      }
    } else if (key == "alertAt") {
      if (std::string e = ReadAlerts(v, &b.alert_percent); !e.empty()) return e;
    } else if (key == "onExceeded") {
      if (!v.is_string() || (v.get<std::string>() != "wait" && v.get<std::string>() != "stop")) {
        return Cat(field,
                   ": must be wait (new jobs wait; running ones go on) or stop (running "
                   "jobs are stopped and requeued too)");
      }
      b.stop = v.get<std::string>() == "stop";
    } else {
      return Cat(field, ": unknown field (monthlyUsd, currency, alertAt, onExceeded)");
    }
  }
  if (!amount) return "spec.budget.monthlyUsd: is required";
  *out = std::move(b);
  return "";
}

Month MonthOf(int64_t now_ms) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilSecond cs = utc.At(absl::FromUnixMillis(now_ms)).cs;
  const absl::CivilMonth m(cs);
  return {fmt::format("{:04d}-{:02d}", m.year(), m.month()),
          absl::ToUnixMillis(utc.At(absl::CivilSecond(m)).pre),
          absl::ToUnixMillis(utc.At(absl::CivilSecond(m + 1)).pre)};
}

BudgetVerdict JudgeBudget(const Budget& b, double spent, const std::vector<int>& alerted) {
  BudgetVerdict v;
  v.spent = spent;
  v.over = spent >= b.monthly;
  if (b.monthly <= 0) return v;  // a frozen namespace: over from the start, nothing to alert
  for (int percent : b.alert_percent) {
    if (spent >= b.monthly * percent / 100.0 &&
        std::find(alerted.begin(), alerted.end(), percent) == alerted.end()) {
      v.new_alerts.push_back(percent);
    }
  }
  return v;
}

double LiveCostIn(const JobStatus& s, int64_t since_ms, int64_t until_ms) {
  if (s.scheduled_ms <= 0 || s.usd_per_hour.empty()) return 0;
  const int64_t from = std::max(s.BilledFrom(), since_ms);
  if (until_ms <= from) return 0;
  double rate = 0;
  for (const auto& [billing, r] : s.usd_per_hour) rate += r;
  return rate * static_cast<double>(until_ms - from) / 3.6e6;
}

std::string OverBudgetMessage(const std::string& ns, const Budget& b) {
  return fmt::format("namespace {} has spent its budget of {:.2f} {} for this month{}", ns,
                     b.monthly, b.currency,
                     b.stop ? " (onExceeded: stop)"
                            : "; jobs wait until the budget is raised or "
                              "the month ends");
}

absl::Status BudgetBook::Sync(store::Store& store, int64_t now_ms) {
  absl::StatusOr<bool> changed = namespaces_.Sync(store);
  if (!changed.ok()) return changed.status();
  const Month month = MonthOf(now_ms);
  const bool new_month = month.name != month_.name;
  if (new_month) month_ = month;
  if (*changed || new_month) Rebuild();
  if (!new_month) return absl::OkStatus();
  ended_.clear();
  absl::StatusOr<store::ListResult> list = store.List("/usage/");
  if (!list.ok()) {
    month_ = {};  // listed again next pass
    return list.status();
  }
  for (const store::KeyValue& kv : list->items) {
    absl::StatusOr<api::AttemptUsage> u =
        api::UsageFromJson(nlohmann::json::parse(kv.value, nullptr, false));
    if (u.ok()) Recorded(*u);
  }
  return absl::OkStatus();
}

void BudgetBook::Rebuild() {
  budgets_.clear();
  for (const auto& [key, obj] : namespaces_.objects()) {
    auto spec = obj.doc.find("spec");
    if (spec == obj.doc.end() || !spec->is_object() || !spec->contains("budget")) continue;
    Entry e;
    if (!ParseBudget((*spec)["budget"], currency_, &e.budget).empty()) continue;
    const std::string ns = key.substr(std::string_view("/namespaces/").size());
    if (obj.doc.contains("metadata") && obj.doc["metadata"].is_object()) {
      e.uid = obj.doc["metadata"].value("uid", "");
    }
    e.alerted = AlertedOf(obj.doc, month_.name);
    e.mod_revision = obj.mod_revision;
    e.doc = obj.doc;
    budgets_.emplace(ns, std::move(e));
  }
}

void BudgetBook::Recorded(const api::AttemptUsage& u) {
  double rate = 0;
  for (const auto& [billing, r] : u.usd_per_hour) rate += r;
  const double cost = rate * u.HoursIn(month_.start_ms, month_.end_ms);
  if (cost > 0) ended_[u.ns] += cost;
}

double BudgetBook::EndedSpend(const std::string& ns) const {
  auto it = ended_.find(ns);
  return it == ended_.end() ? 0.0 : it->second;
}

store::Op BudgetBook::AlertStateOp(const std::string& ns, const std::vector<int>& alerted,
                                   double spent) const {
  const Entry& e = budgets_.at(ns);
  Json doc = e.doc;
  if (!doc.contains("status") || !doc["status"].is_object()) doc["status"] = Json::object();
  doc["status"]["budget"] = {{"month", month_.name}, {"alertedPercent", alerted}, {"spent", spent}};
  doc["metadata"].erase("resourceVersion");
  return {store::Op::Kind::kPut, Cat("/namespaces/", ns), doc.dump(), e.mod_revision};
}

}  // namespace gpucloud::server
