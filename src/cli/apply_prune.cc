#include "cli/apply_prune.h"

#include <algorithm>

#include "core/job_array.h"

namespace gpucloud::cli {
namespace {

bool Contains(const std::vector<ObjectRef>& refs, const ObjectRef& ref) {
  return std::find(refs.begin(), refs.end(), ref) != refs.end();
}

bool Touched(const std::vector<ObjectRef>& applied, const ObjectRef& ref) {
  return std::any_of(applied.begin(), applied.end(), [&](const ObjectRef& a) {
    return ref.type->namespaced ? a.type->namespaced && a.ns == ref.ns : a.type == ref.type;
  });
}

}  // namespace

std::vector<const ResourceType*> NamespacedPruneTypes() {
  return {FindResourceType("jobs"), FindResourceType("secrets")};
}

std::vector<ObjectRef> WhatToPrune(const std::vector<ObjectRef>& applied,
                                   const std::vector<ListedObject>& listed,
                                   const LabelSelector& selector) {
  std::vector<ObjectRef> prune;
  for (const ListedObject& o : listed) {
    if (!Touched(applied, o.ref)) continue;
    if (!o.labels.contains(std::string(kLastAppliedLabel)) || !selector.Matches(o.labels)) {
      continue;
    }
    ObjectRef whole = o.ref;  // an array's element stands for its array
    auto array = o.labels.find(std::string(kArrayLabel));
    if (o.ref.type->plural == "jobs" && array != o.labels.end()) whole.name = array->second;
    if (Contains(applied, whole) || Contains(prune, whole)) continue;
    prune.push_back(std::move(whole));
  }
  return prune;
}

}  // namespace gpucloud::cli
