// gpuctl run --what-if against a real in-process server whose scheduler answer is stubbed (the
// controller's own answers are tested in server/controller_test.cc): each outcome in a line,
// nothing submitted, and a server without a scheduler refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/gpuctl_fixture.h"
#include "core/job.h"

namespace gpucloud::cli {
namespace {

class GpuctlWhatIfTest : public GpuctlServerFixture {
 protected:
  GpuctlWhatIfTest() : GpuctlServerFixture("gpuctl-whatif", 1'700'000'000'000) {}
  void Attach(server::RestApi& api) override {
    api.SetWhatIf([this](const std::string& ns, const Job& job) -> absl::StatusOr<nlohmann::json> {
      asked_ = ns + "/" + job.metadata.name;
      if (answer_.is_null()) return absl::UnavailableError("this server does not lead");
      return answer_;
    });
  }
  nlohmann::json answer_;
  std::string asked_;
};

TEST_F(GpuctlWhatIfTest, EachOutcomeInALineAndNothingSubmitted) {
  answer_ = {{"outcome", "Bind"}, {"nodes", {"node-a", "node-b"}}, {"reason", ""}};
  Ran r = Gpuctl({"run", "--what-if", "--name", "probe", "--replicas", "2", "--gpus", "8", "--",
                  "python", "train.py"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "would start now, on node-a, node-b\n");
  EXPECT_EQ(asked_, "default/probe");
  answer_ = {{"outcome", "Wait"}, {"reason", "queue team-a is at its max of 16 GPUs"}};
  r = Gpuctl({"run", "--what-if", "--name", "probe", "--", "x"});
  EXPECT_EQ(r.out, "would wait: queue team-a is at its max of 16 GPUs\n");
  answer_ = {{"outcome", "Reject"}, {"reason", "no node has 64 GPUs"}};
  r = Gpuctl({"run", "--what-if", "--gpus", "64", "--", "x"});
  EXPECT_EQ(r.out, "would never start on this cluster: no node has 64 GPUs\n");
  EXPECT_EQ(Gpuctl({"get", "jobs", "probe"}).code, 1);  // never created
  answer_ = nullptr;
  r = Gpuctl({"run", "--what-if", "--", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("does not lead"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpucloud::cli
