// CudaVersion: a job that needs CUDA X.Y runs only where the driver supports at least X.Y
// (a job built for CUDA 12.4 fails on an older driver).
#include "core/parse.h"
#include "core/text.h"
#include "sched/plugins/filters.h"

namespace gpucloud::sched {
namespace {

class CudaVersionFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "CudaVersion"; }
  std::optional<std::string> Filter(const JobRequest& job, const Node& node) const override {
    if (job.min_cuda_version == 0 || node.cuda_version >= job.min_cuda_version) return std::nullopt;
    return Cat("node's driver supports CUDA ", FormatCudaVersion(node.cuda_version),
               ", the job needs ", FormatCudaVersion(job.min_cuda_version));
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> NewCudaVersionFilter() {
  return std::make_unique<CudaVersionFilter>();
}

}  // namespace gpucloud::sched
