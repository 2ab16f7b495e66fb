#include "server/command.h"

#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "absl/time/clock.h"
#include "core/log_flags.h"
#include "core/parse.h"
#include "core/private_file.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/audit_webhook.h"
#include "server/control_plane.h"
#include "server/credentials.h"
#include "server/secret_store.h"

namespace gpucloud::server {

absl::StatusOr<SchedulerConfig> LoadSchedulerConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(Cat(path, ": cannot read"));
  std::stringstream text;
  text << f.rdbuf();
  manifest::ParseResult p = manifest::ParseManifests(text.str(), path);
  if (!p.ok()) {
    std::vector<std::string> lines;
    for (const manifest::Diagnostic& d : p.errors) lines.push_back(d.ToString());
    return absl::InvalidArgumentError(Join(lines, "\n"));
  }
  if (p.manifests.size() != 1 ||
      !std::holds_alternative<SchedulerConfiguration>(p.manifests[0].object)) {
    return absl::InvalidArgumentError(Cat(path, ": needs exactly one SchedulerConfiguration"));
  }
  return std::get<SchedulerConfiguration>(p.manifests[0].object).spec;
}

namespace {

// `gpucloud server admin-config --data-dir DIR [-o FILE]`: a new admin credential from the
// server's CA and token book, for an operator who lost admin.config. The running server accepts
// it from its next start.
int RunAdminConfig(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"gpucloud server admin-config: issue a new admin token and gpuctl config"};
  std::string dir = ".gpucloud", output, listen = "127.0.0.1:8443";
  app.add_option("--data-dir", dir, "the server's data directory")->check(CLI::ExistingDirectory);
  app.add_option("-o,--output", output,
                 "where to write the config (default DATA_DIR/admin.config)");
  app.add_option("--server", listen, "the server's address and port, for the config");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  absl::StatusOr<HostPort> addr = ParseHostPort("--server", listen);
  if (!addr.ok()) {
    err << "gpucloud server admin-config: " << addr.status().message() << "\n";
    return 2;
  }
  if (!std::filesystem::exists(dir + "/ca.crt") || !std::filesystem::exists(dir + "/tokens")) {
    err << "gpucloud server admin-config: " << dir
        << " holds no server credentials (ca.crt, tokens)\n";
    return 1;
  }
  if (output.empty()) output = dir + "/admin.config";
  std::string token = NewToken();
  std::string url = Cat("https://", addr->host, ":", addr->port);
  absl::Status s =
      WritePrivateFile(output, AdminConfigText(url, dir + "/ca.crt", token), FileSync::kDurable);
  if (s.ok()) s = CommitAdminToken(dir, token);
  if (!s.ok()) {
    err << "gpucloud server admin-config: " << s.message() << "\n";
    return 1;
  }
  out << "a new admin token is in " << output << " (valid from the server's next start)\n";
  return 0;
}

// `gpucloud server rotate-keys --data-dir DIR [--key-dir KEYS]`: a new current key for the
// Secrets, with the server stopped (it holds KEYS/lock while it runs, and this refuses then).
// The server rewraps what older keys seal in the background when it next starts.
int RunRotateKeys(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"gpucloud server rotate-keys: make a new current key for the Secrets"};
  std::string dir = ".gpucloud", key_dir;
  app.add_option("--data-dir", dir, "the server's data directory")->check(CLI::ExistingDirectory);
  app.add_option("--key-dir", key_dir, "the key ring's directory (default DATA_DIR/keys)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  if (key_dir.empty()) key_dir = dir + "/keys";
  absl::StatusOr<KeyInfo> key = RotateKeysOffline(key_dir, absl::Now());
  if (!key.ok()) {
    err << "gpucloud server rotate-keys: " << key.status().message() << "\n";
    return 1;
  }
  out << "new current key " << key->id << " in " << key_dir
      << "/kek.json; the server rewraps the secrets of older keys in the background when it "
         "next starts, then retires those keys\n";
  return 0;
}

// Checks --audit-webhook's URL before anything starts and reads the token file.
absl::Status ApplyWebhookFlags(ControlPlaneOptions& o, const std::string& token_file) {
  if (o.audit_webhook_url.empty()) {
    if (!o.audit_webhook_ca.empty() || !token_file.empty()) {
      return absl::InvalidArgumentError(
          "--audit-webhook-ca and --audit-webhook-token-file need --audit-webhook");
    }
    return absl::OkStatus();
  }
  if (!o.audit) return absl::InvalidArgumentError("--audit-webhook needs the audit log (--audit)");
  if (absl::StatusOr<WebhookUrl> url = ParseWebhookUrl(o.audit_webhook_url); !url.ok()) {
    return url.status();
  }
  if (!o.audit_webhook_ca.empty()) {
    o.audit_webhook_ca = std::filesystem::absolute(o.audit_webhook_ca).string();
  }
  if (token_file.empty()) return absl::OkStatus();
  std::ifstream f(token_file);
  std::getline(f, o.audit_webhook_token);
  while (!o.audit_webhook_token.empty() &&
         std::isspace(static_cast<unsigned char>(o.audit_webhook_token.back()))) {
    o.audit_webhook_token.pop_back();
  }
  if (o.audit_webhook_token.empty()) {
    return absl::InvalidArgumentError(
        Cat("--audit-webhook-token-file ", token_file, ": the first line is empty"));
  }
  return absl::OkStatus();
}

}  // namespace

void AddAutoscalerFlags(CLI::App& app, AutoscalerFlags& f) {
  app.add_option("--scale-down-after", f.scale_down_after,
                 "an autoscaled node idle this long is removed (default 10m)");
  app.add_option("--boot-timeout", f.boot_timeout,
                 "a provisioning request not Ready by then is cancelled and its pool backs off "
                 "(default 10m)");
  app.add_option("--autoscale-backoff", f.backoff,
                 "how long a pool whose request failed or timed out is not asked again (default "
                 "5m)");
  app.add_option("--autoscale-max-gpus", f.max_gpus,
                 "the most GPUs the cluster may grow to (default: no maximum)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--autoscale-max-usd-per-hour", f.max_usd_per_hour,
                 "the most dollars per hour the cluster's machines may cost (default: none)");
  app.add_flag("--local-provider", f.local_provider,
               "let NodePools use provider local: agents with simulated GPUs started by this "
               "server as processes on this machine (demos, tests)");
  app.add_option("--currency", f.currency,
                 "the currency of prices and Namespace budgets, an ISO 4217 code (default USD)");
  app.add_option("--pue", f.pue,
                 "the data centre's power usage effectiveness, to turn GPU energy into facility "
                 "energy and carbon (default 1.0: the GPUs' energy alone)")
      ->check(CLI::Range(1.0, 3.0));
  app.add_option("--carbon-intensity", f.carbon_intensity,
                 "grid carbon intensity in gCO2e/kWh for pools that name none (default 0: "
                 "unknown)")
      ->check(CLI::Range(0, static_cast<int>(kMaxCarbonIntensity)));
  app.add_option("--local-agent-arg", f.local_agent_args,
                 "an argument for every local agent (repeatable), e.g. "
                 "--local-agent-arg=--allow-host-processes");
}

absl::Status ApplyAutoscalerFlags(const AutoscalerFlags& f, ControlPlaneOptions& o) {
  for (auto [flag, text, into] :
       {std::tuple{"--scale-down-after", &f.scale_down_after, &o.scale_down_after_ms},
        std::tuple{"--boot-timeout", &f.boot_timeout, &o.boot_timeout_ms},
        std::tuple{"--autoscale-backoff", &f.backoff, &o.autoscale_backoff_ms}}) {
    absl::StatusOr<int64_t> s = ParseDurationSeconds(*text);
    if (!s.ok()) return absl::InvalidArgumentError(Cat(flag, ": ", s.status().message()));
    if (*s <= 0) return absl::InvalidArgumentError(Cat(flag, ": must be longer than 0s"));
    *into = *s * 1000;
  }
  o.autoscale_max_gpus = f.max_gpus;
  if (!f.max_usd_per_hour.empty()) {
    absl::StatusOr<MicroUsd> v = ParsePrice(f.max_usd_per_hour);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          Cat("--autoscale-max-usd-per-hour: ", v.status().message()));
    }
    o.autoscale_max_usd_per_hour = *v;
  }
  o.local_provider = f.local_provider;
  o.local_agent_args = f.local_agent_args;
  if (f.currency.size() != 3 || !std::all_of(f.currency.begin(), f.currency.end(),
                                             [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return absl::InvalidArgumentError(
        Cat("--currency: \"", f.currency, "\" is not an ISO 4217 code such as USD or EUR"));
  }
  o.currency = f.currency;
  o.carbon = {.pue = f.pue, .default_intensity = f.carbon_intensity};
  return absl::OkStatus();
}

void AddGatewayFlag(CLI::App& app, std::string& listen) {
  app.add_option("--gateway-listen", listen,
                 "address and port of the inference gateway (HTTPS; port 0: any; "
                 "docs/services.md); none by default");
}

absl::Status ApplyGatewayFlag(const std::string& listen, ControlPlaneOptions& o) {
  if (listen.empty()) return absl::OkStatus();
  absl::StatusOr<HostPort> g = ParseHostPort("--gateway-listen", listen);
  if (!g.ok()) return g.status();
  o.gateway_address = g->host;
  o.gateway_port = g->port;
  return absl::OkStatus();
}

int RunServer(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // Everything the server writes (store, credentials, logs) is its own: 0600 files, 0700 dirs.
  umask(077);
  if (argc >= 2 && std::string_view(argv[1]) == "admin-config") {
    return RunAdminConfig(argc - 1, argv + 1, out, err);
  }
  if (argc >= 2 && std::string_view(argv[1]) == "rotate-keys") {
    return RunRotateKeys(argc - 1, argv + 1, out, err);
  }
  CLI::App app{"gpucloud server: the control plane"};
  std::string listen = "127.0.0.1:8443", scheduler_config;
  ControlPlaneOptions o;
  double heartbeat_timeout_s = 3, grace_s = 30, node_cert_hours = 24;
  app.add_option("--data-dir", o.data_dir,
                 "where the certificates, tokens, keys and logs live, and the SQLite store");
  app.add_option("--store", o.store,
                 "the store: sqlite (DATA_DIR/store.db, the default) or "
                 "etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (an etcd cluster's members, the "
                 "server's keys under PREFIX, default /gpucloud; docs/server.md); etcds://... "
                 "for TLS 1.3 to etcd (--etcd-ca)");
  app.add_option("--etcd-ca", o.etcd_ca,
                 "with --store etcds://: the CA file that signed the etcd members' certificates");
  app.add_option("--etcd-cert", o.etcd_cert,
                 "with --store etcds://: the client certificate shown to etcd "
                 "(--client-cert-auth), with --etcd-key");
  app.add_option("--etcd-key", o.etcd_key, "the private key of --etcd-cert");
  app.add_option("--listen", listen, "address and port to serve HTTPS on (port 0: any)");
  std::string gateway_listen;
  AddGatewayFlag(app, gateway_listen);
  app.add_option("--scheduler-config", scheduler_config, "a SchedulerConfiguration YAML file");
  app.add_option("--record-scheduler", o.record_scheduler,
                 "record what the scheduler is given and decides, pass by pass, to this file "
                 "(JSON lines; `gpucloud sim --trace FILE` replays it; docs/simulator.md)");
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s,
                 "seconds without a heartbeat before a node is NotReady")
      ->check(CLI::PositiveNumber);
  app.add_option("--grace", grace_s, "seconds a stopped task gets between SIGTERM and SIGKILL")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-root", o.checkpoint_root,
                 "default checkpoint directory root (a shared file system on several nodes)");
  double leader_lease_s = 5;
  app.add_option("--leader-lease", leader_lease_s,
                 "on etcd: seconds of the leader's lease; the controllers move to another server "
                 "within about this long (plus a third) of the leader's death or loss of etcd")
      ->check(CLI::Range(1.0, 3600.0));
  double store_wait_s = 30;
  app.add_option("--store-wait", store_wait_s,
                 "on etcd: seconds a start waits for etcd to answer, trying again with back-off")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_flag("--init", o.init,
               "start with an empty store even though an earlier server's credentials are there");
  app.add_option("--join-key-file", o.join_key_file,
                 "on etcd, a new server of the control plane already there: a copy of one of its "
                 "servers' KEY_DIR/join.key (default DATA_DIR/keys/join.key; its CA, tokens and "
                 "keys come from the store, sealed under that key; docs/operations.md)");
  app.add_option("--max-jobs-per-namespace", o.max_jobs_per_namespace,
                 "jobs one namespace may hold (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-log-bytes-per-namespace", o.max_log_bytes_per_namespace,
                 "bytes of task output one namespace's logs may hold on the server (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--node-cert-hours", node_cert_hours,
                 "hours an agent's client certificate is valid (renewed at two thirds of it)")
      ->check(CLI::Range(0.01, 24.0 * 365));
  app.add_flag("--audit,!--no-audit", o.audit,
               "keep the audit log (default on; off only to measure what it costs)");
  double audit_days = 366;
  app.add_option("--audit-retention-days", audit_days,
                 "days of audit records kept (0: all); older ones go every 10 minutes")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--audit-max-records", o.audit_retention.max_records,
                 "audit records kept at most (0: no bound); the oldest go first")
      ->check(CLI::NonNegativeNumber);
  std::map<std::string, NamespaceProvisioning> provisioning{
      {"explicit", NamespaceProvisioning::kExplicit}, {"auto", NamespaceProvisioning::kAuto}};
  app.add_option("--namespace-provisioning", o.namespace_provisioning,
                 "a write into a namespace that does not exist: explicit (404; namespaces are "
                 "made by admins or with their users) or auto (made on the spot)")
      ->transform(CLI::CheckedTransformer(provisioning, CLI::ignore_case));
  app.add_option("--key-dir", o.key_dir,
                 "the Secrets' key ring, kept out of store backups (default DATA_DIR/keys)");
  app.add_option("--log-dir", o.log_dir,
                 "the tasks' logs (default DATA_DIR/logs; several servers: one shared directory)");
  std::string webhook_token_file;
  app.add_option("--audit-webhook", o.audit_webhook_url,
                 "POST every audit record to this https:// URL (JSON lines; docs/audit.md)");
  app.add_option("--audit-webhook-ca", o.audit_webhook_ca,
                 "the CA file that signs the webhook receiver's certificate (default: system's)")
      ->check(CLI::ExistingFile);
  app.add_option("--audit-webhook-token-file", webhook_token_file,
                 "a file whose first line is the bearer token sent to the webhook")
      ->check(CLI::ExistingFile);
  std::string anomaly_rules;
  app.add_option("--anomaly-rules", anomaly_rules,
                 "a YAML file of the audit log's anomaly rules (docs/audit.md)");
  app.add_option("--history-revisions", o.compaction.keep_revisions,
                 "revisions of change history kept for watches (0: keep all)")
      ->check(CLI::NonNegativeNumber);
  AutoscalerFlags autoscaler_flags;
  AddAutoscalerFlags(app, autoscaler_flags);
  log::Flags log_flags;
  log::AddFlags(app, log_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  if (absl::Status s = log::ConfigureFromFlags(log_flags); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 2;
  }
  if (absl::Status s = ApplyAutoscalerFlags(autoscaler_flags, o); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 2;
  }
  absl::StatusOr<HostPort> addr = ParseHostPort("--listen", listen);
  if (!addr.ok()) {
    err << "gpucloud server: " << addr.status().message() << "\n";
    return 2;
  }
  o.address = addr->host;
  o.port = addr->port;
  if (absl::Status s = ApplyGatewayFlag(gateway_listen, o); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 2;
  }
  absl::StatusOr<StoreLocation> where = ParseStoreUrl(o.store);
  if (!where.ok()) {
    err << "gpucloud server: " << where.status().message() << "\n";
    return 2;
  }
  if (absl::Status s = EtcdTlsFromFlags(*where, o).status(); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 2;
  }
  // Absolute, so that what is derived from it (the checkpoint root tasks are given, the paths in
  // admin.config) means the same from any working directory.
  o.data_dir = std::filesystem::absolute(o.data_dir).lexically_normal().string();
  for (std::string* d : {&o.key_dir, &o.log_dir}) {
    if (!d->empty()) *d = std::filesystem::absolute(*d).lexically_normal().string();
  }
  o.heartbeat_timeout_ms = static_cast<int64_t>(heartbeat_timeout_s * 1000);
  o.leader_lease = absl::Seconds(leader_lease_s);
  o.store_wait = absl::Seconds(store_wait_s);
  o.stop_grace_ms = static_cast<int64_t>(grace_s * 1000);
  o.node_certificate_ttl = absl::Seconds(node_cert_hours * 3600);
  o.audit_retention.max_age_ms = static_cast<int64_t>(audit_days * 24 * 3600 * 1000);
  if (!scheduler_config.empty()) {
    absl::StatusOr<SchedulerConfig> c = LoadSchedulerConfig(scheduler_config);
    if (!c.ok()) {
      err << "gpucloud server: --scheduler-config: " << c.status().message() << "\n";
      return 2;
    }
    o.scheduler = *c;
  }
  if (absl::Status s = ApplyWebhookFlags(o, webhook_token_file); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 2;
  }
  if (!anomaly_rules.empty()) {
    absl::StatusOr<AnomalyRules> rules = LoadAnomalyRulesFile(anomaly_rules);
    if (!rules.ok()) {
      err << "gpucloud server: --anomaly-rules: " << rules.status().message() << "\n";
      return 2;
    }
    o.anomaly_rules = *std::move(rules);
  }
  // A client that goes away must not kill the server (TLS writes to a closed socket, or output
  // to a closed pipe): such writes fail with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  ControlPlane cp(o);
  if (absl::Status s = cp.Start(); !s.ok()) {
    err << "gpucloud server: " << s.message() << "\n";
    return 1;
  }
  if (cp.first_start()) {
    out << "first start: admin token written to " << cp.admin_config_path()
        << " (copy it to ~/.gpucloud/config for gpuctl); agents join with the token in "
        << o.data_dir << "/bootstrap.token\n";
    if (where->kind == StoreLocation::Kind::kEtcd) {
      out << "other servers join this control plane with --join-key-file: a copy of "
          << (o.key_dir.empty() ? o.data_dir + "/keys" : o.key_dir) << "/join.key\n";
    }
  }
  out << "gpucloud server: serving " << cp.url() << " (CA " << cp.ca_path() << ", store "
      << cp.store_name() << ", revision " << cp.revision()
      << (cp.leader() ? ", leader" : ", standby: another server leads") << ")" << std::endl;
  if (!cp.gateway_url().empty()) {
    out << "gpucloud server: inference gateway on " << cp.gateway_url() << std::endl;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  out << "gpucloud server: stopping on signal " << sig << std::endl;
  cp.Stop();
  return 0;
}

}  // namespace gpucloud::server
