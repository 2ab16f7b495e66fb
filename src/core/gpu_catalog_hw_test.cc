// On a machine with NVIDIA GPUs (CTest label `gpu`): every GPU the driver reports maps to a
// catalog entry, not a generic one. Skips where nvidia-smi is absent (CI has no GPU).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/gpu_catalog.h"

namespace gpucloud {
namespace {

std::string RunNvidiaSmi() {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null",
            "r"),
      pclose);
  if (!pipe) return "";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, pipe.get()) != nullptr) out += buf;
  return out;
}

TEST(GpuCatalogOnHardware, EveryLocalGpuIsInTheCatalog) {
  if (std::system("command -v nvidia-smi >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no nvidia-smi: not a GPU machine";
  }
  std::string out = RunNvidiaSmi();
  if (out.empty()) GTEST_SKIP() << "nvidia-smi reported no GPU";
  size_t pos = 0;
  int gpus = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    size_t comma = line.rfind(',');
    ASSERT_NE(comma, std::string::npos) << line;
    std::string name = line.substr(0, comma);
    int64_t mib = std::atoll(line.c_str() + comma + 1);
    GpuType t = GpuCatalog::Default().FromHardware(name, MiB(mib));
    std::printf("GPU %d: \"%s\", %lld MiB -> %s\n", gpus, name.c_str(), static_cast<long long>(mib),
                t.name.c_str());
    EXPECT_FALSE(t.generic) << name << " " << mib << " MiB is not in the catalog";
    ++gpus;
  }
  EXPECT_GT(gpus, 0);
}

}  // namespace
}  // namespace gpucloud
