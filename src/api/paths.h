// The URL paths of the gpucloud REST API (/apis/gpucloud/v1/...), built in one place for every
// client: gpuctl, the agent, the Python client's twin in C++. The server routes these paths
// (server/rest.cc); a path built here is one the server answers. Names go in as they are (the
// API's names are DNS labels and need no escaping). Pure functions; thread-safe.
#ifndef GPUCLOUD_API_PATHS_H_
#define GPUCLOUD_API_PATHS_H_

#include <string>
#include <string_view>

namespace gpucloud::api {

// The API group's root, with its trailing slash: kApiRoot + "whoami" is a path.
inline constexpr std::string_view kApiRoot = "/apis/gpucloud/v1/";

// kApiRoot + `rest` ("tokens", "audit/key", "users/alice").
std::string ApiPath(std::string_view rest);
// "/apis/gpucloud/v1/{plural}": a cluster-scoped collection (nodes, queues, nodepools), or the
// list of a namespaced one over every namespace ("jobs", admins only).
std::string ClusterScopedPath(std::string_view plural);
// "/apis/gpucloud/v1/namespaces/{ns}/{plural}": a namespaced collection.
std::string NamespacedPath(std::string_view ns, std::string_view plural);

// --- jobs ---------------------------------------------------------------------------------
// "/apis/gpucloud/v1/namespaces/{ns}/jobs".
std::string JobsPath(std::string_view ns);
// "/apis/gpucloud/v1/jobs": the jobs of every namespace.
std::string AllJobsPath();
// "/apis/gpucloud/v1/namespaces/{ns}/jobs/{job}".
std::string JobPath(std::string_view ns, std::string_view job);
// JobPath + "/" + `sub`: "logs", "events", "cancel" (a query may follow, "logs?rank=0").
std::string JobSubresourcePath(std::string_view ns, std::string_view job, std::string_view sub);

// "/apis/gpucloud/v1/namespaces/{ns}/secrets/{name}".
std::string SecretPath(std::string_view ns, std::string_view name);

// --- nodes, pools, the cluster ------------------------------------------------------------
// "/apis/gpucloud/v1/nodes".
std::string NodesPath();
// "/apis/gpucloud/v1/nodes/{node}".
std::string NodePath(const std::string& node);
// NodePath + "/" + `verb`: an operator's "cordon", "uncordon", "drain", "reclaim", or the
// agent's "heartbeat" and "certificate".
std::string NodeVerbPath(const std::string& node, std::string_view verb);
// The node's assignments (list and watch).
std::string AssignmentsPath(const std::string& node);
// Where the node `node` reads the secret values of its assignment `assignment`.
std::string TaskSecretsPath(const std::string& node, const std::string& assignment);
// "/apis/gpucloud/v1/pools/{pool}/{verb}": a verb on every node of a pool ("reclaim", "prepull";
// a query may follow).
std::string PoolPath(std::string_view pool, std::string_view verb);
// "/apis/gpucloud/v1/cluster": the cluster's summary.
std::string ClusterPath();

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_PATHS_H_
