// What `gpuctl apply --prune` deletes, as a pure function of what was applied and what the
// server lists, and the label by which gpuctl marks what it applied.
//
// kubectl prunes only objects it applied itself (those with its last-applied annotation). The
// server keeps no annotation on a Secret, so gpuctl marks every object it applies with the
// label kLastAppliedLabel instead (kubectl's ApplySets mark their members with a label too).
// WhatToPrune then picks, among the listed objects:
//   1. those the apply touched: a namespaced one (a job, a Secret) in a namespace that holds
//      an applied object; a cluster-scoped one (a queue, a node pool, a runtime class) of a
//      kind applied (so that pruning a tenant's jobs never touches the cluster's pools);
//   2. that carry kLastAppliedLabel and match the selector (an empty one matches all: --all);
//   3. that are not in the applied set; a job array's element (label gpucloud.io/array=NAME)
//      counts as its array NAME, which is pruned whole, once (the server deletes every element
//      of the array named).
// In the order listed. Pure; thread-safe.
#ifndef GPUCLOUD_CLI_APPLY_PRUNE_H_
#define GPUCLOUD_CLI_APPLY_PRUNE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/label_selector.h"
#include "cli/resources.h"

namespace gpucloud::cli {

// On every object gpuctl apply writes. Its value is "true", except on a Secret, where it is a
// keyed digest of the values (secret_apply.h), so that apply can tell "unchanged" without ever
// reading a value back.
inline constexpr std::string_view kLastAppliedLabel = "gpuctl.gpucloud.io/last-applied";

// One object by type, namespace ("" when cluster-scoped) and name.
struct ObjectRef {
  const ResourceType* type = nullptr;
  std::string ns;
  std::string name;
  bool operator==(const ObjectRef&) const = default;
};

// An object as the server listed it.
struct ListedObject {
  ObjectRef ref;
  std::map<std::string, std::string> labels;
};

// The types apply --prune lists in each namespace it touched: jobs and secrets.
std::vector<const ResourceType*> NamespacedPruneTypes();

std::vector<ObjectRef> WhatToPrune(const std::vector<ObjectRef>& applied,
                                   const std::vector<ListedObject>& listed,
                                   const LabelSelector& selector);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_APPLY_PRUNE_H_
