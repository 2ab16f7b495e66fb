// gpuctl apply of Secret manifests and apply --prune, against a real server with a SecretStore
// (CTest label `integration`): a Secret created, unchanged, configured, diffed and deleted from
// its file, never a value printed; a bad base64 value refused before anything is sent; prune
// deleting what gpuctl applied before and no longer finds in the files, and only that.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "api/client.h"
#include "cli/gpuctl.h"
#include "cli/gpuctl_fixture.h"
#include "server/secret_store.h"

namespace gpucloud::cli {
namespace {

constexpr char kToken[] = "hf_VALUE_4417_never_shown";
constexpr char kOther[] = "hf_VALUE_4418_never_shown";  // of the same length
constexpr char kUser[] = "alice_never_shown";

class ApplyServerTest : public GpuctlServerFixture {
 protected:
  ApplyServerTest() : GpuctlServerFixture("gpuctl-apply", 1'700'000'000'000) {}
  void Attach(server::RestApi& api) override {
    server::SecretStoreOptions o;
    o.key_dir = dir_ / "keys";
    absl::StatusOr<std::unique_ptr<server::SecretStore>> s =
        server::SecretStore::Open(*store_, clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    secrets_ = *std::move(s);
    api.AttachSecrets(secrets_.get());
  }
  static void ExpectNoValue(const Ran& r) {
    for (const std::string& v : {std::string(kToken), std::string(kOther), std::string(kUser),
                                 absl::Base64Escape(kToken), absl::Base64Escape(kOther)}) {
      EXPECT_EQ(r.out.find(v), std::string::npos) << r.out;
      EXPECT_EQ(r.err.find(v), std::string::npos) << r.err;
    }
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  static std::string SecretYaml(const std::string& token, const std::string& ns = "team-a") {
    return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hf\n  namespace: " + ns +
           "\n  labels: {app: web}\ntype: Opaque\ndata:\n  token: " + absl::Base64Escape(token) +
           "\nstringData:\n  user: " + kUser + "\n";
  }
  std::map<std::string, std::string> Revealed() {
    absl::StatusOr<std::map<std::string, std::string>> v = secrets_->Reveal("team-a", "hf");
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::map<std::string, std::string>{};
  }
  int64_t Revision(const std::string& key) {
    absl::StatusOr<store::KeyValue> kv = store_->Get(key);
    return kv.ok() ? kv->mod_revision : -1;
  }
  static std::string JobYaml(const std::string& name, const std::string& labels) {
    return "apiVersion: gpucloud/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  labels: {" +
           labels + "}\nspec:\n  tasks:\n  - name: main\n    command: [\"true\"]\n";
  }

  std::unique_ptr<server::SecretStore> secrets_;
};

TEST_F(ApplyServerTest, ASecretManifestIsCreatedUnchangedConfiguredAndDeleted) {
  const std::string file = Write("hf.yaml", SecretYaml(kToken));
  Ran dry = Gpuctl({"apply", "-f", file, "--dry-run=client"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.out, "secret/hf created (dry run)\n");
  EXPECT_EQ(Revision("/secrets/team-a/hf"), -1);  // nothing was sent
  Ran created = Gpuctl({"apply", "-f", file});
  ASSERT_EQ(created.code, 0) << created.err;
  EXPECT_EQ(created.out, "secret/hf created\n");
  ExpectNoValue(created);
  EXPECT_EQ(Revealed(), (std::map<std::string, std::string>{{"token", kToken}, {"user", kUser}}));
  const int64_t first = Revision("/secrets/team-a/hf");

  Ran same = Gpuctl({"apply", "-f", file});
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out, "secret/hf unchanged\n");
  EXPECT_EQ(Revision("/secrets/team-a/hf"), first);  // nothing was written
  Ran no_diff = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(no_diff.code, 0) << no_diff.out << no_diff.err;
  EXPECT_EQ(no_diff.out, "");

  // Another value of the same size: the server's sizes are the same, the digest is not.
  Write("hf.yaml", SecretYaml(kOther));
  Ran diff = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(diff.code, 1) << diff.err;
  EXPECT_TRUE(diff.out.starts_with("--- live/secret/hf\n+++ file/secret/hf\n")) << diff.out;
  EXPECT_NE(diff.out.find("gpuctl.gpucloud.io/last-applied: h1-"), std::string::npos) << diff.out;
  ExpectNoValue(diff);
  Ran dry_change = Gpuctl({"apply", "-f", file, "--dry-run=client"});
  EXPECT_EQ(dry_change.out, "secret/hf configured (dry run)\n");
  Ran server_dry = Gpuctl({"apply", "-f", file, "--dry-run=server"});
  if (server_dry.code == 0) {  // a server whose Secrets take dryRun=All
    EXPECT_EQ(server_dry.out, "secret/hf configured (server dry run)\n");
  } else {  // one that does not says so, naming the parameter
    EXPECT_NE(server_dry.err.find("dryRun"), std::string::npos) << server_dry.err;
  }
  ExpectNoValue(server_dry);
  EXPECT_EQ(Revealed().at("token"), kToken);  // neither dry run wrote
  Ran configured = Gpuctl({"apply", "-f", file});
  ASSERT_EQ(configured.code, 0) << configured.err;
  EXPECT_EQ(configured.out, "secret/hf configured\n");
  EXPECT_EQ(Revealed().at("token"), kOther);
  EXPECT_EQ(Gpuctl({"apply", "-f", file}).out, "secret/hf unchanged\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"get", "secret", "hf", "-n", "team-a", "-o", "yaml"},
        {"describe", "secret", "hf", "-n", "team-a"}}) {
    Ran r = Gpuctl(args);
    EXPECT_EQ(r.code, 0) << r.err;
    ExpectNoValue(r);
  }

  // A bad base64 value: the file's line and the key, no value, and nothing sent.
  const std::string bad =
      Write("bad.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: hf, namespace: team-a}\n"
            "data:\n  token: " +
                std::string(kToken) + "\n");
  Ran refused = Gpuctl({"apply", "-f", bad});
  EXPECT_EQ(refused.code, kExitInvalid);
  EXPECT_EQ(refused.out, "");
  EXPECT_EQ(refused.err, bad + ":5:10: data[token]: is not standard base64 (with padding)\n");
  ExpectNoValue(refused);
  EXPECT_EQ(Revealed().at("token"), kOther);

  Ran deleted = Gpuctl({"delete", "-f", file});
  ASSERT_EQ(deleted.code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "secret/hf deleted\n");
  EXPECT_EQ(Revision("/secrets/team-a/hf"), -1);
  Ran diff_gone = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(diff_gone.code, 1);
  EXPECT_TRUE(diff_gone.out.starts_with("--- /dev/null\n+++ file/secret/hf\n")) << diff_gone.out;
  EXPECT_NE(diff_gone.out.find("token: \"*** (25 bytes)\""), std::string::npos) << diff_gone.out;
  EXPECT_NE(diff_gone.out.find("user: \"*** (17 bytes)\""), std::string::npos) << diff_gone.out;
  ExpectNoValue(diff_gone);
}

TEST_F(ApplyServerTest, PruneDeletesWhatGpuctlAppliedBeforeAndTheFilesNoLongerHold) {
  Write("app/a.yaml", JobYaml("a", "app: web"));
  Write("app/old.yaml", JobYaml("old", "app: web"));
  Write("app/s.yaml", SecretYaml(kToken, "default"));
  const std::string app = (dir_ / "app").string();
  Ran first = Gpuctl({"apply", "-f", app, "--prune", "-l", "app=web"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, "secret/hf created\njob.gpucloud/a created\njob.gpucloud/old created\n");
  // Applied by gpuctl without the selector's label, and one with it not applied by gpuctl.
  ASSERT_EQ(Gpuctl({"apply", "-f", Write("other.yaml", JobYaml("other", "app: db"))}).code, 0);
  api::Client client(*api::LoadClientConfig(config_));
  absl::StatusOr<api::HttpResponse> manual = client.Call(
      "PUT", "/apis/gpucloud/v1/namespaces/default/jobs/manual", JobYaml("manual", "app: web"));
  ASSERT_TRUE(manual.ok() && manual->status == 201) << (manual.ok() ? manual->body : "");

  std::filesystem::remove(dir_ / "app" / "old.yaml");
  std::filesystem::remove(dir_ / "app" / "s.yaml");
  Write("app/b.yaml", JobYaml("b", "app: web"));
  Ran dry = Gpuctl({"apply", "-f", app, "--prune", "-l", "app=web", "--dry-run=client"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.out,
            "job.gpucloud/a unchanged (dry run)\njob.gpucloud/b created (dry run)\n"
            "job.gpucloud/old pruned (dry run)\nsecret/hf pruned (dry run)\n");
  EXPECT_GT(Revision("/jobs/default/old"), 0);  // nothing was deleted
  Ran pruned = Gpuctl({"apply", "-f", app, "--prune", "-l", "app=web"});
  ASSERT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_EQ(pruned.out,
            "job.gpucloud/a unchanged\njob.gpucloud/b created\njob.gpucloud/old pruned\n"
            "secret/hf pruned\n");
  EXPECT_EQ(Revision("/jobs/default/old"), -1);
  EXPECT_EQ(Revision("/secrets/default/hf"), -1);
  EXPECT_GT(Revision("/jobs/default/other"), 0);   // not selected
  EXPECT_GT(Revision("/jobs/default/manual"), 0);  // not gpuctl's
  EXPECT_GT(Revision("/jobs/default/a"), 0);

  // --all prunes what gpuctl applied whatever its labels, of the kinds and namespaces applied.
  Ran all = Gpuctl({"apply", "-f", app, "--prune", "--all"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out,
            "job.gpucloud/a unchanged\njob.gpucloud/b unchanged\n"
            "job.gpucloud/other pruned\n");
  EXPECT_GT(Revision("/jobs/default/manual"), 0);

  // As kubectl: --prune needs a selector or --all, and not both.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"apply", "-f", app, "--prune"},
        {"apply", "-f", app, "--prune", "--all", "-l", "app=web"},
        {"apply", "-f", app, "--prune", "-l", "=web"}}) {
    Ran r = Gpuctl(args);
    EXPECT_EQ(r.code, kExitUsage) << r.out;
    EXPECT_TRUE(r.err.starts_with("gpuctl apply: ")) << r.err;
  }
}

}  // namespace
}  // namespace gpucloud::cli
