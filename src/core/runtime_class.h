// A RuntimeClass (Kubernetes node.k8s.io/v1) names a container runtime handler and, through its
// scheduling section, the nodes that have it. A job naming the class inherits its node selector
// and tolerations. Value types; thread-compatible.
#ifndef GPUCLOUD_CORE_RUNTIME_CLASS_H_
#define GPUCLOUD_CORE_RUNTIME_CLASS_H_

#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/object_meta.h"

namespace gpucloud {

struct RuntimeClassSpec {
  std::string handler;  // e.g. "nvidia"
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  bool operator==(const RuntimeClassSpec&) const = default;
};

struct RuntimeClass {
  ObjectMeta metadata;
  RuntimeClassSpec spec;
  bool operator==(const RuntimeClass&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_RUNTIME_CLASS_H_
