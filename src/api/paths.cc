#include "api/paths.h"

#include "core/text.h"

namespace gpucloud::api {

std::string ApiPath(std::string_view rest) { return Cat(kApiRoot, rest); }

std::string ClusterScopedPath(std::string_view plural) { return ApiPath(plural); }

std::string NamespacedPath(std::string_view ns, std::string_view plural) {
  return Cat(kApiRoot, "namespaces/", ns, "/", plural);
}

std::string JobsPath(std::string_view ns) { return NamespacedPath(ns, "jobs"); }

std::string AllJobsPath() { return ClusterScopedPath("jobs"); }

std::string JobPath(std::string_view ns, std::string_view job) {
  return Cat(JobsPath(ns), "/", job);
}

std::string JobSubresourcePath(std::string_view ns, std::string_view job, std::string_view sub) {
  return Cat(JobPath(ns, job), "/", sub);
}

std::string SecretPath(std::string_view ns, std::string_view name) {
  return Cat(NamespacedPath(ns, "secrets"), "/", name);
}

std::string NodesPath() { return ClusterScopedPath("nodes"); }

std::string NodePath(const std::string& node) { return Cat(NodesPath(), "/", node); }

std::string NodeVerbPath(const std::string& node, std::string_view verb) {
  return Cat(NodePath(node), "/", verb);
}

std::string AssignmentsPath(const std::string& node) { return NodeVerbPath(node, "assignments"); }

std::string TaskSecretsPath(const std::string& node, const std::string& assignment) {
  return Cat(AssignmentsPath(node), "/", assignment, "/secrets");
}

std::string PoolPath(std::string_view pool, std::string_view verb) {
  return Cat(kApiRoot, "pools/", pool, "/", verb);
}

std::string ClusterPath() { return ApiPath("cluster"); }

}  // namespace gpucloud::api
