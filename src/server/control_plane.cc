#include "server/control_plane.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "core/log.h"
#include "core/parse.h"
#include "core/private_file.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "server/audit_log.h"
#include "server/audit_webhook.h"
#include "server/audited_store.h"
#include "server/autoscaling.h"
#include "server/compactor.h"
#include "server/controller.h"
#include "server/credentials.h"
#include "server/fenced_store.h"
#include "server/gateway.h"
#include "server/https_server.h"
#include "server/identity_book.h"
#include "server/join_bundle.h"
#include "server/leader_elector.h"
#include "server/log_store.h"
#include "server/node_certs.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "server/secret_store.h"
#include "server/services.h"
#include "store/etcd_lease.h"
#include "store/etcd_store.h"
#include "store/sqlite_store.h"

namespace gpucloud::server {

constexpr int64_t kRetainEveryMs = 10 * 60 * 1000;
constexpr int64_t kTakeoverGraceMs = 12'000;
// Several servers: the leader's cluster summary, for standbys to serve (StartSummaryPublisher).
constexpr char kSummaryKey[] = "/meta/clustersummary";
constexpr int64_t kSummaryRefreshMs = 30'000;

namespace {

// Waits `d`, or less when `stop` is requested meanwhile; false when it was (the periodic threads
// below end then).
bool WaitUnlessStopped(const std::stop_token& stop, std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, stop, d, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace

// What runs only on the leader, for one term: made when it is elected, stopped when the term
// ends. Members are destroyed in reverse order: the users of `fenced` before it.
struct LeaderTerm {
  std::unique_ptr<FencedStore> fenced;       // null on SQLite (no other server to fence out)
  std::unique_ptr<Autoscaling> autoscaling;  // used by the controller
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Compactor> compactor;
  std::unique_ptr<ServiceController> services;
};

struct ControlPlane::Impl {
  ControlPlaneOptions options;
  SystemClock clock;
  StoreLocation where;
  store::EtcdTlsOptions etcd_tls;  // set by Start: TLS to etcd (etcds://), for store and leases
  std::optional<Credentials> creds;
  std::optional<TokenBook> tokens;
  std::unique_ptr<store::Store> store;
  bool OnEtcd() const { return where.kind == StoreLocation::Kind::kEtcd; }  // set by Start
  std::unique_ptr<AnomalyRecorder> anomalies;  // the audit log's observer: outlives it
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<AuditedStore> audited;  // the API's view of `store` (with `audit`)
  std::unique_ptr<AuditWebhook> webhook;  // exports `audit`'s records (--audit-webhook)
  std::jthread audit_ticker;              // AuditLog::Tick every 50 ms until stopped
  bool audit_closed = false;
  std::unique_ptr<RestApi> api;
  std::unique_ptr<NodeTable> nodes;
  std::unique_ptr<NodeCertificates> node_certs;
  std::unique_ptr<IdentityBook> identities;
  std::jthread iam_follower;             // on etcd: other servers' /iam/ writes into `identities`
  std::jthread summary_publisher;        // on etcd: the leader's summary into the store
  std::unique_ptr<SecretStore> secrets;  // the Secrets and their key ring (holds its lock)
  std::unique_ptr<LogStore> logs;
  ControllerOptions controller_options;
  std::ofstream recording;  // --record-scheduler, before the terms that write to it
  std::unique_ptr<HttpsServer> https;
  // The gateway's measurements (every server's), read by the leader's service controller.
  gateway::LoadMeter service_load{clock};
  gateway::ReplicaHealth replica_health;
  std::unique_ptr<Gateway> gateway;
  const std::string gateway_id = Cat(std::random_device{}(), std::random_device{}());
  std::string bootstrap;
  bool first = false;
  mutable std::mutex term_mu;
  // The current term's controllers (null while not leader); guarded by term_mu. Shared, so that
  // Kick and Metrics use them outside the lock while EndTerm stops them.
  std::shared_ptr<LeaderTerm> term;
  // After what its callbacks use (BeginTerm, EndTerm), so that it goes first.
  std::unique_ptr<store::LeaseClient> leases;  // on etcd
  std::unique_ptr<LeaderElector> elector;      // on etcd; uses `leases`

  std::shared_ptr<LeaderTerm> Term() const {
    std::lock_guard lock(term_mu);
    return term;
  }
  void Kick() const {
    if (std::shared_ptr<LeaderTerm> t = Term()) t->controller->Kick();
  }
  // A follower's are empty: its controllers do not run.
  ClusterMetrics Metrics() const {
    std::shared_ptr<LeaderTerm> t = Term();
    return t ? t->controller->Metrics() : ClusterMetrics{};
  }
  // GET .../cluster: this server's controller figures while it leads (always on SQLite); on a
  // standby, what the leader last published, with the leader's asOfMs (an empty summary with
  // asOfMs 0 before any was, or while the store does not answer).
  std::string Summary() const {
    std::shared_ptr<LeaderTerm> t = Term();
    if (t || !OnEtcd()) {
      return ClusterSummaryJson(t ? t->controller->Metrics() : ClusterMetrics{}, clock.NowMillis());
    }
    absl::StatusOr<store::KeyValue> kv = store->Get(kSummaryKey);
    return kv.ok() ? kv->value : ClusterSummaryJson(ClusterMetrics{}, 0);
  }
  // Starts the controllers writing through `s` (a FencedStore on etcd, the store on SQLite).
  void BeginTerm(std::unique_ptr<FencedStore> fenced) {
    auto t = std::make_shared<LeaderTerm>();
    t->fenced = std::move(fenced);
    store::Store& s = t->fenced ? *t->fenced : *store;
    ControllerOptions co = controller_options;
    // A new leader on etcd: agents find it within an answer, handshake and connect timeout
    // (api::Client: about 13 s at worst, from a frozen old leader) before it judges them.
    if (OnEtcd()) co.start_grace_ms = kTakeoverGraceMs;
    t->autoscaling = std::make_unique<Autoscaling>(s, GpuCatalog::Default(), AutoscalingOf());
    t->autoscaling->Start();
    co.autoscaling = t->autoscaling.get();
    t->controller = std::make_unique<Controller>(s, *nodes, clock, GpuCatalog::Default(), co);
    t->compactor = std::make_unique<Compactor>(s, options.compaction);
    t->services = std::make_unique<ServiceController>(
        s, clock, service_load, replica_health,
        ServiceControllerOptions{.merge_remote = OnEtcd(),
                                 .local_gateway = gateway_id,
                                 .max_jobs_per_namespace = options.max_jobs_per_namespace});
    t->controller->Start();
    t->compactor->Start();
    t->services->Start();
    std::lock_guard lock(term_mu);
    term = std::move(t);
  }
  // Stops the term's controllers (a pass in flight ends first; its fenced writes fail once
  // another term began).
  void EndTerm() {
    std::shared_ptr<LeaderTerm> t;
    {
      std::lock_guard lock(term_mu);
      t.swap(term);
    }
    if (!t) return;
    t->services->Stop();
    t->compactor->Stop();
    t->controller->Stop();
    t->autoscaling->Stop();
  }
  // The autoscaler's options from the server's.
  AutoscalingOptions AutoscalingOf() {
    AutoscalingOptions a;
    a.autoscaler.scale_down_after_ms = options.scale_down_after_ms;
    a.autoscaler.boot_timeout_ms = options.boot_timeout_ms;
    a.autoscaler.backoff_ms = options.autoscale_backoff_ms;
    a.autoscaler.max_gpus = options.autoscale_max_gpus;
    a.autoscaler.max_usd_per_hour = options.autoscale_max_usd_per_hour;
    a.join = {Cat("https://", options.address, ":", https ? https->port() : 0),
              options.data_dir + "/ca.crt", creds->bootstrap_token_path};
    if (options.local_provider) {
      std::error_code ec;
      std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
      a.local = LocalProviderOptions{self.string(), options.data_dir + "/local-nodes", a.join,
                                     options.local_agent_args};
    }
    a.forget_node = [this](const std::string& node, int64_t revision) {
      if (node_certs) node_certs->Forget(node, revision);
      if (nodes) nodes->Forget(node);
    };
    return a;
  }
  ServiceMetrics ServicesMetrics() const {
    std::shared_ptr<LeaderTerm> t = Term();
    return t ? t->services->Metrics() : ServiceMetrics{};
  }
  void KickServices() const {
    if (std::shared_ptr<LeaderTerm> t = Term()) t->services->Kick();
  }
  AutoscalingMetrics AutoscalerMetrics() const {
    std::shared_ptr<LeaderTerm> t = Term();
    return t ? t->autoscaling->Metrics() : AutoscalingMetrics{};
  }
};

ControlPlane::ControlPlane(ControlPlaneOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

ControlPlane::~ControlPlane() { Stop(); }

namespace {

constexpr char kStoreForms[] = "sqlite, or etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX]";

absl::Status BadStoreUrl(const std::string& url, const std::string& why) {
  return absl::InvalidArgumentError(Cat("--store: \"", url, "\" ", why, " (", kStoreForms, ")"));
}

// Creates DIR, private to its owner; true when a server ran here before (its CA exists).
absl::StatusOr<bool> PrepareDataDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", dir, ": ", ec.message()));
  // It holds secrets (keys, tokens, jobs' environments in the store), each 0600: its owner's
  // only. 0711, so that tasks, which run as unprivileged users, pass through to the default
  // checkpoint root (DIR/checkpoints) without being able to list the directory.
  if (chmod(dir.c_str(), 0711) != 0) {
    return absl::InternalError(Cat("cannot make ", dir, " private: ", std::strerror(errno)));
  }
  return std::filesystem::exists(dir + "/ca.crt", ec);
}

// A server ran here before but its store is gone or empty: starting would serve an empty
// cluster to agents and users that expect theirs, so it takes --init.
absl::Status StoreLost(const std::string& store, const std::string& dir) {
  return absl::FailedPreconditionError(
      Cat(store, " is missing or empty, but ", dir,
          " holds the credentials of a server that ran "
          "before: restore the store, or start with --init to begin with an empty one"));
}

// Opens the store `o.store` names, refusing a lost one next to an earlier server's credentials
// (`had_server`) unless --init. On etcd, "lost" is a store without a single key: every server
// writes some at its first start (the default namespace, the audit log's records).
absl::StatusOr<std::unique_ptr<store::Store>> OpenStore(const ControlPlaneOptions& o,
                                                        const StoreLocation& where,
                                                        const store::EtcdTlsOptions& tls,
                                                        bool had_server) {
  const bool check = had_server && !o.init;
  if (where.kind == StoreLocation::Kind::kSqlite) {
    const std::string db = o.data_dir + "/store.db";
    std::error_code ec;
    if (check && (!std::filesystem::exists(db, ec) || std::filesystem::file_size(db, ec) == 0)) {
      return StoreLost(db, o.data_dir);
    }
    return store::OpenSqliteStore(db);
  }
  const store::EtcdStoreOptions eo{
      .endpoint = where.endpoints,
      .namespace_prefix = where.key_prefix + "/data",
      .compaction_key = where.key_prefix + "/meta/compacted-revision",
      .tls = tls,
  };
  absl::StatusOr<std::unique_ptr<store::Store>> etcd = store::OpenEtcdStore(eo);
  // etcd not there yet (started with us, restarting): try again with back-off, saying so.
  const absl::Time give_up = absl::Now() + o.store_wait;
  for (absl::Duration backoff = absl::Milliseconds(500);
       !etcd.ok() && absl::IsUnavailable(etcd.status()) && absl::Now() + backoff <= give_up;
       backoff = std::min(backoff * 2, absl::Seconds(5))) {
    log::Warn("server", "etcd does not answer; trying again",
              {{"store", o.store},
               {"in", absl::FormatDuration(backoff)},
               {"error", std::string(etcd.status().message())}});
    absl::SleepFor(backoff);
    etcd = store::OpenEtcdStore(eo);
  }
  if (!etcd.ok()) {
    return absl::Status(etcd.status().code(),
                        Cat("store ", o.store, ": ", etcd.status().message()));
  }
  if (!check) return etcd;
  absl::StatusOr<int64_t> keys = (*etcd)->Count("/");
  if (!keys.ok()) {
    return absl::Status(keys.status().code(),
                        Cat("store ", o.store, ": ", keys.status().message()));
  }
  if (*keys == 0) return StoreLost(Cat("the store ", o.store), o.data_dir);
  return etcd;
}

std::string KeyDirOf(const ControlPlaneOptions& o) {
  return o.key_dir.empty() ? o.data_dir + "/keys" : o.key_dir;
}

// On etcd, a data directory without credentials (before EnsureCredentials would make a new CA):
// with --join-key-file, the join bundle in the store opened into it (join_bundle.h: the key is
// kept as KEY_DIR/join.key); without, refused when the store already holds a control plane (its
// servers' agents and users would not trust a second CA). Two first servers started at the same
// moment on an empty store could still both make a CA: start the first one alone.
absl::Status JoinIfNew(const ControlPlaneOptions& o, store::Store& store) {
  if (o.join_key_file.empty()) {
    absl::StatusOr<int64_t> keys = store.Count("/");
    if (!keys.ok()) return keys.status();
    if (*keys == 0) return absl::OkStatus();
    return absl::FailedPreconditionError(
        Cat("the store ", o.store, " already holds a control plane, but ", o.data_dir,
            " has no credentials: join it with --join-key-file (a copy of KEY_DIR/", kJoinKeyFile,
            " of one of its servers, by default DATA_DIR/keys/", kJoinKeyFile, ")"));
  }
  const std::string flag = Cat("--join-key-file ", o.join_key_file);
  absl::StatusOr<std::string> key = ReadJoinKeyFile(o.join_key_file, flag);
  if (absl::IsNotFound(key.status())) return absl::InvalidArgumentError(key.status().message());
  if (!key.ok()) return key.status();
  absl::StatusOr<store::KeyValue> bundle = store.Get(kJoinBundleStoreKey);
  if (absl::IsNotFound(bundle.status())) {
    return absl::FailedPreconditionError(
        Cat("the store ", o.store, " holds no join bundle: start the first server on it first"));
  }
  if (!bundle.ok()) return bundle.status();
  if (absl::Status s = OpenJoinBundle(bundle->value, *key, o.data_dir, KeyDirOf(o)); !s.ok()) {
    return absl::Status(s.code(), Cat("--join-key-file: ", s.message()));
  }
  log::Info("server", "joined the control plane in the store: its CA, tokens and keys written",
            {{"data_dir", o.data_dir}});
  return absl::OkStatus();
}

// On etcd, once the key ring exists and a first start's admin token is committed: the shared
// files sealed under KEY_DIR/join.key and put in the store, for the next server to join. A server
// writes the bundle only when the store has none (its key made then, if it has none) or when the
// store's opens under its own key (then sealed again: a rotated key ring, a new admin token), with
// a compare-and-swap on the bundle's revision; a bundle under another key is left as it is (a
// server set up from a copy of DATA_DIR, or one whose key was changed), so that the key an
// operator copied keeps working. Never stops the start: what goes wrong is logged.
void ShareJoinBundle(const ControlPlaneOptions& o, store::Store& store) {
  const std::string path = Cat(KeyDirOf(o), "/", kJoinKeyFile);
  auto warn = [&](const std::string& what) {
    log::Warn("server", Cat("the join bundle: ", what), {{"key", path}});
  };
  absl::StatusOr<store::KeyValue> bundle = store.Get(kJoinBundleStoreKey);
  if (!bundle.ok() && !absl::IsNotFound(bundle.status()))
    return warn(std::string(bundle.status().message()));
  absl::StatusOr<std::string> key = ReadJoinKeyFile(path, path);
  if (absl::IsNotFound(key.status())) {
    if (bundle.ok()) {
      return warn(
          "the store's is sealed under a key this server does not hold; left as it is (servers "
          "join with the join.key of the server that sealed it)");
    }
    absl::StatusOr<std::string> made = NewJoinKey();
    if (!made.ok()) return warn(std::string(made.status().message()));
    if (absl::Status s = WritePrivateFile(path, *made + "\n", FileSync::kDurable); !s.ok()) {
      return warn(std::string(s.message()));
    }
    key = ParseJoinKey(*made, path);
  }
  if (!key.ok()) return warn(std::string(key.status().message()));
  if (bundle.ok()) {
    if (absl::Status s = CheckJoinBundle(bundle->value, *key); !s.ok()) {
      return warn(Cat("the store's does not open under this server's key (", s.message(),
                      "); left as it is"));
    }
  }
  absl::StatusOr<std::string> sealed = SealJoinBundle(o.data_dir, KeyDirOf(o), *key);
  if (!sealed.ok()) return warn(std::string(sealed.status().message()));
  store::Op put{.kind = store::Op::Kind::kPut,
                .key = kJoinBundleStoreKey,
                .value = *sealed,
                .expect_mod_revision = bundle.ok() ? bundle->mod_revision : 0};
  if (absl::Status s = store.Txn({put}).status(); !s.ok()) warn(std::string(s.message()));
}

}  // namespace

absl::StatusOr<StoreLocation> ParseStoreUrl(const std::string& url) {
  StoreLocation where;
  if (url.empty() || url == "sqlite") return where;
  constexpr std::string_view kEtcd = "etcd://", kEtcdTls = "etcds://";
  where.tls = url.starts_with(kEtcdTls);
  if (!where.tls && !url.starts_with(kEtcd)) {
    const size_t scheme = url.find("://");
    if (scheme == std::string::npos) return BadStoreUrl(url, "is not a store");
    return BadStoreUrl(url, Cat("has an unknown scheme \"", url.substr(0, scheme), "\""));
  }
  const std::string_view rest =
      std::string_view(url).substr(where.tls ? kEtcdTls.size() : kEtcd.size());
  const size_t slash = rest.find('/');
  const std::string_view members = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view prefix = rest.substr(slash);
    if (prefix.size() < 2 || prefix.ends_with('/') || prefix.find("//") != std::string::npos) {
      return BadStoreUrl(url, "has a bad key prefix (/NAME[/NAME...])");
    }
    where.key_prefix = std::string(prefix);
  }
  if (members.empty()) return BadStoreUrl(url, "names no etcd member");
  for (size_t from = 0; from <= members.size();) {
    const size_t comma = std::min(members.find(',', from), members.size());
    const std::string_view member = members.substr(from, comma - from);
    absl::StatusOr<HostPort> hp = ParseHostPort("--store", member);
    if (!hp.ok() || hp->host.empty() || hp->port == 0) {
      return BadStoreUrl(
          url, Cat("has a member \"", member, "\" that is not HOST:PORT (port 1 to 65535)"));
    }
    from = comma + 1;
  }
  where.kind = StoreLocation::Kind::kEtcd;
  where.endpoints = std::string(members);
  return where;
}

absl::StatusOr<store::EtcdTlsOptions> EtcdTlsFromFlags(const StoreLocation& where,
                                                       const ControlPlaneOptions& o) {
  const std::pair<const char*, const std::string*> flags[] = {
      {"--etcd-ca", &o.etcd_ca}, {"--etcd-cert", &o.etcd_cert}, {"--etcd-key", &o.etcd_key}};
  if (!where.tls) {
    for (const auto& [flag, value] : flags) {
      if (value->empty()) continue;
      return absl::InvalidArgumentError(
          Cat(flag,
              " is for TLS to etcd: it needs --store etcds://HOST:PORT[,HOST:PORT...] (the "
              "store is \"",
              o.store.empty() ? "sqlite" : o.store, "\")"));
    }
    return store::EtcdTlsOptions{};
  }
  if (o.etcd_ca.empty()) {
    return absl::InvalidArgumentError(Cat("--store ", o.store,
                                          " needs --etcd-ca (the CA file that signed the etcd "
                                          "members' certificates)"));
  }
  if (o.etcd_cert.empty() != o.etcd_key.empty()) {
    return absl::InvalidArgumentError(
        Cat(o.etcd_cert.empty() ? "--etcd-key needs --etcd-cert" : "--etcd-cert needs --etcd-key",
            " (a client certificate and its key: both or neither)"));
  }
  // The CA first, alone, so that what is wrong is told with the flag that names it.
  const store::EtcdTlsOptions ca_only{.enabled = true, .ca_file = o.etcd_ca};
  const store::EtcdTlsOptions tls{
      .enabled = true, .ca_file = o.etcd_ca, .cert_file = o.etcd_cert, .key_file = o.etcd_key};
  for (const store::EtcdTlsOptions* check : {&ca_only, &tls}) {
    absl::Status s = store::CheckEtcdTls(*check);
    if (s.ok()) continue;
    std::string why(s.message());
    if (why.starts_with("etcd TLS: ")) why.erase(0, 10);
    const char* flag = check == &ca_only                    ? "--etcd-ca"
                       : why.starts_with("the client key ") ? "--etcd-key"
                                                            : "--etcd-cert";
    return absl::InvalidArgumentError(Cat(flag, ": ", why));
  }
  return tls;
}

absl::Status ControlPlane::Start() {
  Impl& m = *impl_;
  const std::string& dir = m.options.data_dir;
  if (absl::Status s = OpenStoreAndCredentials(); !s.ok()) return s;
  m.nodes = std::make_unique<NodeTable>();
  m.logs = std::make_unique<LogStore>(m.options.log_dir.empty() ? dir + "/logs" : m.options.log_dir,
                                      m.options.max_log_bytes_per_namespace);
  ControllerOptions& co = m.controller_options;
  co.scheduler = m.options.scheduler;
  co.heartbeat_timeout_ms = m.options.heartbeat_timeout_ms;
  co.stop_grace_ms = m.options.stop_grace_ms;
  co.currency = m.options.currency;
  co.carbon = m.options.carbon;
  co.on_job_deleted = [logs = m.logs.get()](const std::string& ns, const std::string& job) {
    logs->RemoveJob(ns, job);
  };
  co.checkpoint_root =
      m.options.checkpoint_root.empty() ? dir + "/checkpoints" : m.options.checkpoint_root;
  if (!m.options.record_scheduler.empty()) {
    // A line the last server was writing when it died ends here, before this start's header.
    bool torn = false;
    if (std::ifstream last(m.options.record_scheduler, std::ios::binary);
        last && last.seekg(-1, std::ios::end)) {
      torn = last.get() != '\n';
    }
    m.recording.open(m.options.record_scheduler, std::ios::app);
    if (torn) m.recording << '\n';
    if (!m.recording) {
      return absl::InvalidArgumentError(
          Cat("--record-scheduler: cannot write ", m.options.record_scheduler));
    }
    co.record_scheduler = &m.recording;
  }
  if (absl::Status s = OpenAudit(); !s.ok()) return s;
  if (absl::Status s = OpenApi(); !s.ok()) return s;
  if (absl::Status s = StartServing(); !s.ok()) return s;
  // Once the key ring exists (OpenApi) and a first start's admin token is in the token book
  // (StartServing): what a joining server takes must be what this one has.
  if (m.OnEtcd()) ShareJoinBundle(m.options, *m.store);
  if (absl::Status s = StartLeadership(); !s.ok()) return s;
  m.secrets->Start();  // rotation when due, and rewrapping after one
  StartAuditTicker();
  StartIamFollower();
  StartSummaryPublisher();
  return absl::OkStatus();
}

// The store (a start that fails after it finds it next time), then the credentials in DATA_DIR.
absl::Status ControlPlane::OpenStoreAndCredentials() {
  Impl& m = *impl_;
  const std::string& dir = m.options.data_dir;
  absl::StatusOr<StoreLocation> where = ParseStoreUrl(m.options.store);
  if (!where.ok()) return where.status();
  m.where = *where;
  absl::StatusOr<store::EtcdTlsOptions> tls = EtcdTlsFromFlags(*where, m.options);
  if (!tls.ok()) return tls.status();
  m.etcd_tls = *tls;
  absl::StatusOr<bool> had_server = PrepareDataDir(dir);
  if (!had_server.ok()) return had_server.status();
  absl::StatusOr<std::unique_ptr<store::Store>> store =
      OpenStore(m.options, *where, m.etcd_tls, *had_server);
  if (!store.ok()) return store.status();
  m.store = std::move(*store);
  if (m.OnEtcd() && !*had_server) {
    if (absl::Status s = JoinIfNew(m.options, *m.store); !s.ok()) return s;
  }
  absl::StatusOr<Credentials> creds = EnsureCredentials(dir, {m.options.address});
  if (!creds.ok()) return creds.status();
  m.creds = *creds;
  m.first = !creds->admin_token.empty();
  absl::StatusOr<TokenBook> tokens = TokenBook::Load(dir);
  if (!tokens.ok()) return tokens.status();
  m.tokens = std::move(*tokens);
  // A new admin is valid from the first request on, but stored only once the server listens
  // and its config is written (StartServing): a start that fails loses nothing.
  if (m.first) m.tokens->Add(creds->admin_token, Identity{"admin", "", true});
  std::ifstream f(creds->bootstrap_token_path);
  std::getline(f, m.bootstrap);
  return absl::OkStatus();
}

// The REST API and what it serves from the store: node certificates, identities, Secrets.
absl::Status ControlPlane::OpenApi() {
  Impl& m = *impl_;
  const std::string& dir = m.options.data_dir;
  store::Store& api_store = m.audited ? *m.audited : *m.store;
  m.api = std::make_unique<RestApi>(api_store, m.clock, std::random_device{}());
  m.api->AttachAudit(m.audit.get());
  m.api->SetMaxJobsPerNamespace(m.options.max_jobs_per_namespace);
  m.api->SetCheckpointRoot(m.controller_options.checkpoint_root);
  // Through the API's store: a certificate's issue is audited with its request.
  m.node_certs =
      std::make_unique<NodeCertificates>(api_store, m.clock, dir, m.options.node_certificate_ttl);
  if (absl::Status s = m.node_certs->Load(); !s.ok()) return s;
  m.node_certs->SetShared(m.OnEtcd());
  m.api->AttachNodeCertificates(m.node_certs.get());
  m.identities = std::make_unique<IdentityBook>(api_store, m.clock, m.api->authorizer());
  if (absl::Status s = m.identities->Load(); !s.ok()) return s;
  m.api->AttachIdentities(m.identities.get());
  SecretStoreOptions so{.key_dir = m.options.key_dir.empty() ? dir + "/keys" : m.options.key_dir};
  // Several servers on one etcd each hold a copy of the key ring: one that rotated on its own
  // would seal values the others cannot open. Rotation is the operator's then (docs/server.md).
  if (m.OnEtcd()) so.rotation_period = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<SecretStore>> secrets = SecretStore::Open(api_store, m.clock, so);
  if (!secrets.ok()) return secrets.status();
  m.secrets = *std::move(secrets);
  m.api->AttachSecrets(m.secrets.get());
  // Tenants added by hand to DATA_DIR/tokens become API users and tokens (once).
  absl::StatusOr<int> moved = m.identities->MigrateTokenFile(dir);
  if (!moved.ok()) return moved.status();
  if (*moved > 0) {
    absl::StatusOr<TokenBook> reread = TokenBook::Load(dir);
    if (!reread.ok()) return reread.status();
    m.tokens = std::move(*reread);
    if (m.first) m.tokens->Add(m.creds->admin_token, Identity{"admin", "", true});
  }
  // Every namespace in use gets its object (a store from before namespaces were objects).
  m.api->SetNamespaceProvisioning(m.options.namespace_provisioning);
  m.api->SetCurrency(m.options.currency);
  if (absl::StatusOr<int> made = m.api->EnsureNamespaces(); !made.ok()) return made.status();
  m.tokens->SetFallback(
      [ids = m.identities.get()](const std::string& token) { return ids->Authenticate(token); });
  // The controllers come and go with leadership: through Impl, which knows the current ones.
  m.api->AttachCluster(
      m.nodes.get(), m.logs.get(), [&m] { m.Kick(); }, [&m] { return m.Summary(); });
  if (m.OnEtcd()) m.api->SetLeadership([&m] { return m.Term() != nullptr; });
  m.api->SetWhatIf([&m](const std::string& ns, const Job& job) -> absl::StatusOr<nlohmann::json> {
    std::shared_ptr<LeaderTerm> term = m.Term();
    if (!term) return absl::UnavailableError("this server does not lead: ask the leader");
    absl::StatusOr<WhatIfAnswer> a = term->controller->WhatIf(ns, job, absl::Seconds(10));
    if (!a.ok()) return a.status();
    nlohmann::json out{{"outcome", a->outcome}, {"nodes", a->nodes}, {"reason", a->reason}};
    if (a->expected_start_ms) out["expectedStartMs"] = *a->expected_start_ms;
    return out;
  });
  return absl::OkStatus();
}

// The HTTPS server (with /metrics), then the admin's config.
absl::Status ControlPlane::StartServing() {
  Impl& m = *impl_;
  AnomalyRecorder* anomalies = m.anomalies.get();  // null without the audit log
  AuditWebhook* webhook = m.webhook.get();         // null without --audit-webhook
  auto metrics = [&m, this, anomalies, webhook] {
    // The controllers' families come from the leader alone (a standby's would be zeros, and
    // the leader's figures again would be counted once per server by a sum over instances).
    std::string text;
    if (leader()) {
      text += RenderClusterMetrics(m.Metrics());
      text += RenderAutoscalingMetrics(m.AutoscalerMetrics());
      text += RenderServiceMetrics(m.ServicesMetrics());
    }
    if (m.gateway) text += m.gateway->RenderMetrics();
    text += PromText()
                .Family("gpucloud_leader", "gauge",
                        "1 while this server is the leader and runs the controllers, else 0.")
                .Sample(leader() ? 1 : 0)
                .Take();
    if (anomalies != nullptr) text += anomalies->detector().RenderMetrics();
    if (webhook != nullptr) text += webhook->RenderMetrics();
    return text;
  };
  HttpsServer::Options ho{
      .address = m.options.address,
      .port = m.options.port,
      .cert_path = m.creds->cert_path,
      .key_path = m.creds->key_path,
      .extra_metrics = metrics,
      .logs = m.logs.get(),
      .node_certs = m.node_certs.get(),
      .client_ca_path = m.creds->ca_cert_path,
      .audit = m.audit.get(),
  };
  m.https = std::make_unique<HttpsServer>(*m.api, *m.tokens, *m.store, std::move(ho));
  if (absl::Status s = m.https->Start(); !s.ok()) return s;
  if (m.options.gateway_port >= 0) {
    GatewayOptions go{.address = m.options.gateway_address,
                      .port = static_cast<uint16_t>(m.options.gateway_port),
                      .cert_path = m.creds->cert_path,
                      .key_path = m.creds->key_path,
                      .publish_load = m.OnEtcd(),
                      .id = m.gateway_id,
                      .wake_scaler = [&m] { m.KickServices(); }};
    m.gateway = std::make_unique<Gateway>(*m.store, *m.tokens, m.api->authorizer(), m.service_load,
                                          m.replica_health, std::move(go));
    if (absl::Status s = m.gateway->Start(); !s.ok()) return s;
  }
  return WriteAdminConfig();
}

// SQLite: this server leads, now. etcd: the first campaign now (so the start-up line can say
// how it went), then the elector's thread.
absl::Status ControlPlane::StartLeadership() {
  Impl& m = *impl_;
  if (!m.OnEtcd()) {
    m.BeginTerm(nullptr);
    return absl::OkStatus();
  }
  const int64_t ttl_ms =
      std::max<int64_t>(1, std::ceil(absl::ToDoubleSeconds(m.options.leader_lease))) * 1000;
  ElectionTiming timing{.ttl_ms = ttl_ms};
  // A lease request that waits longer than a third of a renew interval is as good as failed (a
  // renewal is two: the keep-alive and the key's read). Found by tests/e2e/ha_chaos.py: with a
  // renew interval each and connects to unreachable members on top, a leader cut off from etcd
  // stepped down 1.7 s after another was elected.
  const int64_t request_ms = std::max<int64_t>(50, timing.RenewMs() / 3);
  timing.io_ms = 2 * request_ms;
  absl::StatusOr<std::unique_ptr<store::LeaseClient>> leases =
      store::OpenEtcdLeases(m.where.endpoints, absl::Milliseconds(request_ms), m.etcd_tls);
  if (!leases.ok()) return leases.status();
  m.leases = std::move(*leases);
  nlohmann::json identity = {{"url", url()}, {"pid", static_cast<int64_t>(getpid())}};
  m.elector = std::make_unique<LeaderElector>(
      *m.leases, m.clock,
      LeaderElectorOptions{m.where.key_prefix + "/data" + kLeaderKey, identity.dump(), timing},
      [&m](int64_t token) {
        m.BeginTerm(std::make_unique<FencedStore>(*m.store, kLeaderKey, token));
      },
      [&m] { m.EndTerm(); });
  m.elector->StepOnce();
  m.elector->Start();
  return absl::OkStatus();
}

// AuditLog::Tick every 50 ms (buffered records flushed, digests signed), and retention every
// 10 minutes, on a thread of its own until Stop.
void ControlPlane::StartAuditTicker() {
  Impl& m = *impl_;
  if (!m.audit) return;
  m.audit_ticker = std::jthread([&m](const std::stop_token& stop) {
    int64_t retained_ms = m.clock.NowMillis();
    while (!stop.stop_requested()) {
      if (!WaitUnlessStopped(stop, std::chrono::milliseconds(50))) break;
      const int64_t now = m.clock.NowMillis();
      if (absl::Status s = m.audit->Tick(now); !s.ok()) {
        log::Error("server", "audit log tick failed", {{"error", s.ToString()}});
      }
      // Retention, every 10 minutes, by the leader only (several servers share the chain).
      if (now - retained_ms >= kRetainEveryMs && m.Term() != nullptr) {
        retained_ms = now;
        if (absl::StatusOr<int64_t> gone = m.audit->Retain(m.options.audit_retention); !gone.ok()) {
          log::Error("server", "audit log retention failed", {{"error", gone.status().ToString()}});
        }
      }
    }
  });
}

// Several servers on one etcd: what the others write under /iam/ (users, policies, tokens and
// their revocation) and /nodecerts/ (node certificates signed or revoked) reaches this one's
// mirrors within about a second (IdentityBook::Follow, NodeCertificates::Follow).
void ControlPlane::StartIamFollower() {
  Impl& m = *impl_;
  if (!m.OnEtcd()) return;
  m.iam_follower = std::jthread([&m](const std::stop_token& stop) {
    // One read of the change log for both (each takes its own prefix; on etcd a read costs the
    // same whatever the prefix: etcd's watch is read whole and filtered here).
    auto loaded = [&m] {
      return std::min(m.identities->loaded_revision(), m.node_certs->loaded_revision());
    };
    int64_t after = loaded();
    constexpr int kPage = 1000;
    while (!stop.stop_requested()) {
      if (!WaitUnlessStopped(stop, std::chrono::seconds(1))) break;
      for (bool more = true; more && !stop.stop_requested();) {
        const int64_t now = m.store->Revision();
        absl::StatusOr<std::vector<store::Event>> events = m.store->Changes("", after, kPage);
        more = events.ok() && events->size() >= kPage;
        if (absl::IsOutOfRange(events.status())) {  // compacted past us: read it all again
          if (m.identities->Load().ok() && m.node_certs->Load().ok()) after = loaded();
        } else if (!events.ok()) {
          log::Warn("server", "following the store failed",
                    {{"error", events.status().ToString()}});
        } else {
          m.identities->Follow(*events);
          m.node_certs->Follow(*events);
          after = more ? events->back().revision : std::max(after, now);
        }
      }
    }
  });
}

// Several servers on one etcd: the leader writes its cluster summary under kSummaryKey when its
// shape (nodes, GPUs, jobs, recoveries) changed, looked at every second, and every 30 s besides,
// so that a standby answers GET .../cluster (gpuctl describe cluster, the console) with the
// leader's figures. Through the term's fenced store: a deposed leader's write is refused.
void ControlPlane::StartSummaryPublisher() {
  Impl& m = *impl_;
  if (!m.OnEtcd()) return;
  m.summary_publisher = std::jthread([&m](const std::stop_token& stop) {
    std::weak_ptr<LeaderTerm> published_term;  // what was published is of this term
    std::string shape;
    int64_t published_ms = 0;
    while (!stop.stop_requested()) {
      if (!WaitUnlessStopped(stop, std::chrono::seconds(1))) break;
      std::shared_ptr<LeaderTerm> t = m.Term();
      if (!t || !t->fenced) continue;
      const int64_t now = m.clock.NowMillis();
      ClusterMetrics metrics = t->controller->Metrics();
      std::string now_shape = ClusterSummaryShape(metrics);
      if (published_term.lock() == t && now_shape == shape &&
          now - published_ms < kSummaryRefreshMs) {
        continue;
      }
      absl::StatusOr<int64_t> rev = t->fenced->Txn(
          {{.key = kSummaryKey, .value = ClusterSummaryJson(metrics, now), .unlogged = true}});
      if (!rev.ok()) {
        log::Warn("server", "publishing the cluster summary failed",
                  {{"error", rev.status().ToString()}});
        continue;
      }
      published_term = t;
      shape = std::move(now_shape);
      published_ms = now;
    }
  });
}

// The audit log over the store, signing with its own key (DATA_DIR/audit.key). A
// log that does not open (records cut or altered) stops the start, with the first bad record:
// serving on would acknowledge changes with no record in a verifiable chain.
absl::Status ControlPlane::OpenAudit() {
  Impl& m = *impl_;
  if (!m.options.audit) return absl::OkStatus();
  absl::StatusOr<AuditKey> key = AuditKey::FromPemFile(m.creds->audit_key_path);
  if (!key.ok()) return key.status();
  // Several servers on one etcd write one chain; retention is the leader's (StartAuditTicker).
  m.audit = std::make_unique<AuditLog>(*m.store, m.clock, *std::move(key),
                                       AuditLogOptions{.shared_chain = m.OnEtcd()});
  if (absl::Status s = m.audit->Open(); !s.ok()) {
    absl::StatusOr<VerifyReport> report = m.audit->Verify();
    m.audit.reset();
    if (!report.ok() || report->ok) return s;
    return absl::DataLossError(
        Cat(s.message(), "; first bad record: seq ", report->first_bad_seq, ": ", report->what));
  }
  m.audited = std::make_unique<AuditedStore>(*m.store, *m.audit);
  // The anomaly rules watch every committed record; their Events go to the store directly.
  absl::StatusOr<std::unique_ptr<AnomalyDetector>> detector =
      AnomalyDetector::Create(m.options.anomaly_rules);
  if (!detector.ok()) return detector.status();
  m.anomalies = std::make_unique<AnomalyRecorder>(*m.store, *std::move(detector));
  if (absl::Status s = m.anomalies->Load(); !s.ok()) return s;
  if (!m.options.audit_webhook_url.empty()) {
    absl::StatusOr<WebhookUrl> url = ParseWebhookUrl(m.options.audit_webhook_url);
    if (!url.ok()) return url.status();
    m.webhook = std::make_unique<AuditWebhook>(
        *m.audit,
        MakeWebhookPoster(
            *url, {.ca_path = m.options.audit_webhook_ca, .token = m.options.audit_webhook_token}),
        AuditWebhookOptions{.cursor_path = m.options.data_dir + "/audit-webhook.cursor"});
  }
  m.audit->SetObserver(
      [anomalies = m.anomalies.get(), webhook = m.webhook.get()](const AuditRecord& r) {
        anomalies->Observe(r);
        if (webhook != nullptr) webhook->Notify();
      });
  return m.webhook ? m.webhook->Start() : absl::OkStatus();
}

// gpuctl's config for the admin: written on the first start (then the token is committed), and
// again when the port moved (keeping the token).
absl::Status ControlPlane::WriteAdminConfig() {
  Impl& m = *impl_;
  const std::string config = admin_config_path();
  if (m.first) {
    if (absl::Status s = WritePrivateFile(
            config, AdminConfigText(url(), m.creds->ca_cert_path, m.creds->admin_token),
            FileSync::kDurable);
        !s.ok()) {
      return s;
    }
    return CommitAdminToken(m.options.data_dir, m.creds->admin_token);
  }
  std::ifstream f(config);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.empty() || text.find(url()) != std::string::npos) return absl::OkStatus();
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    out += line.starts_with("server:") ? Cat("server: ", url()) : line;
    out += "\n";
  }
  return WritePrivateFile(config, out, FileSync::kDurable);
}

void ControlPlane::Stop() {
  Impl& m = *impl_;
  // The controllers first. On etcd, a clean stop also revokes the lease: another server takes
  // over at its next campaign, not a lease later.
  if (m.elector) m.elector->Stop();
  m.EndTerm();
  if (m.gateway) m.gateway->Stop();
  if (m.https) m.https->Stop();
  if (m.secrets) m.secrets->Stop();
  for (std::jthread* t : {&m.audit_ticker, &m.iam_follower, &m.summary_publisher}) {
    if (t->joinable()) {
      t->request_stop();
      t->join();
    }
  }
  if (m.webhook) m.webhook->Stop();  // after the POST in flight; the rest waits in the store
  if (m.audit && !m.audit_closed) {
    m.audit_closed = true;  // Stop runs again from the destructor: closed once
    // Every request has been answered: flush what is buffered and sign the head.
    if (absl::Status s = m.audit->Close(); !s.ok()) {
      log::Error("server", "audit log not closed", {{"error", s.ToString()}});
    }
  }
}

std::string ControlPlane::url() const {
  return Cat("https://", impl_->options.address, ":", impl_->https ? impl_->https->port() : 0);
}
std::string ControlPlane::gateway_url() const {
  if (!impl_->gateway) return "";
  return Cat("https://", impl_->options.gateway_address, ":", impl_->gateway->port());
}
std::string ControlPlane::ca_path() const { return impl_->options.data_dir + "/ca.crt"; }
std::string ControlPlane::admin_config_path() const {
  return impl_->options.data_dir + "/admin.config";
}
std::string ControlPlane::bootstrap_token() const { return impl_->bootstrap; }
bool ControlPlane::first_start() const { return impl_->first; }
std::string ControlPlane::store_name() const {
  const ControlPlaneOptions& o = impl_->options;
  return impl_->OnEtcd() ? o.store : o.data_dir + "/store.db";
}
int64_t ControlPlane::revision() const { return impl_->store ? impl_->store->Revision() : 0; }
bool ControlPlane::leader() const { return impl_->Term() != nullptr; }

}  // namespace gpucloud::server
