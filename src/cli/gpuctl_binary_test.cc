// The real gpuctl binary, run as a user runs it: exit codes, standard output and standard error
// through a shell (CTest label `integration`).
#include <gtest/gtest.h>
#include <unistd.h>

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

// Start-up is a large part of every gpuctl command (issue 17): Abseil comes from its static
// archives (apps/CMakeLists.txt, GPUCTL_STATIC_ABSEIL; scripts/link-static-archives), so the loader
// maps none of its shared libraries. The loader lists what it would load (as ldd does) without
// running gpuctl.
TEST(GpuctlBinary, LoadsNoAbseilSharedLibrary) {
  if (!GPUCTL_STATIC_ABSEIL) GTEST_SKIP() << "configured with GPUCTL_STATIC_ABSEIL=OFF";
  Result r = Shell("LD_TRACE_LOADED_OBJECTS=1 " + kGpuctl);
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_NE(r.output.find("libc.so"), std::string::npos) << r.output;
  size_t at = r.output.find("libabsl_");
  if (at == std::string::npos) return;
  // Loaded: fine only where its static archive is not installed (the link then keeps them all).
  size_t arrow = r.output.find("=> ", at);
  std::string path = r.output.substr(arrow + 3, r.output.find(' ', arrow + 3) - arrow - 3);
  std::string base = path.substr(path.rfind('/') + 1);
  std::string archive =
      path.substr(0, path.rfind('/') + 1) + base.substr(0, base.find(".so")) + ".a";
  EXPECT_NE(access(archive.c_str(), F_OK), 0)
      << archive << " is installed, yet gpuctl loads " << path << ":\n"
      << r.output;
}

}  // namespace
