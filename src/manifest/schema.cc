// The schema's data (schema.h). Each function below builds one object's fields, in the order
// the encoder prints them; descriptions follow docs/manifests.md.
#include "manifest/schema.h"

#include <algorithm>
#include <utility>

#include "core/text.h"

namespace gpucloud::manifest {

const FieldSchema* FieldSchema::Find(std::string_view key) const {
  for (const FieldSchema& f : fields) {
    if (f.name == key) return &f;
  }
  return nullptr;
}

bool FieldSchema::HasFields() const {
  if (type == FieldType::kObject) return true;
  return (type == FieldType::kArray || type == FieldType::kMap) && item_type == FieldType::kObject;
}

namespace {

using Fields = std::vector<FieldSchema>;

FieldSchema Field(std::string name, FieldType type, std::string description) {
  FieldSchema f;
  f.name = std::move(name);
  f.type = type;
  f.description = std::move(description);
  return f;
}
FieldSchema Str(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kString, std::move(d));
}
FieldSchema Int(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kInteger, std::move(d));
}
FieldSchema Num(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kNumber, std::move(d));
}
FieldSchema Bool(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kBoolean, std::move(d));
}
FieldSchema Qty(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kQuantity, std::move(d));
}
FieldSchema Dur(std::string name, std::string d) {
  return Field(std::move(name), FieldType::kDuration, std::move(d));
}
FieldSchema Enum(std::string name, std::string d, std::vector<std::string> values) {
  FieldSchema f = Str(std::move(name), std::move(d));
  f.enum_values = std::move(values);
  return f;
}
FieldSchema Obj(std::string name, std::string d, Fields fields) {
  FieldSchema f = Field(std::move(name), FieldType::kObject, std::move(d));
  f.fields = std::move(fields);
  return f;
}
// A free-form object: any keys.
FieldSchema OpenObj(std::string name, std::string d) {
  FieldSchema f = Obj(std::move(name), std::move(d), {});
  f.open = true;
  return f;
}
FieldSchema ObjList(std::string name, std::string d, Fields fields) {
  FieldSchema f = Field(std::move(name), FieldType::kArray, std::move(d));
  f.item_type = FieldType::kObject;
  f.fields = std::move(fields);
  return f;
}
FieldSchema List(std::string name, std::string d, FieldType item = FieldType::kString) {
  FieldSchema f = Field(std::move(name), FieldType::kArray, std::move(d));
  f.item_type = item;
  return f;
}
FieldSchema Map(std::string name, std::string d, FieldType item = FieldType::kString) {
  FieldSchema f = Field(std::move(name), FieldType::kMap, std::move(d));
  f.item_type = item;
  return f;
}
FieldSchema Req(FieldSchema f) {
  f.required = true;
  return f;
}
FieldSchema ReadOnly(FieldSchema f) {
  f.read_only = true;
  for (FieldSchema& c : f.fields) c = ReadOnly(std::move(c));
  return f;
}
FieldSchema Shorthand(FieldSchema f, std::string note) {
  f.shorthand = true;
  f.shorthand_note = std::move(note);
  return f;
}

// ---- shared pieces ----

FieldSchema Metadata(bool namespaced) {
  Fields f = {Req(Str("name",
                      "The object's name: a DNS label (lower-case letters, digits, '-'; "
                      "at most 63 characters).")),
              Map("labels",
                  "Key/value labels, as Kubernetes writes them; selectable with "
                  "labelSelector (gpuctl get -l)."),
              Map("annotations", "Key/value annotations (at most 256 KiB in all)."),
              ReadOnly(Str("uid", "The server's unique id of the object (ignored when written).")),
              Str("resourceVersion",
                  "The store revision it was read at; written back, an apply "
                  "is a compare-and-swap (409 when stale)."),
              ReadOnly(Str("creationTimestamp",
                           "When the server created it, RFC 3339 UTC (ignored when written).")),
              ReadOnly(Int("generation", "Accepted as Kubernetes prints it and ignored."))};
  if (namespaced) {
    f.insert(f.begin() + 1, Str("namespace",
                                "The tenant's namespace, a DNS label; default "
                                "\"default\" (a tenant's own when it writes)."));
  }
  return Req(Obj("metadata", "Standard object metadata: name, namespace, labels, annotations.",
                 std::move(f)));
}

// apiVersion and kind, first in every object.
Fields TypeFields(const std::string& kind) {
  return {Req(Enum("apiVersion", "The API version of this object: gpucloud/v1.", {"gpucloud/v1"})),
          Req(Enum("kind", Cat("The kind of this object: ", kind, "."), {kind}))};
}

FieldSchema Tolerations() {
  return ObjList(
      "tolerations", "Node taints the job accepts, as Kubernetes writes them.",
      {Str("key", "The taint key it matches (required with operator Equal)."),
       Enum("operator", "Equal (the default: key and value match) or Exists (any value).",
            {"Equal", "Exists"}),
       Str("value", "The taint value it matches (empty with Exists)."),
       Enum("effect", "The taint effect it matches; empty matches every effect.",
            {"NoSchedule", "PreferNoSchedule", "NoExecute"}),
       Int("tolerationSeconds", "Accepted as Kubernetes writes it and ignored.")});
}

FieldSchema Taints() {
  return ObjList("taints", "Taints of the pool's nodes: only jobs that tolerate them run there.",
                 {Req(Str("key", "The taint key.")), Str("value", "The taint value."),
                  Req(Enum("effect", "What the taint does to jobs that do not tolerate it.",
                           {"NoSchedule", "PreferNoSchedule", "NoExecute"}))});
}

FieldSchema BillingField(std::string what) {
  return Enum("billing", std::move(what), {"on-demand", "reserved", "spot"});
}

// ---- Job ----

FieldSchema GpuRequest() {
  FieldSchema gpu =
      Obj("gpu",
          "GPUs per replica: whole GPUs (count), MIG instances (mig) or a share of one (fraction).",
          {Qty("count",
               "Whole, exclusive GPUs per replica (0 to 1048576); with mig, instances "
               "(default 1)."),
           Str("mig", "A MIG profile such as 1g.10gb: the replica gets MIG instances of it."),
           Qty("fraction", "A share of one GPU in (0, 1], such as 0.25 (not with mig)."),
           Qty("memory",
               "With fraction: at most this much of the GPU's memory (Gi, Mi); default "
               "proportional to the fraction."),
           Enum("sharing", "With fraction: how the GPU is shared; default time-slicing.",
                {"time-slicing", "mps"}),
           Str("type",
               "One acceptable GPU type from the catalog (h100, A100-80GB, ...); not with "
               "types."),
           List("types", "Acceptable GPU types from the catalog, any of them; not with type.")});
  return Shorthand(std::move(gpu), "or a whole number of GPUs: gpu: 4");
}

FieldSchema TaskResources() {
  return Obj("resources", "What each replica of the task needs.",
             {GpuRequest(),
              Qty("cpu",
                  "CPU cores per replica: 4, 0.5 or 500m; none: scheduled as 100m, no "
                  "limit."),
              Qty("memory",
                  "Memory per replica: Ki Mi Gi Ti Pi or k M G T P (rounded up to MiB); "
                  "none: scheduled as 128Mi, no limit.")});
}

FieldSchema TaskEnv() {
  return ObjList(
      "env", "Environment variables of the task's processes (at most 4096).",
      {Req(Str("name", "The variable's name (non-empty, no '=').")),
       Str("value", "Its value (not with valueFrom)."),
       Obj("valueFrom", "Its value from a Secret of the job's namespace (not with value).",
           {Obj("secretKeyRef", "The Secret and key that hold the value.",
                {Req(Str("name", "The Secret's name.")), Req(Str("key", "The key in the Secret.")),
                 Bool("optional",
                      "When true, a missing Secret or key leaves the variable "
                      "unset instead of failing the task.")})})});
}

FieldSchema TaskEnvFrom() {
  return ObjList("envFrom", "Every key of a Secret as an environment variable.",
                 {Str("prefix", "Put before each key to make the variable's name (no '=')."),
                  Req(Obj("secretRef", "The Secret whose keys become variables.",
                          {Req(Str("name", "The Secret's name.")),
                           Bool("optional", "When true, a missing Secret is no error.")}))});
}

FieldSchema TaskVolumes() {
  return ObjList(
      "volumes", "Secrets mounted as files in the task's container (at most 64).",
      {Req(Str("name", "The volume's name, a DNS label unique in the task.")),
       Req(Str("mountPath", "An absolute, clean path in the container where its files appear.")),
       Req(Obj("secret", "The Secret whose keys become files (mode 0400, the task user's).",
               {Req(Str("secretName", "The Secret's name.")),
                ObjList("items", "Only these keys, each under its own file name.",
                        {Req(Str("key", "The key in the Secret.")),
                         Req(Str("path", "The file name (no '/', not . or ..).")),
                         Int("mode", "Accepted with a warning: files are always 0400.")}),
                Bool("optional", "When true, a missing Secret mounts nothing instead of failing."),
                Int("defaultMode", "Accepted with a warning: files are always 0400.")}))});
}

FieldSchema TaskSecurityContext() {
  return Obj(
      "securityContext", "The user and group the task's processes run as.",
      {Int("runAsUser", "The user id (0 to 2147483647)."),
       Int("runAsGroup", "The group id (0 to 2147483647)."),
       Bool("runAsNonRoot", "When true, a task that would run as root (uid 0) is refused.")});
}

Fields TaskFields() {
  return {Req(Str("name", "The task's name: a DNS label unique in the job.")),
          Int("replicas", "How many replicas of the task run (1 to 10000, default 1)."),
          Str("image", "The container image; none: a host process, where the operator allows."),
          Enum("imagePullPolicy", "When the node pulls the image; default as in Kubernetes.",
               {"Always", "IfNotPresent", "Never"}),
          TaskSecurityContext(),
          List("command", "The program and its arguments; none: the image's entrypoint."),
          List("args", "Arguments after the command (with no command, replace the image's CMD)."),
          TaskEnv(),
          TaskEnvFrom(),
          Str("workingDir", "The directory the processes start in (at most 4096 bytes)."),
          TaskResources(),
          TaskVolumes(),
          ObjList("imagePullSecrets",
                  "Registry Secrets of the job's namespace the image is "
                  "pulled with.",
                  {Req(Str("name", "The Secret's name (type kubernetes.io/dockerconfigjson)."))})};
}

FieldSchema LifecyclePolicies() {
  return ObjList(
      "policies", "What happens when a task ends: an event or an exit code, and an action.",
      {Str("event", "One event that triggers the policy (not with events or exitCode)."),
       [] {
         FieldSchema f = List("events",
                              "Events that trigger the policy (not with event or "
                              "exitCode).");
         f.enum_values = {"*",          "PodFailed",  "PodEvicted", "TaskCompleted",
                          "TaskFailed", "JobUnknown", "Unknown"};
         return f;
       }(),
       Int("exitCode", "A replica exited with this code (1 to 255); not with event or events."),
       Req(Enum(
           "action", "What to do.",
           {"RestartJob", "RestartTask", "RestartPod", "CompleteJob", "AbortJob", "TerminateJob"})),
       Str("task", "The task it watches; none: any task of the job.")});
}

FieldSchema JobArray() {
  return Obj("array", "A job array: one job NAME-INDEX per index, as Slurm's sbatch --array.",
             {Int("count", "Indices 0 to count-1 (1 to 10000); not with indices."),
              Str("indices",
                  "Slurm's list of indices and ranges such as \"1,3,5-7\" or "
                  "\"0-15:4%2\"; not with count."),
              Int("parallelism", "At most this many elements admitted at once (1 to 10000)."),
              ReadOnly(Str("name", "An element's array (the server writes it).")),
              ReadOnly(Int("index", "An element's index (the server writes it)."))});
}

FieldSchema JobSpec() {
  Fields f = {
      Str("queue", "The queue the job waits in, a DNS label; default \"default\"."),
      Int("priority", "Higher first inside a queue (-1000000 to 1000000, default 0)."),
      BillingField("The capacity it may run on; default on-demand."),
      Int("minAvailable", "The gang size: replicas that must start together (default all)."),
      Dur("runtimeEstimate", "How long it is expected to run; used by SJF ordering and backfill."),
      Map("nodeSelector", "Node labels that must match."),
      Tolerations(),
      Str("minCudaVersion", "Nodes with an older CUDA driver are not used (\"12.4\")."),
      Str("runtimeClass", "A RuntimeClass whose nodeSelector and tolerations apply."),
      Obj("checkpoint", "Where the job keeps checkpoints, and how often it writes them.",
          {Str("dir", "A directory inside <checkpoint root>/<namespace>/; default per job."),
           Dur("interval", "How often the tasks are asked for a checkpoint."),
           Bool("nodeLocal",
                "Checkpoints stay on each node's disk; a restart prefers the "
                "same nodes."),
           Bool("replicate",
                "Node-local checkpoints are also copied to the shared directory "
                "(needs nodeLocal).")}),
      Obj("restartPolicy", "How often a failed job is restarted, and how long it waits.",
          {Int("maxRestarts", "Restarts after task failures (0 to 1000, default 3)."),
           Dur("backoff", "The wait before the first restart (default 10s); it doubles.")}),
      Req(ObjList("tasks", "The job's tasks (1 to 100), each a group of identical replicas.",
                  TaskFields())),
      LifecyclePolicies(),
      JobArray(),
      Obj("ssh",
          "A fresh ssh key pair for the job's tasks (a Secret NAME-ssh, made and deleted "
          "with the job), as Volcano's ssh plugin and MPIJobs give.",
          {Str("mountPath", "Where every task finds the keys; default /root/.ssh.")}),
      Obj("interactive",
          "An interactive job (a shell, a notebook): stopped once idle, never restarted "
          "elsewhere.",
          {Dur("idleTimeout",
               "Stopped after this long without session traffic while its GPUs are under 5% "
               "busy (default 1h)."),
           Dur("maxDuration", "Stopped after running this long (default 12h; 0: no limit).")})};
  return Req(Obj("spec", "What the job runs and where it may run.", std::move(f)));
}

FieldSchema PlacementFields() {
  return ObjList(
      "placement", "Where each replica of the current attempt runs.",
      {Str("name", "The assignment's name: NAMESPACE.JOB.RANK."), Str("node", "The node."),
       Int("rank", "The replica's rank in the job."), Str("task", "The task."),
       Int("replica", "The replica's index in its task."),
       Int("cpuMilli", "CPU reserved, in thousandths of a core."),
       Int("memoryMiB", "Memory reserved, in MiB."),
       ObjList("gpus", "The GPUs (or parts of them) it holds.",
               {Int("index", "The GPU's index on the node."),
                Enum("mode", "Whole, a MIG instance or a share.", {"whole", "mig", "shared"}),
                Str("migProfile", "The MIG profile."), Int("migStart", "The MIG placement start."),
                Int("fractionMilli", "The share, in thousandths of the GPU."),
                Int("memoryMiB", "The share's memory bound, in MiB."),
                Bool("mps", "Shared through MPS.")})});
}

FieldSchema JobStatus() {
  Fields f = {
      Enum("phase", "Where the job is in its life.",
           {"Pending", "Scheduled", "Running", "Succeeded", "Failed", "Cancelled", "Preempting",
            "Restarting", "Cancelling", "Stopping"}),
      Str("next", "While stopping: the phase after its tasks stopped."),
      Int("attempt", "Attempts started so far; the current one when scheduled."),
      Int("restarts", "Restarts after a task failed (counted against restartPolicy)."),
      Int("interruptions", "Restarts after a preemption, a drain or a lost node (not counted)."),
      Str("reason", "Why, for machines: Unschedulable, Waiting, TaskFailed, NodeLost, ..."),
      Str("message", "Why, for people."),
      Int("submittedMs", "When the API accepted it, Unix milliseconds."),
      Int("notBeforeMs", "Back-off: not scheduled before this time."),
      Int("scheduledMs", "When it was scheduled."),
      Int("startedMs", "When it started running."),
      Int("finishedMs", "When it ended."),
      Int("stopDeadlineMs", "While stopping: when its tasks are killed."),
      Int("interruptedMs", "When the current interruption began."),
      Int("recoveries", "Interruptions it recovered from."),
      Int("lastRecoveryMs", "The last interruption's time to running again, ms."),
      Bool("cancelRequested", "A cancel was asked for."),
      Bool("deleteRequested", "A delete was asked for: it goes once its tasks stopped."),
      Str("checkpointDir", "The checkpoint directory the tasks are given."),
      Num("gpus", "GPU equivalents of the current placement."),
      Int("attemptStartedMs", "When the current attempt's first task ran."),
      Int("runEndedMs", "When the current attempt stopped doing useful work."),
      Int("lastCheckpointMs", "The newest complete checkpoint the agents saw."),
      Map("gpusByType", "The current placement's GPU equivalents by GPU type.", FieldType::kNumber),
      ObjList("usage",
              "GPU time of the last attempts that ended, by GPU type (fair share's window).",
              {Int("endMs", "When the attempt ended (Unix ms)."), Str("gpuType", "The GPU type."),
               Num("gpuSeconds", "GPU equivalents x seconds.")}),
      Int("lasServiceGpuMs",
          "Ordering dlas: the GPU-time (GPU x ms) this attempt's band counts from."),
      Int("lastReplicatedMs", "The newest checkpoint copied to the replica location."),
      List("checkpointNodes", "Node-local checkpoints: the node of each rank of the last attempt."),
      Num("checkpointGpus", "Node-local checkpoints: the last attempt's GPUs."),
      Obj("gpuSeconds", "GPU time over the attempts that ended (GPU equivalents x seconds).",
          {Num("allocated", "While it held GPUs."),
           Num("productive",
               "Running time whose work "
               "was kept."),
           Num("lost", "Running time redone after an interruption."),
           Num("goodput", "productive / allocated.")}),
      Int("masterPort", "The current attempt's rendezvous port on rank 0's node."),
      PlacementFields(),
      Map("tasks", "Each assignment's last reported state, by assignment name.")};
  FieldSchema status =
      ReadOnly(Obj("status", "What the server observed (read-only).", std::move(f)));
  status.open = true;  // the live usage figures the server adds as it answers
  return status;
}

KindSchema Job() {
  KindSchema k{"Job", "jobs", "job",
               {},    true,   "A gang of tasks that run together on GPUs, scheduled as one.",
               {}};
  Fields f = TypeFields("Job");
  f.push_back(Metadata(true));
  f.push_back(JobSpec());
  f.push_back(JobStatus());
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema InferenceService() {
  KindSchema k{"InferenceService",
               "inferenceservices",
               "inferenceservice",
               {"isvc", "service", "services"},
               true,
               "A model server kept at replicas between min and max, scaled on the load its "
               "gateway measures, each replica a one-task job placed by the scheduler.",
               {}};
  Fields f = TypeFields("InferenceService");
  f.push_back(Metadata(true));
  Fields tmpl = TaskFields();
  tmpl[1] = Int("replicas", "Must be 1 if given: the service's replicas are spec.replicas.");
  f.push_back(Req(Obj(
      "spec", "What runs, how many, and how the gateway treats requests.",
      {Req(Obj("template", "One replica's task, as a Job's; it listens on $PORT.",
               std::move(tmpl))),
       Str("readinessPath", "GET of it answers 2xx once a replica serves (default \"/\")."),
       Obj("replicas", "How many replicas run.",
           {Int("min", "At least (0 to 1000, default 1; 0: scale to zero when idle)."),
            Int("max", "At most (1 to 1000, default 1).")}),
       Obj("autoscaling", "What each replica should carry.",
           {Enum("metric",
                 "Requests in flight per replica, requests per second per replica, or the "
                 "95th percentile of the requests' latency in milliseconds (default "
                 "concurrency).",
                 {"concurrency", "rps", "p95Latency"}),
            Int("target", "Per replica; for p95Latency, milliseconds (default 10)."),
            Dur("stableWindow", "Averaging window for scaling (6s to 1h, default 60s)."),
            Dur("panicWindow",
                "Short window that scales up at once at twice the capacity "
                "(default 6s)."),
            Dur("scaleToZeroAfter", "With min 0: no request for this long (default 30s).")}),
       Obj("batching", "Dynamic batching of one JSON endpoint.",
           {Req(Str("path", "The batchable path: POST bodies {\"instances\": [...]}.")),
            Int("maxBatchSize", "Instances per batch (1 to 1024, default 8)."),
            Int("maxQueueDelayMs", "Longest wait for a batch to fill (0 to 10000, default 5).")}),
       Obj("rollout", "How a template change rolls.",
           {Int("maxSurge", "New replicas beyond the desired count (default 1)."),
            Int("maxUnavailable", "Ready replicas that may be missing (default 0).")}),
       Dur("requestTimeout", "The gateway's limit per request (default 60s)."),
       Int("retries", "Tries of an idempotent request on other replicas (0 to 10, default 2)."),
       Int("maxRequestBytes", "Largest request body (default 8 MiB)."),
       Str("queue", "The queue its replicas wait in (default \"default\")."),
       Int("priority", "Against training jobs in the queue: higher may preempt lower."),
       BillingField("How its GPUs are bought; default on-demand."),
       Map("nodeSelector", "Node labels its replicas must match."), Tolerations()})));
  f.push_back(ReadOnly(
      Obj("status", "The service controller's.",
          {Int("desiredReplicas", "What the autoscaler wants now."),
           Int("replicas", "Replica jobs that exist."), Int("readyReplicas", "Those that serve."),
           Str("reason", "Why the count is what it is (last scaling decision)."),
           ObjList("endpoints", "The replicas.",
                   {Str("job", "The replica's job."), Str("node", "Its node."),
                    Str("address", "host:port the gateway sends to."),
                    Bool("ready", "Its readiness check answered 2xx."),
                    Bool("current", "It runs the current template.")})})));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

// ---- cluster-wide kinds ----

KindSchema Queue() {
  KindSchema k{"Queue", "queues",
               "queue", {"q"},
               false,   "A queue jobs wait in, with its share of the cluster and its GPU quotas.",
               {}};
  FieldSchema spec =
      Req(Obj("spec", "The queue's share, ordering and quotas.",
              {Int("weight", "Its share between queues (1 to 1000, default 1)."),
               Bool("mayBorrow", "It may use idle quota of other queues (default true)."),
               Bool("mayLend", "Other queues may use its idle quota (default true)."),
               Enum("ordering", "The order its jobs are tried in; default fifo.",
                    {"fifo", "sjf", "las", "dlas"}),
               ObjList("quota", "GPU quotas, one per GPU type.",
                       {Req(Str("gpuType", "One catalog type, or \"*\" for all types together.")),
                        Qty("guaranteed", "GPUs it is guaranteed (8, 2.5)."),
                        Qty("max", "GPUs it may use at most (>= guaranteed).")})}));
  Fields f = TypeFields("Queue");
  f.push_back(Metadata(false));
  f.push_back(std::move(spec));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema NodePool() {
  KindSchema k{"NodePool", "nodepools",
               "nodepool", {"np"},
               false,      "A pool of like nodes: one GPU type, a size range, a price.",
               {}};
  FieldSchema spec = Req(
      Obj("spec", "The pool's nodes.",
          {Req(Str("gpuType", "The nodes' GPU type: exactly one catalog type.")),
           Int("gpusPerNode", "GPUs per node (1 to 64, default 8)."),
           Int("minNodes", "Nodes it keeps (default 0)."),
           Int("maxNodes", "Nodes it may grow to (>= minNodes; default max(minNodes, 1))."),
           BillingField("How its nodes are bought; default on-demand."),
           Qty("pricePerGpuHour", "US dollars per GPU hour (\"0.60\"); default from the catalog."),
           Str("provider", "Where the nodes come from; default \"static\"."),
           Map("labels", "Labels of its nodes."), Taints(),
           ObjList("priceSchedule",
                   "Prices over time (a spot price feed): contiguous periods, the last may be "
                   "open-ended; outside them pricePerGpuHour holds.",
                   {Req(Str("from", "Start, RFC 3339.")),
                    Str("until", "End, RFC 3339 (the next period's from)."),
                    Req(Qty("pricePerGpuHour", "US dollars per GPU hour in the period."))}),
           Int("carbonIntensity",
               "Grid carbon intensity where its nodes run, gCO2e/kWh (0 to 2000; default the "
               "server's --carbon-intensity).")}));
  Fields f = TypeFields("NodePool");
  f.push_back(Metadata(false));
  f.push_back(std::move(spec));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema RuntimeClass() {
  KindSchema k{"RuntimeClass",
               "runtimeclasses",
               "runtimeclass",
               {},
               false,
               "A named node selector and tolerations that jobs take by naming it.",
               {}};
  Fields f = TypeFields("RuntimeClass");
  f[0].enum_values.push_back("node.k8s.io/v1");
  f[0].description = "The API version of this object: gpucloud/v1 (or node.k8s.io/v1).";
  f.push_back(Metadata(false));
  f.push_back(Req(Str("handler", "The container runtime handler, as Kubernetes names it.")));
  f.push_back(Obj("scheduling", "Where jobs naming the class may run.",
                  {Map("nodeSelector", "Node labels a job naming it must match."), Tolerations()}));
  FieldSchema overhead = OpenObj("overhead", "Accepted with a warning: not accounted.");
  f.push_back(std::move(overhead));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema SchedulerConfiguration() {
  KindSchema k{"SchedulerConfiguration",
               "",
               "schedulerconfiguration",
               {},
               false,
               "The scheduler's profile (gpucloud server --scheduler-config).",
               {}};
  FieldSchema plugins =
      Obj("plugins", "The scheduler's plugins: filters, and scores with weights.",
          {List("filter", "Filter plugins, in order; omitted: the defaults."),
           ObjList("score", "Score plugins with weights; an empty list turns scoring off.",
                   {Req(Str("name", "The plugin's name.")), Int("weight", "Its weight (0 to 100)."),
                    ObjList("workload", "The expected workload: requests and how often they come.",
                            {Req(Qty("gpus", "GPUs per replica (1, 8, 0.5).")),
                             Req(Qty("weight", "Its relative frequency (93.2)."))})})});
  FieldSchema spec = Req(Obj(
      "spec", "The scheduler's policy.",
      {Enum("ordering", "The order jobs are tried in; default fifo.",
            {"fifo", "sjf", "las", "dlas"}),
       Bool("backfill", "Smaller jobs may start ahead of a waiting gang that they do not delay."),
       Bool("estimateStartTimes", "Estimate when waiting jobs start."),
       Obj("fairShare", "Order by recent usage.",
           {Bool("enabled", "Turn it on."), Dur("window", "How far back usage counts.")}),
       Obj("preemption", "Lower priority jobs may be stopped for higher ones.",
           {Bool("enabled", "Turn it on."),
            Dur("gracePeriod", "How long a preempted job may take to stop.")}),
       std::move(plugins),
       Obj("namespaceBudget", "Bounds on one namespace's work per scheduling cycle (0: none).",
           {Int("maxWaiting", "Jobs of one namespace considered per cycle."),
            Int("maxSearches", "Placement searches for one namespace per cycle.")}),
       Obj("las", "Ordering dlas: bands of attained GPU-time (Tiresias).",
           {List("thresholds", "GPU-time where each band ends, ascending (16h).",
                 FieldType::kDuration),
            Num("starvationFactor",
                "Promote a job that waited this many times its service to the first band; 0: "
                "off.")})}));
  Fields f = TypeFields("SchedulerConfiguration");
  f.push_back(Metadata(false));
  f.push_back(std::move(spec));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema Node() {
  KindSchema k{
      "Node", "nodes", "node", {"no"}, false, "A machine with GPUs, registered by its agent.", {}};
  FieldSchema gpus = ObjList(
      "gpus", "The node's GPUs and their live health.",
      {Int("index", "The GPU's index."), Str("uuid", "Its UUID."), Str("type", "Its catalog type."),
       Int("memoryMiB", "Its memory."), Str("pciBusId", "Its PCI bus id."),
       Bool("migEnabled", "MIG mode is on."), Int("nvlinkIsland", "Its NVLink island."),
       Bool("healthy", "It takes work."), Str("reason", "Why it is not healthy."),
       Bool("atRisk", "Healthy, but it takes no new work."), Str("risk", "Why it is at risk."),
       ObjList("migLayout", "Its MIG instances.",
               {Str("profile", "The profile."), Int("start", "The placement start.")})});
  gpus.open = true;
  FieldSchema status = ReadOnly(
      Obj("status", "What the agent reported (read-only for users).",
          {Str("address", "Where the agent listens."), Str("hostname", "The machine's host name."),
           Int("cpuMilli", "CPU, thousandths of a core."), Int("memoryMiB", "Memory, MiB."),
           Int("maxTasks", "Tasks it runs at most."), Str("backend", "nvml or simulated."),
           Str("driverVersion", "The NVIDIA driver."),
           Int("cudaVersion",
               "The CUDA version, "
               "1000*major+10*minor."),
           std::move(gpus),
           List("gpuTopology",
                "The GPUs' interconnect matrix (rows of strings), as "
                "nvidia-smi topo prints it.",
                FieldType::kArray),
           Int("lastHeartbeatMs", "The agent's last heartbeat, Unix ms.")}));
  status.open = true;
  Fields f = TypeFields("Node");
  f.push_back(Metadata(false));
  f.push_back(Obj("spec", "What the cluster decides about the node.",
                  {Str("pool", "The node pool it belongs to."),
                   Bool("unschedulable", "Cordoned: it takes no new work.")}));
  f.push_back(std::move(status));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema Secret() {
  KindSchema k{"Secret", "secrets",
               "secret", {},
               true,     "Values a job's tasks read as variables or files; sealed, never answered.",
               {}};
  Fields f = TypeFields("Secret");
  f.push_back(Metadata(true));
  f.push_back(Enum("type", "Opaque (the default) or a registry login (.dockerconfigjson).",
                   {"Opaque", "kubernetes.io/dockerconfigjson"}));
  f.push_back(Map("data", "Values by key, base64-encoded (written only, never answered)."));
  f.push_back(Map("stringData", "Values by key, as text (written only, never answered)."));
  f.push_back(Bool("immutable", "Accepted when false: gpucloud's Secrets are not immutable."));
  f.push_back(ReadOnly(Obj("status", "What the server keeps of the values (read-only).",
                           {Map("data", "Each key's size in bytes.", FieldType::kInteger)})));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

// User, Group and ServiceAccount: a spec of names.
KindSchema Identity(std::string kind, std::string resource, std::string singular,
                    std::vector<std::string> short_names, bool namespaced, std::string description,
                    Fields spec) {
  KindSchema k{kind,
               std::move(resource),
               std::move(singular),
               std::move(short_names),
               namespaced,
               std::move(description),
               {}};
  Fields f = TypeFields(kind);
  f.push_back(Metadata(namespaced));
  f.push_back(
      Obj("spec", "Its policies (and a user's groups and home namespace).", std::move(spec)));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

FieldSchema PoliciesField() {
  return List("policies",
              "Policies attached: stored ones by name, or gpucloud:admin, "
              "gpucloud:tenant, gpucloud:node.");
}

KindSchema Policy() {
  KindSchema k{"Policy", "policies",
               "policy", {},
               false,    "An IAM policy: statements that allow or deny actions on resources.",
               {}};
  FieldSchema statement =
      ObjList("Statement", "The statements (1 or more); one statement may be written alone.",
              {Str("Sid", "The statement's id: letters, digits, - and _ (at most 128)."),
               Req(Enum("Effect", "Whether it allows or denies.", {"Allow", "Deny"})),
               Shorthand(List("Action",
                              "Actions it covers, such as jobs:Create or jobs:*; not "
                              "with NotAction."),
                         "or one action as a string"),
               Shorthand(List("NotAction", "Every action but these; not with Action."),
                         "or one action as a string"),
               Shorthand(List("Resource",
                              "Resources it covers, such as gpucloud:job/team-a/*; "
                              "not with NotResource."),
                         "or one resource as a string"),
               Shorthand(List("NotResource", "Every resource but these; not with Resource."),
                         "or one resource as a string"),
               OpenObj("Condition", "Operator -> condition key -> values, as IAM writes them.")});
  statement = Shorthand(std::move(statement), "or one statement object");
  Fields f = TypeFields("Policy");
  f.push_back(Metadata(false));
  f.push_back(
      Req(Obj("spec", "The IAM policy document.",
              {Enum("Version", "The policy language version.", {"2012-10-17"}),
               Str("Id", "Accepted as AWS writes it and ignored."), Req(std::move(statement))})));
  f.push_back(ReadOnly(OpenObj("status", "Accepted when written and ignored.")));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema Token() {
  KindSchema k{"Token", "tokens",
               "token", {},
               false,   "A bearer token of a user or service account (its secret shown once).",
               {}};
  Fields f = TypeFields("Token");
  f.push_back(Metadata(false));
  f.push_back(ReadOnly(
      Obj("spec", "Whose token it is and until when (the server's).",
          {Str("user", "The user it authenticates."),
           Str("serviceAccount", "The service account it authenticates, NS/NAME."),
           Str("expiresAt", "When it expires, RFC 3339 UTC."),
           Int("expiresAtMs", "When it expires, Unix ms."), Str("createdBy", "Who created it.")})));
  f.push_back(ReadOnly(Obj("status", "The secret, in the create's answer only.",
                           {Str("token", "The bearer token itself.")})));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

KindSchema NamespaceKind() {
  KindSchema k{
      "Namespace", "namespaces",
      "namespace", {"ns"},
      false,       "A tenant's namespace: its jobs, secrets and service accounts live in it.",
      {}};
  Fields f = TypeFields("Namespace");
  f.push_back(Metadata(false));
  f.push_back(Obj("spec", "Who owns it.",
                  {Str("owner", "The user who owns it (a user's home is owned by the user)."),
                   List("finalizers", "Accepted as Kubernetes writes them; not acted on.")}));
  f.push_back(ReadOnly(
      Obj("status", "The server's.", {Enum("phase", "Active while it exists.", {"Active"})})));
  k.object = Obj("", k.description, std::move(f));
  return k;
}

std::vector<KindSchema> Build() {
  std::vector<KindSchema> out;
  out.push_back(Job());
  out.push_back(InferenceService());
  out.push_back(Queue());
  out.push_back(NodePool());
  out.push_back(RuntimeClass());
  out.push_back(Node());
  out.push_back(Secret());
  out.push_back(Identity("ServiceAccount", "serviceaccounts", "serviceaccount", {"sa"}, true,
                         "An identity for programs, in a namespace; its tokens act as it.",
                         {PoliciesField()}));
  out.push_back(NamespaceKind());
  out.push_back(Identity("User", "users", "user", {}, false, "A person who uses the API.",
                         {List("groups", "The groups it belongs to."), PoliciesField(),
                          Str("namespace", "Its home namespace (a tenant's).")}));
  out.push_back(Identity("Group", "groups", "group", {}, false, "Users that share policies.",
                         {PoliciesField()}));
  out.push_back(Policy());
  out.push_back(Token());
  out.push_back(SchedulerConfiguration());
  return out;
}

}  // namespace

const std::vector<KindSchema>& ApiSchema() {
  static const std::vector<KindSchema>* const kSchema = new std::vector<KindSchema>(Build());
  return *kSchema;
}

const KindSchema* FindKindSchema(std::string_view name) {
  std::string n = ToLower(name);
  if (n.ends_with(".gpucloud")) n.resize(n.size() - std::string_view(".gpucloud").size());
  for (const KindSchema& k : ApiSchema()) {
    if (n == ToLower(k.kind) || (!k.resource.empty() && n == k.resource) || n == k.singular ||
        std::find(k.short_names.begin(), k.short_names.end(), n) != k.short_names.end()) {
      return &k;
    }
  }
  return nullptr;
}

absl::StatusOr<const FieldSchema*> FindFieldSchema(const KindSchema& kind,
                                                   std::span<const std::string> path) {
  const FieldSchema* at = &kind.object;
  std::vector<std::string> walked;
  for (const std::string& key : path) {
    const FieldSchema* next = at->HasFields() ? at->Find(key) : nullptr;
    if (next == nullptr) {
      return absl::NotFoundError(
          Cat("field \"", key, "\" does not exist in ",
              walked.empty() ? kind.kind : Cat(kind.kind, ".", Join(walked, "."))));
    }
    walked.push_back(key);
    at = next;
  }
  return at;
}

namespace {

std::string_view ScalarLabel(FieldType t) {
  switch (t) {
    case FieldType::kString:
      return "string";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBoolean:
      return "boolean";
    case FieldType::kQuantity:
      return "Quantity";
    case FieldType::kDuration:
      return "Duration";
    case FieldType::kObject:
    case FieldType::kArray:
    case FieldType::kMap:
      return "Object";
  }
  return "Object";
}

}  // namespace

std::string TypeLabel(const FieldSchema& field) {
  switch (field.type) {
    case FieldType::kArray:
      return Cat("[]", ScalarLabel(field.item_type));
    case FieldType::kMap:
      return Cat("map[string]", ScalarLabel(field.item_type));
    default:
      return std::string(ScalarLabel(field.type));
  }
}

}  // namespace gpucloud::manifest
