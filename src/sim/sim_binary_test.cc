// The real `gpucloud sim` binary, run as a user runs it (CTest label `integration`): the
// reports it writes, byte-identical reruns, and clear errors with exit code 1 (2 for usage).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace {

using gpucloud::testing_util::Shell;

const std::string kGpucloud = GPUCLOUD_BINARY;
const std::string kSrc = GPUCLOUD_SOURCE_DIR;

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SimBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = (dir_ / "trace.csv").string();
    std::ofstream(trace_) << "id,submit,duration,gpus,queue\n"
                             "a,0,100,2,x\nb,10,50,2,y\nc,20,10,2,x\nbad,30,ten,1,x\n";
  }
  gpucloud::testing_util::TempDir tmp_{"gpucloud-sim-test"};
  const std::filesystem::path& dir_ = tmp_.path();
  std::string trace_;
};

TEST_F(SimBinary, ComparesPoliciesAndWritesReports) {
  std::string cmd = kGpucloud + " sim --trace " + trace_ + " --cluster " + kSrc +
                    "/examples/sim/cluster-16gpu.yaml --compare fifo sjf " + kSrc +
                    "/examples/scheduler/fgd.yaml --out ";
  auto r = Shell(cmd + (dir_ / "one").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 1 of 4 rows (first: line 5: duration \"ten\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("fgd "), std::string::npos) << r.output;
  for (const char* f : {"report.json", "report.html", "jobs.csv"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "one" / f)) << f;
  }
  ASSERT_EQ(Shell(cmd + (dir_ / "two").string()).code, 0);
  EXPECT_EQ(Slurp(dir_ / "one" / "report.json"), Slurp(dir_ / "two" / "report.json"));
  EXPECT_EQ(Slurp(dir_ / "one" / "report.html"), Slurp(dir_ / "two" / "report.html"));
}

TEST_F(SimBinary, PredictFailuresBothRunsObserveAndActAndTabulatesThem) {
  auto r =
      Shell(kGpucloud + " sim --trace " + trace_ + " --cluster tiresias --mtbf-hours 1 --seed 4 " +
            "--predict-failures both --out " + (dir_ / "p").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("default+observe"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("default+predictive-drain"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("precision"), std::string::npos) << r.output;
  EXPECT_NE(Slurp(dir_ / "p" / "report.json").find("\"failure_prediction\""), std::string::npos);
}

TEST_F(SimBinary, BadInputExitsOneAndSaysWhy) {
  std::string base = kGpucloud + " sim --out " + (dir_ / "o").string();
  auto r = Shell(base + " --trace /nonexistent.csv --cluster tiresias");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("/nonexistent.csv: cannot open"), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --policy fastest");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown policy \"fastest\""), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster huge");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown cluster preset \"huge\""), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --until soon");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--until: "), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --mtbf-hours tpu=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--mtbf-hours: \"tpu=3\" is not GPU-TYPE=HOURS"), std::string::npos)
      << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --slowdown 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--slowdown: \"1,2\" is not three factors"), std::string::npos)
      << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --predict-failures act");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--predict-failures: needs failures to predict (--mtbf-hours)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(Shell(base + " --trace " + trace_ +
                  " --cluster tiresias --mtbf-hours 9 --predict-failures maybe")
                .code,
            2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "o"));               // nothing written
  EXPECT_EQ(Shell(kGpucloud + " sim --trace " + trace_).code, 2);  // usage
}

}  // namespace
