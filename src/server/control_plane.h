// ControlPlane: everything `gpucloud server` runs, wired together — credentials, the store
// (SQLite in DATA_DIR, or etcd), the REST API, the controller loop (nodes, jobs, scheduler), the
// log store and the HTTPS server. `gpucloud server` and `gpucloud up` both start one. Start returns
// once it listens. Thread-safe to Stop from any thread; not copyable.
#ifndef GPUCLOUD_SERVER_CONTROL_PLANE_H_
#define GPUCLOUD_SERVER_CONTROL_PLANE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/node_pool.h"
#include "core/quantity.h"
#include "core/sched_config.h"
#include "server/anomaly.h"
#include "server/audit_log.h"
#include "server/compactor.h"
#include "server/namespace_provisioning.h"
#include "store/etcd_tls.h"

namespace gpucloud::server {

// Where the store is (ControlPlaneOptions::store, `--store`), parsed.
struct StoreLocation {
  enum class Kind { kSqlite, kEtcd };
  Kind kind = Kind::kSqlite;
  bool tls = false;                      // kEtcd: etcds://, TLS to every member
  std::string endpoints;                 // kEtcd: "host:port[,host:port...]"
  std::string key_prefix = "/gpucloud";  // kEtcd: every key of the server is under it
};

// "" or "sqlite": DATA_DIR/store.db. "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]": the etcd
// cluster with those members' client URLs (plain HTTP), the server's keys under PREFIX
// (default /gpucloud), so several control planes can share one etcd. "etcds://...": the same
// over TLS 1.3 to every member (--etcd-ca, EtcdTlsFromFlags). InvalidArgument naming --store
// and the value for anything else (no member, a bad port, an unknown scheme).
absl::StatusOr<StoreLocation> ParseStoreUrl(const std::string& url);

struct ControlPlaneOptions;

// The TLS to etcd that `o`'s --etcd-ca, --etcd-cert and --etcd-key give the store `where`, its
// files read and checked. InvalidArgument naming the flag: one given with a store that is not
// etcds://, no --etcd-ca with one that is, --etcd-cert without --etcd-key or the reverse, a
// file that is missing, unreadable or not PEM, a key that is not the certificate's.
absl::StatusOr<store::EtcdTlsOptions> EtcdTlsFromFlags(const StoreLocation& where,
                                                       const ControlPlaneOptions& o);

struct ControlPlaneOptions {
  std::string data_dir = ".gpucloud";
  // The store (ParseStoreUrl). On etcd, certificates, tokens, keys and logs stay in data_dir.
  std::string store;
  // TLS to etcd (etcds://; docs/server.md): the CA file that signed the members' serving
  // certificates (`--etcd-ca`, required there), and a client certificate and its key
  // (`--etcd-cert`, `--etcd-key`: both or neither) for an etcd run with --client-cert-auth.
  std::string etcd_ca;
  std::string etcd_cert;
  std::string etcd_key;
  // On etcd: the leader's lease (`--leader-lease`). Several servers may share one etcd; the one
  // holding the election key runs the controllers, and loses it within this long of losing
  // etcd (or of its death). Renewed every third of it. Whole seconds (rounded up).
  absl::Duration leader_lease = absl::Seconds(5);
  // On etcd: how long a start waits for etcd to answer (`--store-wait`), trying again with
  // back-off (0.5 s, doubling, at most 5 s apart) and saying so, before it gives up (exit 1,
  // naming the URL): servers and etcd members started together need not be started in order.
  absl::Duration store_wait = absl::Seconds(30);
  std::string address = "127.0.0.1";
  uint16_t port = 8443;  // 0: any free port
  SchedulerConfig scheduler;
  // A file to record the scheduler's inputs and decisions in (--record-scheduler; replayed by
  // `gpucloud sim --trace`); "" = none. Appended to: each start and each leader term begins
  // with a header.
  std::string record_scheduler;
  int64_t heartbeat_timeout_ms = 3000;
  int64_t stop_grace_ms = 30'000;
  // Where jobs' checkpoints go by default; "" = DATA_DIR/checkpoints.
  std::string checkpoint_root;
  // Start even though the store is missing or empty next to an earlier server's credentials.
  bool init = false;
  // On etcd, for a data directory without credentials: a file holding the join key of the control
  // plane already in the store (join_bundle.h; its servers keep it in KEY_DIR/join.key). The
  // server takes the shared CA, tokens and keys from the store's join bundle instead of making
  // new ones. Without it, such a directory is refused when the store already holds a control
  // plane. The first server on etcd makes the key and the bundle; each start seals the bundle
  // again when it opens under the server's own key (ShareJoinBundle in control_plane.cc).
  std::string join_key_file;
  int64_t max_jobs_per_namespace = 10'000;  // 0: no limit
  // Bytes of task output one namespace's logs may hold on the server (0: no limit).
  int64_t max_log_bytes_per_namespace = int64_t{20} << 30;
  CompactionPolicy compaction;
  // How long an agent's client certificate is valid (it renews at two thirds of that).
  absl::Duration node_certificate_ttl = absl::Hours(24);
  // The audit log (docs/audit.md): every API request recorded in the store, a mutation in its
  // transaction, digests signed with the server's key every 10 minutes and on Stop. Off only
  // for benchmarks that measure its cost.
  bool audit = true;
  // What the audit log keeps (checked every 10 minutes): a year of records by default, as
  // ISO 27001 / SOC 2 auditors expect (0: no bound).
  RetentionPolicy audit_retention{.max_age_ms = int64_t{366} * 24 * 3600 * 1000};
  // The anomaly rules over the audit log's records (docs/audit.md, "Anomaly rules"): hits are
  // Events at GET audit/anomalies and gpucloud_audit_anomalies_total{rule} in /metrics.
  AnomalyRules anomaly_rules;
  // Export of the audit log to a webhook (docs/audit.md, "Export to a webhook"): every committed
  // record POSTed, at least once, in seq order, from a thread of its own; "" = none. The cursor
  // is DATA_DIR/audit-webhook.cursor.
  std::string audit_webhook_url;
  std::string audit_webhook_ca;     // the receiver's CA file ("" = the system's roots)
  std::string audit_webhook_token;  // sent as a bearer token when not empty
  // The Secrets' key ring (docs/secrets.md); "" = DATA_DIR/keys.
  std::string key_dir;
  // The tasks' logs (LogStore); "" = DATA_DIR/logs. Several servers on one etcd share one
  // directory on a shared file system, so that any of them serves any log (docs/server.md).
  std::string log_dir;
  // A write into a namespace without its Namespace object: 404 (kExplicit) or the namespace made
  // on the spot (kAuto; what `gpucloud up` uses). See rest.h's NamespaceProvisioning.
  NamespaceProvisioning namespace_provisioning = NamespaceProvisioning::kExplicit;
  // The autoscaler (docs/autoscaling.md): NodePools whose provider is not "static" grow for
  // jobs that wait for room and shrink when idle. 0 for a maximum: none.
  int64_t scale_down_after_ms = 10 * 60'000;
  int64_t boot_timeout_ms = 10 * 60'000;
  int64_t autoscale_backoff_ms = 5 * 60'000;
  int64_t autoscale_max_gpus = 0;
  MicroUsd autoscale_max_usd_per_hour = MicroUsd(0);
  // Lets pools use provider "local": agents with simulated GPUs as processes of this server
  // (this binary's `agent run`, with local_agent_args), state under DATA_DIR/local-nodes.
  bool local_provider = false;
  std::vector<std::string> local_agent_args;
  // Money and carbon: the currency of prices and Namespace budgets (budgets.h), and how GPU
  // energy becomes carbon (core/node_pool.h's CarbonOptions).
  std::string currency = "USD";
  CarbonOptions carbon;
  // The inference gateway (gateway.h; docs/services.md): HTTPS on gateway_address:gateway_port
  // (`--gateway-listen`; port 0: any free one); off when gateway_port is negative. The
  // service controller runs on the leader either way.
  std::string gateway_address = "127.0.0.1";
  int gateway_port = -1;
};

// On SQLite the server is the only one and always the leader. On etcd every server serves the
// API, and only the elected leader (leader_elector.h) runs the controller loop and the
// compactor, writing through a FencedStore with its term's token; they are started when it is
// elected and stopped (on the elector's thread, not the API's) when its term ends.
class ControlPlane {
 public:
  explicit ControlPlane(ControlPlaneOptions options);
  ~ControlPlane();
  absl::Status Start();
  void Stop();

  std::string url() const;
  // The gateway's https://ADDRESS:PORT, or "" without one.
  std::string gateway_url() const;        // https://ADDRESS:PORT
  std::string ca_path() const;            // DATA_DIR/ca.crt
  std::string admin_config_path() const;  // DATA_DIR/admin.config (gpuctl's config)
  std::string bootstrap_token() const;    // the agents' join token
  bool first_start() const;               // credentials were created by this Start
  std::string store_name() const;         // DATA_DIR/store.db, or the etcd:// URL
  int64_t revision() const;
  // Whether this server runs the controllers now (always on SQLite).
  bool leader() const;

 private:
  absl::Status OpenStoreAndCredentials();
  absl::Status OpenApi();
  absl::Status StartServing();
  absl::Status StartLeadership();
  void StartAuditTicker();
  void StartIamFollower();
  void StartSummaryPublisher();
  absl::Status WriteAdminConfig();
  absl::Status OpenAudit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_CONTROL_PLANE_H_
