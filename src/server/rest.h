// RestApi: the control plane's REST resources over the store, independent of the transport
// (the HTTPS server hands it parsed requests; tests call it directly). Kubernetes-style paths:
//   /apis/gpucloud/v1/namespaces/{ns}/jobs[/{name}]      Jobs (namespaced)
//   /apis/gpucloud/v1/queues[/{name}]                     Queues (cluster-wide)
//   /apis/gpucloud/v1/nodepools[/{name}]                  NodePools (cluster-wide)
//   /apis/gpucloud/v1/runtimeclasses[/{name}]             RuntimeClasses (cluster-wide); a job
//                                        naming one gets its node selector and tolerations
//   /apis/gpucloud/v1/nodes[/{name}]                      Nodes, registered by their agents
//   /apis/gpucloud/v1/users|groups|policies|tokens[/{name}], namespaces/{ns}/serviceaccounts,
//     whoami, authorize                                   identities (rest_iam.cc)
//   /apis/gpucloud/v1/namespaces/{ns}/inferenceservices[/{name}]   InferenceServices: a
//                                        create or update is also decided as jobs:Create of a
//                                        replica (services.h makes their jobs)
//   /apis/gpucloud/v1/namespaces/{ns}/secrets[/{name}]    Secrets, values never answered
//   /apis/gpucloud/v1/namespaces[/{name}]                 Namespaces (cluster-wide): a create
//                                        or replace in a namespace needs its object
//   /apis/gpucloud/v1/audit/records|digests|key|verify|anomalies   the audit log (rest_audit.cc)
//   /api, /apis, /apis/gpucloud, /apis/gpucloud/v1, /version   discovery (rest_discovery.cc),
//                                        for every authenticated identity
//   /openapi/v2, /openapi/v3, /openapi/v3/apis/gpucloud/v1   the OpenAPI documents (openapi.h),
//                                        likewise
// and sub-resources (rest_cluster.cc):
//   GET  .../jobs/{name}/status          the job; writes of it are 405 (the controller's)
//   POST .../jobs/{name}/cancel          stop the job's tasks (grace period), keep the job
//   GET  .../jobs/{name}/events          what happened to the job and why
//   GET  .../jobs/{name}/logs?rank=R&attempt=A&offset=O[&follow=true][&tailLines=N]
//        [&previous=true]                a task's output (X-Gpucloud-Offset: where it goes on)
//   POST .../jobs/{name}/logs?rank=R&attempt=A&offset=O                 (agents) ship output
//   POST nodes/{name}/heartbeat          (agents) task reports and GPU health, once a second
//   GET  nodes/{name}/assignments[?watch=true&resourceVersion=R]        (agents) what to run
//   POST nodes/{name}/cordon|uncordon|drain                             (admins)
//   POST nodes/{name}/certificate        (bootstrap token, the node, admins) a PEM CSR for
//                                        "node:NAME" in, the signed client certificate out
//   GET  .../jobs/{name}/exec?rank=R&command=JSON[&tty=true][&stdin=true],
//   GET  .../jobs/{name}/portforward?rank=R&port=P    a WebSocket into a running task
//                                        (rest_sessions.cc decides; session_relay.h relays)
//   GET  nodes/{name}/tunnel, nodes/{name}/sessions/{id}   (the node) its sessions' WebSockets
// DELETE of a job whose tasks run cancels it first (202) and removes it once they stopped.
// POST on a collection creates (409 if it exists); PUT on an item applies (creates or updates;
// with metadata.resourceVersion it is a compare-and-swap, 409 when stale; applying what is
// already stored writes nothing); GET reads an item or lists a collection (labelSelector=k=v,
// k!=v, k; limit/continue page it: rest_paging.h); GET with watch=true&resourceVersion=R returns
// the changes after R as newline-delimited JSON events (ADDED, MODIFIED, DELETED), or 410 when R
// was compacted (without resourceVersion, or with 0, it starts from the current state: an ADDED
// event per object; a future R is 504 after a short wait; one batch holds at most kMaxWatchBatch
// events); DELETE removes (optionally ?resourceVersion=R). PATCH (rest_patch.cc) applies a JSON
// merge patch to the stored object and serves the result as its PUT; other patch types are 415.
// dryRun=All on POST, PUT, PATCH and DELETE: authorized and validated alike, nothing written,
// the would-be object answered. Bodies are YAML or JSON manifests, validated
// like `gpuctl validate`; a bad one gets 422 naming the field and line, and nothing is written.
// A query parameter a path does not implement (fieldSelector, sinceTime, ...) is refused
// with 400 naming it, never ignored; booleans (watch, follow, previous, ...) read as
// Kubernetes reads them: true/True/TRUE/1, false/False/FALSE/0, anything else 400. Every path
// segment is a DNS label, once percent-decoded ("%2F" stays encoded, so it is none): an empty
// segment, "..", a name holding '/', '?' or NUL are 400, never another object's path.
// Errors are Kubernetes Status objects. Every request is first decided by its identity's
// policies (authorizer.h: a 403 names the action, resource and statement); the built-in ones
// keep a tenant in its own namespace, cluster-wide objects for admins, a node to itself. A 2xx
// answer to a write means the store committed it to disk.
// Thread-safe (the store is; the uid generator is guarded).
#ifndef GPUCLOUD_SERVER_REST_H_
#define GPUCLOUD_SERVER_REST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "server/namespace_provisioning.h"
#include "store/store.h"

namespace gpucloud {
struct Job;
}  // namespace gpucloud
namespace gpucloud::manifest {
struct ParseResult;
}  // namespace gpucloud::manifest

namespace gpucloud::server {

class AuditLog;
class Authorizer;
class IdentityBook;
struct IamKind;
class LogStore;
struct LogKey;
class NodeCertificates;
class NodeTable;
class SecretStore;

struct Identity {
  std::string user;
  std::string namespace_;  // the tenant's namespace; ignored for admins
  bool admin = false;
  // A node (its agent's client certificate): its own node object, heartbeats, assignments, and
  // logs of the tasks placed on it (NodeRestriction); `node_name` says which node.
  bool node = false;
  std::string node_name;
  // An agent's bootstrap token: it may only ask for a node certificate (NodeCertificates).
  bool bootstrap = false;
  std::string token_name;  // the bearer token's name, for the audit log ("" for certificates)
  std::vector<std::string> groups;
  // The policies that decide what it may do (authorizer.h), by name. nullopt: its role's
  // built-in policy (gpucloud:admin for an admin, gpucloud:node for a node, gpucloud:tenant
  // for a user with a namespace; none otherwise).
  std::optional<std::vector<std::string>> policies;
};

struct Request {
  std::string method;  // "GET", "POST", "PUT", "PATCH", "DELETE"
  std::string path;
  std::map<std::string, std::string> query;
  std::string body;
  Identity who;
  // The Content-Type header (PATCH reads it: only application/merge-patch+json is served).
  std::string content_type;
  // The body read as manifests, once: authorization reads a job's write before its handler
  // stores it (RestApi's; not for callers to set).
  mutable std::shared_ptr<const manifest::ParseResult> parsed_body;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  bool more = false;  // a followed log: more may come (the job has not ended)
  // A watch batch: every change under the watched prefix up to this revision is in it, so the
  // next batch asks for the changes after it.
  int64_t revision = 0;
  std::string watch_prefix;                    // a watch batch: the store prefix watched
  std::map<std::string, std::string> headers;  // extra response headers
  // What authorization decided, for the audit log: the action ("jobs:Create"), the resource
  // ("gpucloud:job/team-a/train"), "allow" or "deny", and the statement that decided.
  struct Authorization {
    std::string action, resource, decision, reason;
  } authorization;
};

inline constexpr size_t kMaxBodyBytes = 1 << 20;
inline constexpr int kMaxWatchBatch = 1000;

class RestApi {
 public:
  // Borrows `store` and `clock`. `uid_seed` seeds object uids (tests fix it).
  RestApi(store::Store& store, const Clock& clock, uint64_t uid_seed);
  ~RestApi();
  // Authorizes `request` (authorizer.h: a 403 names the action, resource and statement) and
  // serves it.
  Response Handle(const Request& request);
  Authorizer& authorizer() { return *authorizer_; }
  // The cluster half: heartbeats go to `nodes`, logs to `logs`, and `kick` wakes the controller
  // when something it must act on arrived; `summary` answers GET .../cluster (availability,
  // goodput, recoveries: JSON). Without it, those paths answer 404.
  void AttachCluster(NodeTable* nodes, LogStore* logs, std::function<void()> kick,
                     std::function<std::string()> summary = nullptr);
  // Several servers on one etcd: `leads` says whether this server leads now. Only the leader's
  // controller reads heartbeats (NodeTable is in memory, and acknowledges what a pass read), so
  // a standby answers a heartbeat 503 NotLeader naming the leader, and the agent moves on to the
  // next server it knows (api::Client). Without it (SQLite: one server), every heartbeat is
  // taken. Set before serving.
  void SetLeadership(std::function<bool()> leads) { leads_ = std::move(leads); }
  // Jobs one namespace may hold (an operator's object quota; 0: no limit). A create over it is
  // 403 QuotaExceeded and writes nothing. Counted before the write, so creates racing at the
  // limit may pass it by the number in flight. Set before serving.
  void SetMaxJobsPerNamespace(int64_t max) { max_jobs_per_namespace_ = max; }
  // The controller's checkpoint root (--checkpoint-root): a job whose spec.checkpoint.dir does
  // not resolve inside <root>/<namespace>/ (ResolveCheckpointDir) is refused with 422 Invalid
  // when it is created or applied. Empty (the default): not checked here, and the controller
  // fails such a job when it binds it. Set before serving.
  void SetCheckpointRoot(std::string root) { checkpoint_root_ = std::move(root); }
  // Where nodes' certificates are signed and recorded (POST nodes/{name}/certificate; a
  // node's delete revokes them). Without it, that path answers 404. Set before serving.
  void AttachNodeCertificates(NodeCertificates* certs) { node_certs_ = certs; }
  // The audit log, read through GET audit/records|digests|key (rest_audit.cc). Without it,
  // those paths answer 404. Set before serving.
  void AttachAudit(AuditLog* audit) { audit_ = audit; }
  // Users, groups, service accounts, policies and tokens (identity_book.h); without it their
  // paths answer 404. Set before serving.
  void AttachIdentities(IdentityBook* identities) { identities_ = identities; }
  // Secrets (namespaces/{ns}/secrets[/{name}], rest_secrets.cc; values sealed by `secrets`,
  // never answered); without it those paths answer 404. Set before serving.
  void AttachSecrets(SecretStore* secrets) { secrets_ = secrets; }
  // See NamespaceProvisioning. Set before serving.
  void SetNamespaceProvisioning(NamespaceProvisioning p) { namespace_provisioning_ = p; }
  // POST .../jobs?dryRun=All&whatIf=true: `what_if` says what the scheduler would do with the
  // job now (Controller::WhatIf as JSON), answered as the would-be job's status.whatIf; its
  // errors are the request's (a standby's Unavailable, a slow pass's DeadlineExceeded). Without
  // it, such a request is 503. Set before serving.
  using WhatIfFn =
      std::function<absl::StatusOr<nlohmann::json>(const std::string& ns, const Job& job)>;
  void SetWhatIf(WhatIfFn what_if) { what_if_ = std::move(what_if); }
  // The currency of Namespace budgets (spec.budget.currency must name it); "USD" by default.
  void SetCurrency(std::string currency) { currency_ = std::move(currency); }
  // The start-up migration (rest_namespaces.cc): every namespace that holds jobs, secrets or
  // service accounts, or is a user's home, and `default`, gets its Namespace object (a user's
  // home owned by the user), in one transaction. Returns how many it made; the store's errors.
  // Call before serving, after the identities' own migration.
  absl::StatusOr<int> EnsureNamespaces();

 private:
  struct Route;
  Response Dispatch(const Request& r, const std::vector<std::string>& parts);
  // rest_patch.cc: PATCH of jobs, queues, nodepools and runtimeclasses (a JSON merge patch).
  Response Patch(const Request& r, const std::vector<std::string>& parts);
  // rest_discovery.cc: GET /api, /apis, /apis/gpucloud, /apis/gpucloud/v1, /version.
  Response Discovery(const Request& r);
  Response HandleObjects(const Request& r, const Route& route);  // jobs, queues, nodepools
  Response Create(const Request& r, const Route& route);
  Response Apply(const Request& r, const Route& route);
  Response Read(const Request& r, const Route& route);
  Response List(const Request& r, const Route& route);
  // A list of the objects under `prefix` (labelSelector, limit/continue: rest_paging.h).
  Response ListObjects(const Request& r, const std::string& prefix, std::string_view kind);
  Response Watch(const Request& r, const std::string& prefix);
  Response Delete(const Request& r, const Route& route);
  // The stored object as answered: its revision, and a node's live GPU health (NodeTable).
  nlohmann::ordered_json Present(const store::KeyValue& kv) const;
  // rest_cluster.cc
  Response HandleNodes(const Request& r, const std::vector<std::string>& parts);
  Response RegisterNode(const Request& r, const std::string& name);
  Response Heartbeat(const Request& r, const std::string& name);
  Response SetNodeFlags(const Request& r, const std::string& name, const std::string& verb);
  Response DeleteNode(const Request& r, const std::string& name);
  Response IssueNodeCertificate(const Request& r, const std::string& name);
  // GET nodes/{node}/assignments/{name}/secrets: the values the assignment's secret references
  // resolve to (task_secrets.h), for that node's own certificate only; never audited or cached.
  Response TaskSecretsFor(const Request& r, const std::string& node, const std::string& name);
  Response ReclaimPool(const Request& r, const std::string& pool);
  // POST pools/{pool}/prepull?image=REF: every node of the pool pulls the image ahead of its
  // tasks (spec.prePull, durable, the newest kPrePullKept; told to agents with heartbeats).
  Response PrePullPool(const Request& r, const std::string& pool);
  // rest_iam.cc: users, groups, policies, tokens, whoami, authorize,
  // namespaces/{ns}/serviceaccounts.
  static bool IsIamPath(const std::vector<std::string>& parts);
  Response HandleIam(const Request& r, const std::vector<std::string>& parts);
  Response HandleIamObjects(const Request& r, const IamKind& kind, const std::string& prefix,
                            const std::string& name);
  Response PutIamObject(const std::string& key, const std::string& doc, bool create);
  // The server's metadata of a write of `doc` over `current` (NotFound: a create): uid and
  // creationTimestamp kept from `current` or made; a metadata.resourceVersion becomes `expect`
  // (and leaves the body). The 422 of a resourceVersion that is not a revision number.
  std::optional<Response> StampMetadata(nlohmann::ordered_json& doc,
                                        const absl::StatusOr<store::KeyValue>& current,
                                        std::optional<int64_t>& expect);
  // The 403 of a write of the identity at `key` that attaches (or detaches) a policy the caller
  // may not policies:Attach (policies:Detach); nullopt when it may.
  std::optional<Response> AuthorizeAttachments(const Request& r, const std::string& key,
                                               const nlohmann::ordered_json& doc);
  Response HandlePolicies(const Request& r, const std::string& name);
  Response HandleTokens(const Request& r, const std::string& name);
  Response CreateToken(const Request& r);
  Response WhoAmI(const Request& r);
  Response AuthorizeFor(const Request& r);
  // rest_namespaces.cc: namespaces[/{name}] (cluster-scoped; deleting one that still holds
  // objects is 409, `default` 403). RequireNamespace: under kExplicit, the 404 of a write into
  // namespace `ns` when it has no object (nullopt when it has, and under the other modes).
  // ProvisionNamespace: under kAuto, after a write into `ns` succeeded, makes its object if it
  // has none (a failure is logged: the next start's migration makes it).
  Response HandleNamespaces(const Request& r, const std::string& name);
  // GET namespaces/{ns}/events: the namespace's own events (its budget's alerts).
  Response NamespaceEvents(const Request& r, const std::string& ns);
  Response PutNamespace(const std::string& key, nlohmann::ordered_json doc, bool create);
  Response DeleteNamespace(const std::string& name);
  std::optional<Response> RequireNamespace(const std::string& ns);
  void ProvisionNamespace(const Request& r, const std::string& ns);
  // rest_usage.cc: GET namespaces/{ns}/usage and GET usage (`ns` empty): usage records.
  Response HandleUsage(const Request& r, const std::string& ns);
  // rest_secrets.cc: namespaces/{ns}/secrets[/{name}].
  Response HandleSecrets(const Request& r, const std::vector<std::string>& parts);
  Response PutSecret(const Request& r, const std::string& ns, const std::string& path_name);
  // rest_audit.cc: GET audit/records, audit/digests, audit/key.
  Response HandleAudit(const Request& r, const std::vector<std::string>& parts);
  Response HandleJobSub(const Request& r, const Route& route, const std::string& sub);
  Response Cancel(const Request& r, const Route& route, bool and_delete);
  // rest_array.cc: a job array's elements created in one transaction (`request` asks for the
  // array; `apply`: a PUT, answered 200 Unchanged when every element is already as asked), and a
  // cancel or delete of every element of the array `route.name` in one (nullopt when it has no
  // elements).
  Response CreateArray(const Request& r, const Route& route, const Job& request,
                       const std::string& warning, bool apply);
  std::optional<Response> CancelArray(const Request& r, const Route& route, bool and_delete);
  Response Logs(const Request& r, const Route& route);
  // rest_sessions.cc: GET .../jobs/{name}/exec|portforward: where the session goes, as JSON
  // {"node", "request": api::SessionRequest}: 400 naming a bad parameter, 404 for a job or rank
  // that does not exist, 409 for a task that is not running. The HTTPS front upgrades the
  // connection to a WebSocket and relays the session when this answers 200.
  Response SessionTarget(const Request& r, const Route& route, const std::string& sub);
  // GET nodes/{node}/tunnel and nodes/{node}/sessions/{id} (`id` "" for the tunnel): 200 for
  // that node's own certificate, 403 for anyone else.
  Response AgentSession(const Request& r, const std::string& node, const std::string& id);
  struct LogQuery {
    std::optional<int64_t> rank, attempt, offset, limit, tail_lines, since_seconds, time_ms;
    bool timestamps = false;
  };
  Response ReadLog(const LogKey& key, const LogQuery& q);
  // Where a read of sinceSeconds starts: the first line of the log whose time is since then.
  int64_t SinceStart(const LogKey& key, int64_t cutoff_ms) const;
  std::string NewUid();

  store::Store& store_;
  const Clock& clock_;
  absl::Mutex mu_;
  Rng rng_;
  NodeTable* nodes_ = nullptr;
  LogStore* logs_ = nullptr;
  NodeCertificates* node_certs_ = nullptr;
  AuditLog* audit_ = nullptr;
  IdentityBook* identities_ = nullptr;
  SecretStore* secrets_ = nullptr;
  std::unique_ptr<Authorizer> authorizer_;
  std::function<void()> kick_;
  std::function<bool()> leads_;
  std::function<std::string()> summary_;
  WhatIfFn what_if_;
  int64_t max_jobs_per_namespace_ = 10'000;
  std::string checkpoint_root_;
  NamespaceProvisioning namespace_provisioning_ = NamespaceProvisioning::kUnchecked;
  std::string currency_ = "USD";
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_H_
