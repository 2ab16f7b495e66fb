#include "api/wire.h"

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "core/text.h"

namespace gpucloud::api {
namespace {

using Json = nlohmann::ordered_json;

// Reads typed fields of JSON objects; the first bad one is remembered with its path.
class Reader {
 public:
  std::optional<std::string> error;

  const Json* Field(const Json& obj, const char* key, const std::string& path, bool required) {
    if (!obj.is_object()) {
      Fail(path, "is not an object");
      return nullptr;
    }
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (required) Fail(Cat(path, path.empty() ? "" : ".", key), "is required");
      return nullptr;
    }
    return &*it;
  }
  void Str(const Json& obj, const char* key, const std::string& path, std::string* out,
           bool required = false) {
    const Json* v = Field(obj, key, path, required);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Sub(path, key), "must be a string");
    *out = v->get<std::string>();
  }
  template <typename T>
  void Int(const Json& obj, const char* key, const std::string& path, T* out,
           bool required = false) {
    const Json* v = Field(obj, key, path, required);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail(Sub(path, key), "must be an integer");
    *out = static_cast<T>(v->get<int64_t>());
  }
  // A number not below zero.
  void Amount(const Json& obj, const char* key, const std::string& path, double* out) {
    const Json* v = Field(obj, key, path, false);
    if (v == nullptr) return;
    if (!v->is_number() || v->get<double>() < 0) {
      return Fail(Sub(path, key), "must be a number not below 0");
    }
    *out = v->get<double>();
  }
  void Bool(const Json& obj, const char* key, const std::string& path, bool* out) {
    const Json* v = Field(obj, key, path, false);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(Sub(path, key), "must be true or false");
    *out = v->get<bool>();
  }
  void StrMap(const Json& obj, const char* key, const std::string& path,
              std::map<std::string, std::string>* out) {
    const Json* v = Field(obj, key, path, false);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(Sub(path, key), "must be a map of strings");
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_string())
        return Fail(Cat(Sub(path, key), ".", it.key()), "must be a string");
      (*out)[it.key()] = it.value().get<std::string>();
    }
  }
  void StrList(const Json& obj, const char* key, const std::string& path,
               std::vector<std::string>* out) {
    const Json* v = Field(obj, key, path, false);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(Sub(path, key), "must be a list of strings");
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return Fail(Cat(Sub(path, key), "[", i, "]"), "must be a string");
      out->push_back((*v)[i].get<std::string>());
    }
  }
  const Json* List(const Json& obj, const char* key, const std::string& path) {
    const Json* v = Field(obj, key, path, false);
    if (v != nullptr && !v->is_array()) {
      Fail(Sub(path, key), "must be a list");
      return nullptr;
    }
    return v;
  }
  void Fail(const std::string& path, const std::string& what) {
    if (!error) error = Cat(path, ": ", what);
  }
  static std::string Sub(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : Cat(path, ".", key);
  }
  absl::Status Done() const {
    return error ? absl::InvalidArgumentError(*error) : absl::OkStatus();
  }
};

absl::StatusOr<Json> ParseObject(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("the body is not a JSON object");
  return j;
}

}  // namespace

std::string NodeToJson(const NodeInfo& n, bool unschedulable) {
  Json gpus = Json::array();
  for (const Gpu& g : n.gpus) {
    Json j{{"index", g.index},
           {"uuid", g.uuid},
           {"type", g.type},
           {"memoryMiB", g.memory.raw()},
           {"pciBusId", g.pci_bus_id},
           {"migEnabled", g.mig_enabled},
           {"nvlinkIsland", g.nvlink_island},
           {"healthy", g.healthy}};
    if (!g.mig_layout.empty()) {
      Json layout = Json::array();
      for (const MigPlacement& m : g.mig_layout)
        layout.push_back(Json{{"profile", m.profile}, {"start", m.start}});
      j["migLayout"] = std::move(layout);
    }
    gpus.push_back(std::move(j));
  }
  Json labels = Json::object();
  for (const auto& [k, v] : n.labels) labels[k] = v;
  Json j{{"apiVersion", "gpucloud/v1"},
         {"kind", "Node"},
         {"metadata", {{"name", n.name}, {"labels", labels}}},
         {"spec", {{"pool", n.pool}, {"unschedulable", unschedulable}}},
         {"status",
          {{"address", n.address},
           {"hostname", n.hostname},
           {"cpuMilli", n.cpu_milli},
           {"memoryMiB", n.memory_mib},
           {"maxTasks", n.max_tasks},
           {"backend", n.backend},
           {"driverVersion", n.driver_version},
           {"cudaVersion", n.cuda_version},
           {"gpus", gpus}}}};
  if (!n.gpu_topology.empty()) j["status"]["gpuTopology"] = n.gpu_topology;
  return j.dump(2);
}

absl::StatusOr<NodeInfo> NodeFromJson(const std::string& text) {
  absl::StatusOr<Json> parsed = ParseObject(text);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  Reader r;
  NodeInfo n;
  if (const Json* meta = r.Field(j, "metadata", "", true)) {
    r.Str(*meta, "name", "metadata", &n.name, true);
    r.StrMap(*meta, "labels", "metadata", &n.labels);
  }
  if (const Json* spec = r.Field(j, "spec", "", false)) r.Str(*spec, "pool", "spec", &n.pool);
  if (const Json* st = r.Field(j, "status", "", true)) {
    r.Str(*st, "address", "status", &n.address);
    r.Str(*st, "hostname", "status", &n.hostname);
    r.Int(*st, "cpuMilli", "status", &n.cpu_milli);
    r.Int(*st, "memoryMiB", "status", &n.memory_mib);
    r.Int(*st, "maxTasks", "status", &n.max_tasks);
    r.Str(*st, "backend", "status", &n.backend);
    r.Str(*st, "driverVersion", "status", &n.driver_version);
    r.Int(*st, "cudaVersion", "status", &n.cuda_version);
    if (const Json* gpus = r.List(*st, "gpus", "status")) {
      for (size_t i = 0; i < gpus->size() && !r.error; ++i) {
        std::string path = Cat("status.gpus[", i, "]");
        const Json& g = (*gpus)[i];
        Gpu gpu;
        int64_t mem = 0;
        r.Int(g, "index", path, &gpu.index, true);
        r.Str(g, "uuid", path, &gpu.uuid, true);
        r.Str(g, "type", path, &gpu.type, true);
        r.Int(g, "memoryMiB", path, &mem);
        r.Str(g, "pciBusId", path, &gpu.pci_bus_id);
        r.Bool(g, "migEnabled", path, &gpu.mig_enabled);
        r.Int(g, "nvlinkIsland", path, &gpu.nvlink_island);
        r.Bool(g, "healthy", path, &gpu.healthy);
        if (const Json* layout = r.List(g, "migLayout", path)) {
          for (size_t k = 0; k < layout->size() && !r.error; ++k) {
            MigPlacement m;
            r.Str((*layout)[k], "profile", Cat(path, ".migLayout[", k, "]"), &m.profile, true);
            r.Int((*layout)[k], "start", Cat(path, ".migLayout[", k, "]"), &m.start, true);
            gpu.mig_layout.push_back(std::move(m));
          }
        }
        gpu.memory = MiB(mem);
        n.gpus.push_back(std::move(gpu));
      }
    }
    if (const Json* topo = r.List(*st, "gpuTopology", "status")) {
      for (size_t i = 0; i < topo->size() && !r.error; ++i) {
        const Json& row = (*topo)[i];
        std::vector<std::string> cells;
        for (size_t k = 0; row.is_array() && k < row.size(); ++k) {
          if (row[k].is_string()) cells.push_back(row[k].get<std::string>());
        }
        if (!row.is_array() || cells.size() != n.gpus.size()) {
          r.Fail(Cat("status.gpuTopology[", i, "]"),
                 Cat("must be a list of ", n.gpus.size(), " strings (one per GPU)"));
        }
        n.gpu_topology.push_back(std::move(cells));
      }
      if (!r.error && n.gpu_topology.size() != n.gpus.size()) {
        r.Fail("status.gpuTopology",
               Cat("must have one row per GPU (", n.gpus.size(), "), has ", n.gpu_topology.size()));
      }
    }
  }
  if (absl::Status s = r.Done(); !s.ok()) return s;
  if (n.cpu_milli < 0) return absl::InvalidArgumentError("status.cpuMilli: must not be negative");
  if (n.memory_mib < 0) return absl::InvalidArgumentError("status.memoryMiB: must not be negative");
  if (n.max_tasks < 0 || n.max_tasks > 100'000) {
    return absl::InvalidArgumentError(
        Cat("status.maxTasks: must be from 0 to 100000, got ", n.max_tasks));
  }
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    if (n.gpus[i].index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(Cat("status.gpus[", i, "].index: is ", n.gpus[i].index,
                                            "; GPUs are listed by index from 0"));
    }
  }
  return n;
}

Node ToSchedulerNode(const NodeInfo& info) {
  Node n;
  n.name = info.name;
  n.gpus = info.gpus;
  n.cpu = MilliCpu(info.cpu_milli);
  n.memory = MiB(info.memory_mib);
  n.max_tasks = info.max_tasks;
  n.labels = info.labels;
  n.pool = info.pool;
  n.driver_version = info.driver_version;
  n.cuda_version = info.cuda_version;
  return n;
}

namespace {

void WriteSecretRefs(const Assignment& a, Json& j) {
  if (!a.secret_env.empty()) {
    Json list = Json::array();
    for (const SecretEnvVar& e : a.secret_env) {
      Json item{{"name", e.name}, {"secret", e.ref.secret}, {"key", e.ref.key}};
      if (e.ref.optional) item["optional"] = true;
      list.push_back(std::move(item));
    }
    j["secretEnv"] = std::move(list);
  }
  if (!a.env_from.empty()) {
    Json list = Json::array();
    for (const SecretEnvFrom& e : a.env_from) {
      Json item{{"secret", e.secret}};
      if (!e.prefix.empty()) item["prefix"] = e.prefix;
      if (e.optional) item["optional"] = true;
      list.push_back(std::move(item));
    }
    j["envFromSecrets"] = std::move(list);
  }
  if (!a.secret_volumes.empty()) {
    Json list = Json::array();
    for (const SecretVolume& v : a.secret_volumes) {
      Json item{{"name", v.name}, {"secret", v.secret}, {"mountPath", v.mount_path}};
      if (!v.items.empty()) {
        Json items = Json::array();
        for (const SecretVolume::Item& i : v.items) {
          items.push_back(Json{{"key", i.key}, {"path", i.path}});
        }
        item["items"] = std::move(items);
      }
      if (v.optional) item["optional"] = true;
      list.push_back(std::move(item));
    }
    j["secretVolumes"] = std::move(list);
  }
  if (!a.image_pull_secrets.empty()) j["imagePullSecrets"] = a.image_pull_secrets;
}

// The secret references: optional, so that an older server's assignment decodes without them.
// Their shapes are checked; the names were checked by the server's manifest decoder.
void ReadSecretRefs(Reader& r, const Json& j, Assignment* a) {
  if (const Json* list = r.List(j, "secretEnv", "")) {
    for (size_t i = 0; i < list->size() && !r.error; ++i) {
      const std::string path = Cat("secretEnv[", i, "]");
      SecretEnvVar e;
      r.Str((*list)[i], "name", path, &e.name, true);
      r.Str((*list)[i], "secret", path, &e.ref.secret, true);
      r.Str((*list)[i], "key", path, &e.ref.key, true);
      r.Bool((*list)[i], "optional", path, &e.ref.optional);
      a->secret_env.push_back(std::move(e));
    }
  }
  if (const Json* list = r.List(j, "envFromSecrets", "")) {
    for (size_t i = 0; i < list->size() && !r.error; ++i) {
      const std::string path = Cat("envFromSecrets[", i, "]");
      SecretEnvFrom e;
      r.Str((*list)[i], "secret", path, &e.secret, true);
      r.Str((*list)[i], "prefix", path, &e.prefix);
      r.Bool((*list)[i], "optional", path, &e.optional);
      a->env_from.push_back(std::move(e));
    }
  }
  if (const Json* list = r.List(j, "secretVolumes", "")) {
    for (size_t i = 0; i < list->size() && !r.error; ++i) {
      const std::string path = Cat("secretVolumes[", i, "]");
      SecretVolume v;
      r.Str((*list)[i], "name", path, &v.name, true);
      r.Str((*list)[i], "secret", path, &v.secret, true);
      r.Str((*list)[i], "mountPath", path, &v.mount_path, true);
      r.Bool((*list)[i], "optional", path, &v.optional);
      if (const Json* items = r.List((*list)[i], "items", path)) {
        for (size_t k = 0; k < items->size() && !r.error; ++k) {
          const std::string ipath = Cat(path, ".items[", k, "]");
          SecretVolume::Item item;
          r.Str((*items)[k], "key", ipath, &item.key, true);
          r.Str((*items)[k], "path", ipath, &item.path, true);
          v.items.push_back(std::move(item));
        }
      }
      a->secret_volumes.push_back(std::move(v));
    }
  }
  r.StrList(j, "imagePullSecrets", "", &a->image_pull_secrets);
}

}  // namespace

std::string AssignmentToJson(const Assignment& a) {
  Json gpus = Json::array();
  for (const AssignedGpu& g : a.gpus) {
    Json j{{"index", g.index}, {"uuid", g.uuid}, {"mode", g.mode}};
    if (g.mode == "mig") {
      j["migProfile"] = g.mig_profile;
      j["migStart"] = g.mig_start;
    }
    if (g.mode == "shared") {
      j["fractionMilli"] = g.fraction_milli;
      j["mps"] = g.mps;
    }
    gpus.push_back(std::move(j));
  }
  Json hosts = Json::array();
  for (const auto& [h, slots] : a.hosts) hosts.push_back(Json{{"address", h}, {"slots", slots}});
  Json env = Json::object();
  for (const auto& [k, v] : a.env) env[k] = v;
  Json j{{"apiVersion", "gpucloud/v1"},
         {"kind", "Assignment"},
         {"metadata", {{"name", a.name}, {"namespace", a.namespace_}}},
         {"job", a.job},
         {"jobUid", a.job_uid},
         {"attempt", a.attempt},
         {"task", a.task},
         {"replica", a.replica},
         {"rank", a.rank},
         {"worldSize", a.world_size},
         {"nodeRank", a.node_rank},
         {"nodes", a.nodes},
         {"localRank", a.local_rank},
         {"localWorldSize", a.local_world_size},
         {"masterAddr", a.master_addr},
         {"masterPort", a.master_port},
         {"hosts", hosts},
         {"gpus", gpus},
         {"command", a.command},
         {"env", env},
         {"workingDir", a.working_dir},
         {"checkpointDir", a.checkpoint_dir},
         {"restartCount", a.restart_count},
         {"cpuMilli", a.cpu_milli},
         {"memoryMiB", a.memory_mib},
         {"graceSeconds", a.grace_seconds}};
  if (!a.task_hosts.empty()) j["taskHosts"] = a.task_hosts;
  if (a.checkpoint_node_local) j["checkpointNodeLocal"] = true;
  if (a.checkpoint_replicate) j["checkpointReplicate"] = true;
  // Absent when unset, so that an older agent's decoder is not surprised by what it lacks.
  if (!a.image.empty()) {
    j["image"] = a.image;
    j["imagePullPolicy"] = PullPolicyName(ResolvePullPolicy(a.image_pull_policy, a.image));
    if (a.image_entrypoint) j["imageEntrypoint"] = true;
  }
  if (a.run_as_user) j["runAsUser"] = *a.run_as_user;
  if (a.run_as_group) j["runAsGroup"] = *a.run_as_group;
  if (a.run_as_non_root) j["runAsNonRoot"] = true;
  if (a.idle_timeout_seconds > 0) j["idleTimeoutSeconds"] = a.idle_timeout_seconds;
  WriteSecretRefs(a, j);
  return j.dump();
}

namespace {

// image, imagePullPolicy (defaulted by Kubernetes' rule when absent), runAsUser, runAsGroup and
// runAsNonRoot; all optional, so that an older server's assignment decodes as a host process.
void ReadImageAndUser(Reader& r, const Json& j, Assignment* a) {
  r.Str(j, "image", "", &a->image);
  std::string policy;
  r.Str(j, "imagePullPolicy", "", &policy);
  if (!policy.empty()) {
    std::optional<PullPolicy> p = ParsePullPolicy(policy);
    if (!p) r.Fail("imagePullPolicy", "must be Always, IfNotPresent or Never");
    a->image_pull_policy = p.value_or(PullPolicy::kDefault);
  }
  r.Bool(j, "imageEntrypoint", "", &a->image_entrypoint);
  if (!a->image.empty()) {
    a->image_pull_policy = ResolvePullPolicy(a->image_pull_policy, a->image);
  } else {
    a->image_entrypoint = false;  // only an image has an entrypoint
  }
  constexpr int64_t kMaxId = (int64_t{1} << 31) - 1;
  for (auto [key, out] :
       {std::pair{"runAsUser", &a->run_as_user}, std::pair{"runAsGroup", &a->run_as_group}}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    int64_t v = -1;
    r.Int(j, key, "", &v);
    if (r.error) return;
    if (v < 0 || v > kMaxId) return r.Fail(key, "must be in [0, 2147483647]");
    *out = v;
  }
  r.Bool(j, "runAsNonRoot", "", &a->run_as_non_root);
  r.Int(j, "idleTimeoutSeconds", "", &a->idle_timeout_seconds);
  if (a->idle_timeout_seconds < 0) return r.Fail("idleTimeoutSeconds", "must be 0 or more");
}

// taskHosts: task name -> its replicas' addresses. Optional (an older server sends none). Only
// the types are checked: names and addresses are the server's and the nodes' own, and refusing
// the whole assignment for one of them would leave the job Scheduled and never started (the
// agent leaves out of /etc/volcano a name that is no task name).
void ReadTaskHosts(Reader& r, const Json& j, Assignment* a) {
  const Json* v = r.Field(j, "taskHosts", "", false);
  if (v == nullptr) return;
  if (!v->is_object()) return r.Fail("taskHosts", "must be a map of task name to addresses");
  for (auto it = v->begin(); it != v->end() && !r.error; ++it) {
    r.StrList(*v, it.key().c_str(), "taskHosts", &a->task_hosts[it.key()]);
  }
}

}  // namespace

absl::StatusOr<Assignment> AssignmentFromJson(const std::string& text) {
  absl::StatusOr<Json> parsed = ParseObject(text);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  Reader r;
  Assignment a;
  if (const Json* meta = r.Field(j, "metadata", "", true)) {
    r.Str(*meta, "name", "metadata", &a.name, true);
    r.Str(*meta, "namespace", "metadata", &a.namespace_, true);
    std::string rv;
    r.Str(*meta, "resourceVersion", "metadata", &rv);
    if (!rv.empty()) a.resource_version = std::atoll(rv.c_str());
  }
  r.Str(j, "job", "", &a.job, true);
  r.Str(j, "jobUid", "", &a.job_uid, true);
  r.Int(j, "attempt", "", &a.attempt, true);
  r.Str(j, "task", "", &a.task);
  r.Int(j, "replica", "", &a.replica);
  r.Int(j, "rank", "", &a.rank, true);
  r.Int(j, "worldSize", "", &a.world_size, true);
  r.Int(j, "nodeRank", "", &a.node_rank);
  r.Int(j, "nodes", "", &a.nodes);
  r.Int(j, "localRank", "", &a.local_rank);
  r.Int(j, "localWorldSize", "", &a.local_world_size);
  r.Str(j, "masterAddr", "", &a.master_addr);
  r.Int(j, "masterPort", "", &a.master_port);
  if (const Json* hosts = r.List(j, "hosts", "")) {
    for (size_t i = 0; i < hosts->size() && !r.error; ++i) {
      std::string addr;
      int slots = 0;
      r.Str((*hosts)[i], "address", Cat("hosts[", i, "]"), &addr, true);
      r.Int((*hosts)[i], "slots", Cat("hosts[", i, "]"), &slots, true);
      a.hosts.emplace_back(addr, slots);
    }
  }
  if (const Json* gpus = r.List(j, "gpus", "")) {
    for (size_t i = 0; i < gpus->size() && !r.error; ++i) {
      std::string path = Cat("gpus[", i, "]");
      AssignedGpu g;
      r.Int((*gpus)[i], "index", path, &g.index, true);
      r.Str((*gpus)[i], "uuid", path, &g.uuid, true);
      r.Str((*gpus)[i], "mode", path, &g.mode, true);
      r.Str((*gpus)[i], "migProfile", path, &g.mig_profile);
      r.Int((*gpus)[i], "migStart", path, &g.mig_start);
      r.Int((*gpus)[i], "fractionMilli", path, &g.fraction_milli);
      r.Bool((*gpus)[i], "mps", path, &g.mps);
      a.gpus.push_back(std::move(g));
    }
  }
  r.StrList(j, "command", "", &a.command);
  r.StrMap(j, "env", "", &a.env);
  r.Str(j, "workingDir", "", &a.working_dir);
  r.Str(j, "checkpointDir", "", &a.checkpoint_dir);
  r.Bool(j, "checkpointNodeLocal", "", &a.checkpoint_node_local);
  r.Bool(j, "checkpointReplicate", "", &a.checkpoint_replicate);
  r.Int(j, "restartCount", "", &a.restart_count);
  r.Int(j, "cpuMilli", "", &a.cpu_milli);
  r.Int(j, "memoryMiB", "", &a.memory_mib);
  r.Int(j, "graceSeconds", "", &a.grace_seconds);
  ReadTaskHosts(r, j, &a);
  ReadImageAndUser(r, j, &a);
  ReadSecretRefs(r, j, &a);
  if (absl::Status s = r.Done(); !s.ok()) return s;
  // An empty command is not refused here: an image's entrypoint runs without one, and for a host
  // process it is the agent's to refuse (the task fails at once with NoCommand). Dropped here,
  // the assignment was never started, and the job stayed Scheduled holding its GPUs.
  return a;
}

std::string TaskSecretsToJson(const TaskSecrets& s) {
  Json files = Json::array();
  for (const TaskSecrets::File& f : s.files) {
    files.push_back(
        Json{{"volume", f.volume}, {"path", f.path}, {"data", absl::Base64Escape(f.data)}});
  }
  Json j{{"apiVersion", "gpucloud/v1"}, {"kind", "TaskSecrets"}, {"env", s.env}, {"files", files}};
  if (!s.pull_auth.empty()) j["pullAuth"] = Json::parse(s.pull_auth, nullptr, false);
  return j.dump();
}

absl::StatusOr<TaskSecrets> TaskSecretsFromJson(const std::string& text) {
  absl::StatusOr<Json> parsed = ParseObject(text);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  Reader r;
  TaskSecrets s;
  r.StrMap(j, "env", "", &s.env);
  if (const Json* files = r.List(j, "files", "")) {
    for (size_t i = 0; i < files->size() && !r.error; ++i) {
      const std::string path = Cat("files[", i, "]");
      TaskSecrets::File f;
      std::string data;
      r.Str((*files)[i], "volume", path, &f.volume, true);
      r.Str((*files)[i], "path", path, &f.path, true);
      r.Str((*files)[i], "data", path, &data, true);
      if (!r.error && !absl::Base64Unescape(data, &f.data)) {
        r.Fail(Cat(path, ".data"), "must be standard base64");
      }
      s.files.push_back(std::move(f));
    }
  }
  if (const Json* auth = r.Field(j, "pullAuth", "", false)) {
    if (!auth->is_object()) {
      r.Fail("pullAuth", "must be an object");
    } else {
      s.pull_auth = auth->dump();
    }
  }
  if (absl::Status st = r.Done(); !st.ok()) return st;
  return s;
}

std::string_view TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kStarting:
      return "Starting";
    case TaskState::kRunning:
      return "Running";
    case TaskState::kSucceeded:
      return "Succeeded";
    case TaskState::kFailed:
      return "Failed";
    case TaskState::kStopped:
      return "Stopped";
    case TaskState::kLost:
      return "Lost";
  }
  return "Unknown";
}

std::string HeartbeatToJson(const Heartbeat& h) {
  Json tasks = Json::array();
  for (const TaskReport& t : h.tasks) {
    Json j{{"name", t.name},
           {"jobUid", t.job_uid},
           {"attempt", t.attempt},
           {"state", TaskStateName(t.state)},
           {"exitCode", t.exit_code},
           {"signal", t.signal},
           {"oomKilled", t.oom_killed},
           {"message", t.message}};
    if (t.checkpoint_ms) j["checkpointMs"] = t.checkpoint_ms;
    if (t.replicated_ms) j["replicatedMs"] = t.replicated_ms;
    if (t.started_ms) j["startedMs"] = t.started_ms;
    if (t.finished_ms) j["finishedMs"] = t.finished_ms;
    if (t.energy_j > 0) j["energyJ"] = t.energy_j;
    if (t.idle_ms > 0) j["idleMs"] = t.idle_ms;
    tasks.push_back(std::move(j));
  }
  Json gpus = Json::array();
  for (const GpuHealth& g : h.gpus) {
    Json j{{"index", g.index}, {"healthy", g.healthy}, {"reason", g.reason}};
    if (g.at_risk) {
      j["atRisk"] = true;
      j["risk"] = g.risk;
    }
    if (g.utilization_percent) j["utilization"] = *g.utilization_percent;
    if (g.memory_used_mib) j["memoryUsedMiB"] = *g.memory_used_mib;
    if (g.memory_total_mib) j["memoryTotalMiB"] = *g.memory_total_mib;
    gpus.push_back(std::move(j));
  }
  return Json{{"tasks", tasks}, {"gpus", gpus}}.dump();
}

namespace {

// A GPU's usage in a heartbeat: each field optional, a percentage in [0, 100], memory >= 0.
void ReadUsage(Reader& r, const Json& gpu, const std::string& path, GpuHealth* g) {
  int64_t v = 0;
  if (gpu.is_object() && gpu.contains("utilization") && !gpu["utilization"].is_null()) {
    r.Int(gpu, "utilization", path, &v);
    if (!r.error && (v < 0 || v > 100)) {
      r.Fail(path + ".utilization", Cat("must be a percentage (0 to 100), is ", v));
    }
    g->utilization_percent = static_cast<int>(v);
  }
  for (auto [key, out] : {std::pair{"memoryUsedMiB", &g->memory_used_mib},
                          std::pair{"memoryTotalMiB", &g->memory_total_mib}}) {
    if (!gpu.is_object() || !gpu.contains(key) || gpu[key].is_null()) continue;
    r.Int(gpu, key, path, &v);
    if (!r.error && v < 0) r.Fail(Cat(path, ".", key), Cat("must not be negative, is ", v));
    *out = v;
  }
}

}  // namespace

absl::StatusOr<Heartbeat> HeartbeatFromJson(const std::string& text) {
  absl::StatusOr<Json> parsed = ParseObject(text);
  if (!parsed.ok()) return parsed.status();
  Reader r;
  Heartbeat h;
  if (const Json* tasks = r.List(*parsed, "tasks", "")) {
    for (size_t i = 0; i < tasks->size() && !r.error; ++i) {
      std::string path = Cat("tasks[", i, "]");
      const Json& t = (*tasks)[i];
      TaskReport rep;
      std::string state;
      r.Str(t, "name", path, &rep.name, true);
      r.Str(t, "jobUid", path, &rep.job_uid, true);
      r.Int(t, "attempt", path, &rep.attempt, true);
      r.Str(t, "state", path, &state, true);
      r.Int(t, "exitCode", path, &rep.exit_code);
      r.Int(t, "signal", path, &rep.signal);
      r.Bool(t, "oomKilled", path, &rep.oom_killed);
      r.Str(t, "message", path, &rep.message);
      r.Int(t, "checkpointMs", path, &rep.checkpoint_ms);
      r.Int(t, "replicatedMs", path, &rep.replicated_ms);
      r.Int(t, "startedMs", path, &rep.started_ms);
      r.Int(t, "finishedMs", path, &rep.finished_ms);
      r.Amount(t, "energyJ", path, &rep.energy_j);
      r.Int(t, "idleMs", path, &rep.idle_ms);
      bool known = false;
      for (TaskState s : {TaskState::kStarting, TaskState::kRunning, TaskState::kSucceeded,
                          TaskState::kFailed, TaskState::kStopped, TaskState::kLost}) {
        if (TaskStateName(s) == state) {
          rep.state = s;
          known = true;
        }
      }
      if (!r.error && !known) r.Fail(path + ".state", Cat("unknown state \"", state, "\""));
      h.tasks.push_back(std::move(rep));
    }
  }
  if (const Json* gpus = r.List(*parsed, "gpus", "")) {
    for (size_t i = 0; i < gpus->size() && !r.error; ++i) {
      std::string path = Cat("gpus[", i, "]");
      GpuHealth g;
      r.Int((*gpus)[i], "index", path, &g.index, true);
      r.Bool((*gpus)[i], "healthy", path, &g.healthy);
      r.Str((*gpus)[i], "reason", path, &g.reason);
      r.Bool((*gpus)[i], "atRisk", path, &g.at_risk);
      r.Str((*gpus)[i], "risk", path, &g.risk);
      ReadUsage(r, (*gpus)[i], path, &g);
      h.gpus.push_back(std::move(g));
    }
  }
  if (absl::Status s = r.Done(); !s.ok()) return s;
  return h;
}

}  // namespace gpucloud::api
