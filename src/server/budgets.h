// Namespace budgets (issue 19): a monthly amount of money a namespace's jobs may cost (Namespace
// spec.budget), alerts when its spend passes thresholds, and enforcement: over budget, its new
// jobs wait (reason OverBudget) and, when the budget says `stop`, its running jobs are stopped
// and requeued. A month is a calendar month in UTC; its spend is what the namespace's attempts
// cost inside it: the ended ones from their usage records (api/usage.h), the running ones up to
// now at their bound price.
//
// The decisions are pure functions (ParseBudget, JudgeBudget); BudgetBook keeps the namespaces
// and the month's ledger of ended attempts, and is the controller's: it is used on the
// controller's thread only (not thread-safe).
#ifndef GPUCLOUD_SERVER_BUDGETS_H_
#define GPUCLOUD_SERVER_BUDGETS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/usage.h"
#include "server/job_status.h"
#include "server/object_cache.h"
#include "store/store.h"

namespace gpucloud::server {

inline constexpr std::string_view kDefaultCurrency = "USD";

struct Budget {
  double monthly = 0;  // in the server's currency
  std::string currency = std::string(kDefaultCurrency);
  std::vector<int> alert_percent = {50, 80, 100};  // ascending
  bool stop = false;                               // onExceeded: stop (else wait)
  bool operator==(const Budget&) const = default;
};

// Reads a Namespace's spec.budget: {monthlyUsd (or monthly), currency, alertAt: [percent...],
// onExceeded: wait|stop}. `currency` is the server's: another is refused. An error message
// naming the field ("spec.budget.alertAt[1]: ..."), or "" with *out set.
std::string ParseBudget(const nlohmann::ordered_json& budget, std::string_view currency,
                        Budget* out);

// The UTC calendar month of `now_ms`: "2026-12", and its bounds in unix ms.
struct Month {
  std::string name;
  int64_t start_ms = 0, end_ms = 0;
};
Month MonthOf(int64_t now_ms);

// What a namespace's budget says this pass. `alerted`: the thresholds already alerted this
// month (the Namespace's status.budget); `new_alerts`: those the spend has passed since.
struct BudgetVerdict {
  double spent = 0;
  bool over = false;  // spent >= the budget
  std::vector<int> new_alerts;
  bool operator==(const BudgetVerdict&) const = default;
};
// A budget of 0 freezes the namespace: over from the start, and no alerts.
BudgetVerdict JudgeBudget(const Budget& b, double spent, const std::vector<int>& alerted);

// What `s`'s current attempt has cost inside [since_ms, until_ms) (0 when it holds nothing).
double LiveCostIn(const JobStatus& s, int64_t since_ms, int64_t until_ms);

// What a waiting job of an over-budget namespace is told.
std::string OverBudgetMessage(const std::string& ns, const Budget& b);

class BudgetBook {
 public:
  explicit BudgetBook(std::string currency) : currency_(std::move(currency)) {}
  // Brings the namespaces up to date and, when the month at `now_ms` is not the ledger's (or on
  // the first call), lists the usage records again for it. Errors are the store's.
  absl::Status Sync(store::Store& store, int64_t now_ms);
  // An attempt the controller metered after Sync (its record was written).
  void Recorded(const api::AttemptUsage& u);

  struct Entry {
    Budget budget;
    std::string uid;           // the Namespace's
    std::vector<int> alerted;  // this month's alerts so far (its status.budget)
    int64_t mod_revision = 0;  // of the Namespace object
    nlohmann::ordered_json doc;
  };
  // The namespaces with a budget (one that does not parse is skipped: the API refuses it).
  const std::map<std::string, Entry>& budgets() const { return budgets_; }
  // What the namespace's ended attempts cost this month.
  double EndedSpend(const std::string& ns) const;
  const Month& month() const { return month_; }
  const std::string& currency() const { return currency_; }

  // The write of a Namespace's new alert state: its status.budget {month, alerted, spent}, with
  // the document's mod_revision expected.
  store::Op AlertStateOp(const std::string& ns, const std::vector<int>& alerted,
                         double spent) const;

 private:
  void Rebuild();
  std::string currency_;
  ObjectCache namespaces_{"/namespaces/"};
  std::map<std::string, Entry> budgets_;
  Month month_;
  std::map<std::string, double> ended_;  // namespace -> this month's ended attempts' cost
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_BUDGETS_H_
