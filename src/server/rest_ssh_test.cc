// A job's ssh keys through the server (ssh_keys.h): creating a Volcano job with the ssh plugin
// stores the Secret <job>-ssh with the job, its tasks' assignments mount it and their node gets
// its files, deleting the job deletes it, and a user's Secret of that name refuses the job.
#include <gtest/gtest.h>

#include "server/controller_fixture.h"
#include "server/secret_store.h"
#include "server/ssh_keys.h"

namespace gpucloud::server {
namespace {

constexpr char kJobs[] = "/apis/gpucloud/v1/namespaces/default/jobs";
constexpr char kSecretKey[] = "/secrets/default/mpi-ssh";

// Volcano's MPI example: a master without GPUs and two workers, with the ssh and svc plugins.
constexpr char kVolcanoMpi[] = R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: mpi}
spec:
  minAvailable: 3
  plugins: {ssh: [], svc: [], env: []}
  tasks:
  - name: mpimaster
    replicas: 1
    template: {spec: {containers: [{name: m, image: mpi:1, command: [mpiexec, ./hello]}]}}
  - name: mpiworker
    replicas: 2
    template:
      spec:
        containers:
        - {name: w, image: mpi:1, command: [/usr/sbin/sshd, -D], resources: {limits: {nvidia.com/gpu: 2}}}
)";

class RestSshTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    SecretStoreOptions o;
    o.key_dir = (dir_.path() / "keys").string();
    absl::StatusOr<std::unique_ptr<SecretStore>> s = SecretStore::Open(*store_, clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    secrets_ = *std::move(s);
    api_->AttachSecrets(secrets_.get());
  }

  // Every assignment with its node's name.
  std::vector<std::pair<std::string, api::Assignment>> AllAssignments() {
    std::vector<std::pair<std::string, api::Assignment>> out;
    for (const char* node : {"node-a", "node-b"}) {
      for (const store::KeyValue& kv : Assignments(node)) {
        absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(kv.value);
        EXPECT_TRUE(a.ok()) << a.status();
        if (a.ok()) out.emplace_back(node, *std::move(a));
      }
    }
    return out;
  }

  std::unique_ptr<SecretStore> secrets_;
};

TEST_F(RestSshTest, TheSshPluginsSecretIsMadeWithTheJobMountedInEveryTaskAndDeletedWithIt) {
  Register("node-a", 4);
  Register("node-b", 4);
  Submit(kVolcanoMpi);

  // The Secret: a fresh pair whose public key is the private key's, and ssh's client config.
  absl::StatusOr<std::map<std::string, std::string>> values =
      secrets_->Reveal("default", "mpi-ssh");
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 4u);
  absl::StatusOr<std::string> pub = OpenSshPublicKey(values->at("id_rsa"), "default/mpi");
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(values->at("id_rsa.pub"), *pub);
  EXPECT_EQ(values->at("authorized_keys"), *pub);
  EXPECT_EQ(values->at("config"), kSshClientConfig);
  Json secret = Json::parse(store_->Get(kSecretKey)->value);
  EXPECT_EQ(secret["metadata"]["labels"][kSshKeysOwnerLabel], "mpi");
  // The job and its Secret were written in one transaction.
  EXPECT_EQ(store_->Get(kSecretKey)->mod_revision, JobRevision("mpi"));

  // Every task mounts it at Volcano's /root/.ssh and is told where it is.
  Pass();
  ASSERT_EQ(Status("mpi").phase, api::JobPhase::kScheduled);
  std::vector<std::pair<std::string, api::Assignment>> all = AllAssignments();
  ASSERT_EQ(all.size(), 3u);
  const SecretVolume want{"gpucloud-ssh", "mpi-ssh", "/root/.ssh", {}, false};
  for (const auto& [node, a] : all) {
    ASSERT_EQ(a.secret_volumes.size(), 1u) << a.name;
    EXPECT_EQ(a.secret_volumes[0], want) << a.name;
    EXPECT_EQ(a.env.at("GPUCLOUD_SSH_DIR"), "/root/.ssh") << a.name;
  }
  // The node that runs a task gets the keys' files for it.
  const auto& [node, first] = all[0];
  Request ask{"GET", Cat(api::NodePath(node), "/assignments/", first.name, "/secrets")};
  ask.who = Identity{"node:" + node, "", false, true, node};
  Response files = api_->Handle(ask);
  ASSERT_EQ(files.status, 200) << files.body;
  absl::StatusOr<api::TaskSecrets> got = api::TaskSecretsFromJson(files.body);
  ASSERT_TRUE(got.ok()) << got.status();
  std::map<std::string, std::string> by_path;
  for (const api::TaskSecrets::File& f : got->files) {
    EXPECT_EQ(f.volume, "gpucloud-ssh");
    by_path[f.path] = f.data;
  }
  EXPECT_EQ(by_path, *values);

  // Deleting the job (its tasks still stopping) deletes its keys with the request.
  Response del = Call("DELETE", Cat(kJobs, "/mpi"));
  EXPECT_EQ(del.status, 202) << del.body;
  EXPECT_TRUE(absl::IsNotFound(store_->Get(kSecretKey).status()));
}

TEST_F(RestSshTest, AJobThatNeverRanTakesItsKeysWithItAndAJobWithoutSshMakesNone) {
  Submit(kVolcanoMpi);
  ASSERT_TRUE(store_->Get(kSecretKey).ok());
  Response del = Call("DELETE", Cat(kJobs, "/mpi"));
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_TRUE(absl::IsNotFound(store_->Get(kSecretKey).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/mpi").status()));

  Submit(GangJob("plain", 1, 1));
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/secrets/default/plain-ssh").status()));
}

TEST_F(RestSshTest, AUsersSecretOfThatNameRefusesTheJobAndIsLeftAlone) {
  Response made = Call("POST", "/apis/gpucloud/v1/namespaces/default/secrets",
                       R"({"apiVersion": "gpucloud/v1", "kind": "Secret",
                           "metadata": {"name": "mpi-ssh"}, "stringData": {"id_rsa": "mine"}})");
  ASSERT_EQ(made.status, 201) << made.body;
  const int64_t rev = store_->Get(kSecretKey)->mod_revision;
  for (bool dry_run : {true, false}) {
    Response r = api_->Handle({"POST",
                               kJobs,
                               dry_run ? std::map<std::string, std::string>{{"dryRun", "All"}}
                                       : std::map<std::string, std::string>{},
                               kVolcanoMpi,
                               {"root", "", true}});
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_NE(r.body.find("secret default/mpi-ssh already exists"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/mpi").status()));
  EXPECT_EQ(store_->Get(kSecretKey)->mod_revision, rev);
  EXPECT_EQ(secrets_->Reveal("default", "mpi-ssh")->at("id_rsa"), "mine");
}

TEST_F(RestSshTest, ApplyKeepsTheKeysAndDroppingTheSshPluginDeletesThem) {
  Submit(kVolcanoMpi);
  const std::string key = secrets_->Reveal("default", "mpi-ssh")->at("id_rsa");
  std::string more = kVolcanoMpi;
  more.insert(more.find("  plugins"), "  maxRetry: 5\n");
  Response r = Call("PUT", Cat(kJobs, "/mpi"), more);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(secrets_->Reveal("default", "mpi-ssh")->at("id_rsa"), key);  // the same pair

  std::string without = more;
  without.replace(without.find("ssh: [], "), 9, "");
  r = Call("PUT", Cat(kJobs, "/mpi"), without);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(absl::IsNotFound(store_->Get(kSecretKey).status()));
  r = Call("PUT", Cat(kJobs, "/mpi"), more);  // and asking again makes a new pair
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(secrets_->Reveal("default", "mpi-ssh")->at("id_rsa"), key);
}

}  // namespace
}  // namespace gpucloud::server
