// gpuctl and job arrays: `run --array` parsed and sent as one request, the elements listed by
// label, and `cancel`/`delete` of the array's name taking every element, against a real server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/gpuctl.h"
#include "cli/gpuctl_fixture.h"

namespace gpucloud::cli {
namespace {

class GpuctlArrayTest : public GpuctlServerFixture {
 protected:
  GpuctlArrayTest() : GpuctlServerFixture("gpuctl-array", 1'700'000'000'000) {}
  int64_t Jobs() { return *store_->Count("/jobs/default/"); }
};

TEST_F(GpuctlArrayTest, RunArrayParsesSlurmsIndices) {
  Ran r = Gpuctl({"run", "--name", "sweep", "--gpus", "0", "--array", "0-999%50", "--dry-run", "--",
                  "python", "train.py"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  array:\n    count: 1000\n    parallelism: 50\n"), std::string::npos)
      << r.out;
  r = Gpuctl({"run", "--name", "sweep", "--array", "1,3,5-7", "--dry-run", "--", "x"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  array:\n    indices: 1,3,5-7\n"), std::string::npos) << r.out;
  for (const char* bad : {"9-3", "1,,2", "0-9%0", "x"}) {
    r = Gpuctl({"run", "--array", bad, "--", "x"});
    EXPECT_EQ(r.code, kExitUsage) << bad;
    EXPECT_TRUE(r.err.starts_with(std::string("gpuctl run: --array: array \"") + bad + "\""))
        << r.err;
  }
  EXPECT_EQ(Jobs(), 0);
}

TEST_F(GpuctlArrayTest, RunCreatesTheArrayCancelAndDeleteTakeItWhole) {
  Ran r = Gpuctl(
      {"run", "--name", "sweep", "--gpus", "0", "--array", "0-3%2", "--", "python", "train.py"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("job array default/sweep created: ")) << r.out;
  EXPECT_EQ(Jobs(), 4);
  Ran listed = Gpuctl({"get", "jobs", "-l", "gpucloud.io/array=sweep", "-o", "name"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_EQ(listed.out, "job/sweep-0\njob/sweep-1\njob/sweep-2\njob/sweep-3\n");
  // The same name again: nothing is written.
  EXPECT_EQ(Gpuctl({"run", "--name", "sweep", "--gpus", "0", "--array", "2-5", "--", "x"}).code,
            kExitInvalid);
  EXPECT_EQ(Jobs(), 4);
  // apply of an array: created, then unchanged while its jobs are as asked.
  const std::string file = (dir_ / "sweep.yaml").string();
  std::ofstream(file) << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: grid}\nspec:\n"
                         "  tasks: [{name: main, command: [x]}]\n  array: {count: 3}\n";
  EXPECT_EQ(Gpuctl({"apply", "-f", file}).out, "job.gpucloud/grid created\n");
  EXPECT_EQ(Gpuctl({"apply", "-f", file}).out, "job.gpucloud/grid unchanged\n");
  EXPECT_EQ(Jobs(), 7);
  EXPECT_EQ(Gpuctl({"delete", "job", "grid"}).code, 0);
  EXPECT_EQ(Jobs(), 4);
  Ran c = Gpuctl({"cancel", "sweep"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "job array default/sweep: 4 of 4 jobs being stopped\n");
  Ran d = Gpuctl({"delete", "job", "sweep"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(Jobs(), 0);
}

}  // namespace
}  // namespace gpucloud::cli
