// gpuctl's views of inference services (docs/services.md): the table of `gpuctl get services`
// and `gpuctl describe service NAME`, from the objects the server answers. Pure functions of
// their input; thread-compatible.
#ifndef GPUCLOUD_CLI_SERVICE_COMMANDS_H_
#define GPUCLOUD_CLI_SERVICE_COMMANDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

namespace gpucloud::cli {

// NAME, READY (ready/desired), REPLICAS (live, min-max), TARGET, LOAD, REASON.
void PrintServicesTable(const std::vector<nlohmann::json>& items, bool with_namespace,
                        std::ostream& out);

// What `describe service` prints of `svc`: the spec's essentials, the counts and
// load, each replica (job, node, address, ready, current template) and the scaling events.
void DescribeService(const nlohmann::json& svc, std::ostream& out);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_SERVICE_COMMANDS_H_
