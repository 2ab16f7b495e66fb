// The real gpuctl binary, run as a user runs it: exit codes, standard output and standard error
// through a shell (CTest label `integration`).
#include <gtest/gtest.h>

#include <string>

#include "testing/shell.h"

namespace {

using Result = gpucloud::testing_util::ShellResult;
using gpucloud::testing_util::Shell;

const std::string kGpuctl = GPUCTL_BINARY;
const std::string kSrc = GPUCLOUD_SOURCE_DIR;

TEST(GpuctlBinary, ValidExamplesExitZero) {
  Result r = Shell(kGpuctl + " validate -f " + kSrc + "/examples");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Job default/pytorch-job: 4 x worker"), std::string::npos) << r.output;
}

TEST(GpuctlBinary, InvalidInputExitsOne) {
  Result r = Shell(kGpuctl + " validate -f " + kSrc + "/testdata/manifests/seed-000-verbatim.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("seed-000-verbatim.yaml:8:5: invalid YAML: end of sequence not found"),
            std::string::npos)
      << r.output;
}

TEST(GpuctlBinary, UsageErrorExitsTwo) {
  EXPECT_EQ(Shell(kGpuctl + " validate").code, 2);
  EXPECT_EQ(Shell(kGpuctl + " no-such-command").code, 2);
  // A typo: kubectl's "unknown command", with the nearest one, on standard error only.
  Result typo = Shell("{ " + kGpuctl + " gett jobs 2>&1 >/dev/null; }");
  EXPECT_EQ(typo.code, 2);
  EXPECT_EQ(typo.output,
            "gpuctl: unknown command \"gett\" for \"gpuctl\"; did you mean \"get\"?\n");
}

TEST(GpuctlBinary, BashCompletionLoads) {
  Result r = Shell("bash -c 'source <(" + kGpuctl +
                   " completion bash) && COMP_WORDS=(gpuctl desc) COMP_CWORD=1 && _gpuctl && "
                   "echo \"${COMPREPLY[*]}\"'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "describe\n");
}

TEST(GpuctlBinary, ConvertReadsStandardInput) {
  Result r = Shell(
      "printf 'apiVersion: gpucloud/v1\\nkind: Queue\\nmetadata: {name: q}\\nspec: {}\\n' | " +
      kGpuctl + " convert -f - -o json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"kind\": \"Queue\""), std::string::npos) << r.output;
}

}  // namespace
