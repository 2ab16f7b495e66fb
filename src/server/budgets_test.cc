// Namespace budgets: the pure rules (parsing, months, thresholds) with hand-checked answers, and
// through the controller: an over-budget namespace's new job waits with the reason, each alert
// fires once per threshold, a raised budget lets it start, and `stop` requeues running jobs.
#include "server/budgets.h"

#include <gtest/gtest.h>

#include "server/controller_fixture.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

Budget Parsed(const std::string& json, std::string* error = nullptr) {
  Budget b;
  std::string e = ParseBudget(Json::parse(json), "USD", &b);
  if (error != nullptr) *error = e;
  return b;
}

TEST(BudgetRules, ParsesABudgetAndNamesTheFieldOfABadOne) {
  EXPECT_EQ(Parsed(R"({"monthlyUsd": 5000})"), (Budget{.monthly = 5000}));
  EXPECT_EQ(Parsed(R"({"monthlyUsd": "120.50", "currency": "USD", "alertAt": [25, 90],
                       "onExceeded": "stop"})"),
            (Budget{.monthly = 120.5, .alert_percent = {25, 90}, .stop = true}));
  std::string e;
  Parsed(R"({"monthlyUsd": 10, "currency": "EUR"})", &e);
  EXPECT_EQ(e,
            "spec.budget.currency: \"EUR\" is not this server's currency (USD; set with "
            "gpucloud server --currency)");
  Parsed(R"({"monthlyUsd": 10, "alertAt": [80, 50]})", &e);
  EXPECT_EQ(e,
            "spec.budget.alertAt[1]: 50 is not above the one before (80): list them in ascending "
            "order");
  Parsed(R"({"monthlyUsd": -1})", &e);
  EXPECT_NE(e.find("spec.budget.monthlyUsd: must be an amount"), std::string::npos) << e;
  Parsed(R"({"monthlyUsd": 1, "onExceeded": "kill"})", &e);
  EXPECT_NE(e.find("spec.budget.onExceeded: must be wait"), std::string::npos) << e;
  Parsed(R"({"alertAt": [50]})", &e);
  EXPECT_EQ(e, "spec.budget.monthlyUsd: is required");
  Parsed(R"({"monthlyUsd": 1, "limit": 2})", &e);
  EXPECT_NE(e.find("spec.budget.limit: unknown field"), std::string::npos) << e;
}

TEST(BudgetRules, AMonthIsAUtcCalendarMonth) {
  // 2026-12-07T01:00:00Z; December has 31 days.
  Month m = MonthOf(1'796'605'200'000);
  EXPECT_EQ(m.name, "2026-12");
  EXPECT_EQ(m.start_ms, 1'796'083'200'000);                    // 2026-12-01T00:00:00Z
  EXPECT_EQ(m.end_ms, 1'796'083'200'000 + 31 * 86'400'000LL);  // 2027-01-01T00:00:00Z
  EXPECT_EQ(MonthOf(m.end_ms).name, "2027-01");
  EXPECT_EQ(MonthOf(m.end_ms - 1).name, "2026-12");
}

TEST(BudgetRules, EachThresholdAlertsOnceAndTheBudgetIsSpentAtItsAmount) {
  Budget b{.monthly = 100, .alert_percent = {50, 80, 100}};
  EXPECT_EQ(JudgeBudget(b, 49.99, {}), (BudgetVerdict{.spent = 49.99}));
  EXPECT_EQ(JudgeBudget(b, 85, {}), (BudgetVerdict{.spent = 85, .new_alerts = {50, 80}}));
  EXPECT_EQ(JudgeBudget(b, 85, {50, 80}), (BudgetVerdict{.spent = 85}));
  EXPECT_EQ(JudgeBudget(b, 100, {50, 80}),
            (BudgetVerdict{.spent = 100, .over = true, .new_alerts = {100}}));
  // A budget of 0 freezes the namespace without alerting.
  EXPECT_EQ(JudgeBudget(Budget{.monthly = 0}, 0, {}), (BudgetVerdict{.spent = 0, .over = true}));
}

TEST(BudgetRules, ARunningAttemptCostsItsRateInsideTheWindow) {
  JobStatus s;
  s.scheduled_ms = 3'600'000;
  s.usd_per_hour = {{"on-demand", 3}, {"spot", 1}};
  EXPECT_DOUBLE_EQ(LiveCostIn(s, 0, 3 * 3'600'000), 8.0);  // $4/h for its 2 hours
  EXPECT_DOUBLE_EQ(LiveCostIn(s, 2 * 3'600'000, 3 * 3'600'000), 4.0);
  EXPECT_DOUBLE_EQ(LiveCostIn(s, 0, 1'000), 0.0);  // not bound yet then
}

class BudgetTest : public ControllerTest {
 protected:
  // Namespace default with `budget`; a $2/GPU-hour pool with one 4-GPU node.
  void SetUpBudget(const std::string& budget) {
    ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodepools",
                   "apiVersion: gpucloud/v1\nkind: NodePool\nmetadata: {name: p}\n"
                   "spec: {gpuType: H100-80GB, gpusPerNode: 4, pricePerGpuHour: \"2.00\"}\n")
                  .status,
              201);
    SetBudget(budget);
    Register("node-a", 4, "p");
    Heartbeat("node-a");
  }
  void SetBudget(const std::string& budget) {
    Response r = Call("PUT", "/apis/gpucloud/v1/namespaces/default",
                      Cat("apiVersion: gpucloud/v1\nkind: Namespace\nmetadata: {name: default}\n"
                          "spec:\n  budget: ",
                          budget, "\n"));
    ASSERT_LT(r.status, 300) << r.body;
  }
  void Run(const std::string& job) {
    Heartbeat("node-a", {Report(job, 0, api::TaskState::kRunning)});
    Pass();
  }
  std::string Metrics() { return RenderClusterMetrics(controller_->Metrics()); }
  std::vector<std::string> NamespaceEvents() {
    Response r = Call("GET", "/apis/gpucloud/v1/namespaces/default/events");
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> out;
    const Json list = Json::parse(r.body);
    for (const Json& e : list["items"]) out.push_back(e["message"]);
    return out;
  }
};

TEST_F(BudgetTest, AJobOverBudgetWaitsAndEachAlertFiresOnce) {
  SetUpBudget("{monthlyUsd: 3, alertAt: [50, 100]}");
  Submit(GangJob("first", 1, 2));  // $4/hour
  Pass();
  ASSERT_EQ(Status("first").phase, api::JobPhase::kScheduled);
  Run("first");
  clock_.Advance(30 * 60'000);  // $2 spent: 67%
  Run("first");
  EXPECT_EQ(NamespaceEvents(),
            std::vector<std::string>{
                "namespace default has spent 2.00 USD this month: 50% of its budget of 3.00"});
  clock_.Advance(5 * 60'000);
  Run("first");  // no new threshold: nothing more
  EXPECT_EQ(NamespaceEvents().size(), 1u);
  clock_.Advance(10 * 60'000);  // $3: the budget is spent
  Run("first");
  EXPECT_EQ(NamespaceEvents().size(), 2u);
  EXPECT_NE(Metrics().find("gpucloud_budget_alerts_total{namespace=\"default\",percent=\"100\"} 1"),
            std::string::npos)
      << Metrics();
  // A new job waits, with the reason; the running one goes on (onExceeded: wait).
  Submit(GangJob("second", 1, 1));
  Run("first");
  JobStatus second = Status("second");
  EXPECT_EQ(second.phase, api::JobPhase::kPending);
  EXPECT_EQ(second.reason, "OverBudget");
  EXPECT_NE(second.message.find("has spent its budget of 3.00 USD"), std::string::npos);
  EXPECT_EQ(Status("first").phase, api::JobPhase::kRunning);
  for (int i = 0; i < 3; ++i) Run("first");  // still once per threshold
  EXPECT_EQ(NamespaceEvents().size(), 2u);
  EXPECT_NE(Metrics().find("gpucloud_budget_alerts_total{namespace=\"default\",percent=\"50\"} 1"),
            std::string::npos);
  EXPECT_NE(Metrics().find("gpucloud_budget_usd{namespace=\"default\"} 3"), std::string::npos);
  // Raised: it starts, and this month's alerts are not raised again.
  SetBudget("{monthlyUsd: 100, alertAt: [50, 100]}");
  Run("first");
  EXPECT_EQ(Status("second").phase, api::JobPhase::kScheduled) << Status("second").message;
  EXPECT_EQ(NamespaceEvents().size(), 2u);
}

TEST_F(BudgetTest, AStopBudgetRequeuesTheRunningJobs) {
  SetUpBudget("{monthlyUsd: 1, alertAt: [100], onExceeded: stop}");
  Submit(GangJob("train", 1, 2));
  Pass();
  Run("train");
  clock_.Advance(15 * 60'000);  // $1: spent
  Run("train");
  JobStatus s = Status("train");
  EXPECT_EQ(s.phase, api::JobPhase::kPreempting) << s.message;
  EXPECT_NE(s.message.find("the namespace's budget"), std::string::npos) << s.message;
}

// What ended attempts spent counts from their usage records, also for a controller that starts
// after they ended (a restarted or newly elected server).
TEST_F(BudgetTest, EndedAttemptsCountFromTheirUsageRecords) {
  SetUpBudget("{monthlyUsd: 2, alertAt: [100]}");
  Submit(GangJob("first", 1, 2));  // $4/hour
  Pass();
  Run("first");
  clock_.Advance(30 * 60'000);
  Heartbeat("node-a", {Report("first", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  ASSERT_EQ(Status("first").phase, api::JobPhase::kSucceeded);
  Submit(GangJob("second", 1, 1));
  Pass();
  EXPECT_EQ(Status("second").reason, "OverBudget");
  ASSERT_EQ(Call("DELETE", "/apis/gpucloud/v1/namespaces/default/jobs/first").status, 200);
  ControllerOptions o;
  o.checkpoint_root = "/ckpt";
  controller_ = std::make_unique<Controller>(*store_, nodes_, clock_, GpuCatalog::Default(), o);
  Pass();
  Pass();
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/first").status()));
  EXPECT_EQ(Status("second").phase, api::JobPhase::kPending);
  EXPECT_EQ(Status("second").reason, "OverBudget");
  EXPECT_NE(Metrics().find("gpucloud_budget_spent_usd{namespace=\"default\"} 2\n"),
            std::string::npos)
      << Metrics();
}

// A running job deleted in a pass counts once: its record, not also as still running.
TEST_F(BudgetTest, ADeletedRunningJobIsCountedOnce) {
  SetUpBudget("{monthlyUsd: 3, alertAt: [100]}");
  Submit(GangJob("first", 1, 2));  // $4/hour
  Pass();
  Run("first");
  clock_.Advance(30 * 60'000);  // $2
  ASSERT_EQ(Call("DELETE", "/apis/gpucloud/v1/namespaces/default/jobs/first").status, 202);
  for (int i = 0; i < 4 && store_->Get("/jobs/default/first").ok(); ++i) {
    Heartbeat("node-a", {Report("first", 0, api::TaskState::kStopped)});
    Pass();
  }
  ASSERT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/first").status()));
  Pass();
  EXPECT_TRUE(NamespaceEvents().empty());
  EXPECT_NE(Metrics().find("gpucloud_budget_spent_usd{namespace=\"default\"} 2\n"),
            std::string::npos)
      << Metrics();
}

TEST_F(BudgetTest, ABudgetInAnotherCurrencyIsRefusedAndChangesNothing) {
  Response r = Call("PUT", "/apis/gpucloud/v1/namespaces/default",
                    "apiVersion: gpucloud/v1\nkind: Namespace\nmetadata: {name: default}\n"
                    "spec: {budget: {monthlyUsd: 10, currency: EUR}}\n");
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("spec.budget.currency: \\\"EUR\\\" is not this server's currency"),
            std::string::npos)
      << r.body;
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/namespaces/default").status()));
}

}  // namespace
}  // namespace gpucloud::server
