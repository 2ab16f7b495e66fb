// gpuctl against a real server (CTest label `integration`): apply, get and delete through HTTPS
// with the server's CA and token from a client config.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/usage.h"
#include "cli/gpuctl.h"
#include "manifest/json_yaml.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::cli {
namespace {

using namespace std::chrono_literals;

class GpuctlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    creds_ = *server::EnsureCredentials(dir_.string());
    ASSERT_TRUE(server::CommitAdminToken(dir_.string(), creds_.admin_token).ok());
    tokens_ = *server::TokenBook::Load(dir_.string());
    store_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    api_ = std::make_unique<server::RestApi>(*store_, clock_, 3);
    server_ = std::make_unique<server::HttpsServer>(
        *api_, tokens_, *store_,
        server::HttpsServer::Options{.cert_path = creds_.cert_path, .key_path = creds_.key_path});
    ASSERT_TRUE(server_->Start().ok());
    config_ = (dir_ / "config").string();
    std::ofstream(config_) << "server: https://127.0.0.1:" << server_->port()
                           << "\ncertificate-authority: " << creds_.ca_cert_path
                           << "\ntoken: " << creds_.admin_token << "\n";
  }
  void TearDown() override { server_.reset(); }
  struct Run {
    int code;
    std::string out, err;
  };
  Run Gpuctl(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::istringstream in(stdin_text);
    std::ostringstream out, err;
    int code = GpuctlTo(args, in, out, err);
    return {code, out.str(), err.str()};
  }
  int GpuctlTo(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
               std::ostream& err) {
    std::vector<const char*> argv = {"gpuctl", "--config", config_.c_str()};
    for (const std::string& a : args) argv.push_back(a.c_str());
    return RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
  }
  testing_util::TempDir tmp_{"gpuctl-server"};
  const std::filesystem::path& dir_ = tmp_.path();
  server::Credentials creds_;
  server::TokenBook tokens_;
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::HttpsServer> server_;
  std::string config_;
};

TEST_F(GpuctlServerTest, ApplyGetDelete) {
  Run a = Gpuctl({"apply", "-f",
                  std::string(GPUCLOUD_SOURCE_DIR) + "/examples/seed-003-volcano-pytorch.yaml"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, "job.gpucloud/pytorch-job created\n");
  // A second apply of the same object changes nothing, and says so, as kubectl does.
  EXPECT_EQ(Gpuctl({"apply", "-f",
                    std::string(GPUCLOUD_SOURCE_DIR) + "/examples/seed-003-volcano-pytorch.yaml"})
                .out,
            "job.gpucloud/pytorch-job unchanged\n");
  Run g = Gpuctl({"get", "jobs"});
  ASSERT_EQ(g.code, 0) << g.err;
  // describe's times are ages ("1095d ago": the server's fake clock is in 2023), not unix seconds.
  Run d = Gpuctl({"describe", "job", "pytorch-job"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("\nSubmitted:     "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find(" ago  first started: -  this attempt scheduled: -  finished: -\n"),
            std::string::npos)
      << d.out;
  EXPECT_EQ(d.out.find("unix seconds"), std::string::npos) << d.out;
  EXPECT_NE(g.out.find("pytorch-job"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("Pending"), std::string::npos) << g.out;  // no server loop here
  Run y = Gpuctl({"get", "jobs", "pytorch-job", "-o", "yaml"});
  EXPECT_NE(y.out.find("kind: Job"), std::string::npos) << y.out;
  {  // what get -o yaml prints (status and server metadata included) can be applied again
    std::string again = (std::filesystem::path(dir_) / "again.yaml").string();
    std::ofstream(again) << y.out;
    Run a2 = Gpuctl({"apply", "-f", again});
    EXPECT_EQ(a2.code, 0) << a2.err << "\n" << y.out;
    EXPECT_EQ(a2.out, "job.gpucloud/pytorch-job unchanged\n");
  }
  EXPECT_EQ(Gpuctl({"delete", "jobs", "pytorch-job"}).out, "job.gpucloud/pytorch-job deleted\n");
  Run gone = Gpuctl({"get", "jobs", "pytorch-job"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_EQ(gone.err, "gpuctl: Job default/pytorch-job not found\n");
}

TEST_F(GpuctlServerTest, RunSubmitsAJobFromOneLine) {
  Run r = Gpuctl({"run", "--gpus", "4", "--type", "h100", "--name", "quick", "--", "python",
                  "train.py", "--lr", "0.1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "job default/quick created: Job default/quick: 1 x main (4 GPUs, H100-80GB); gang of "
            "1; 4 GPUs in all; queue default, on-demand\n");
  Run y = Gpuctl({"get", "jobs", "quick", "-o", "yaml"});
  EXPECT_NE(y.out.find("- python\n"), std::string::npos) << y.out;
  EXPECT_NE(y.out.find("- \"0.1\"\n"), std::string::npos) << y.out;  // a string stays one
  // -o yaml is the object -o json prints, status and server metadata included.
  Run j = Gpuctl({"get", "jobs", "quick", "-o", "json"});
  ASSERT_TRUE(y.out.starts_with("---\n")) << y.out;
  absl::StatusOr<std::string> back = manifest::YamlToJson(y.out.substr(4));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(nlohmann::json::parse(*back), nlohmann::json::parse(j.out));
  EXPECT_NE(y.out.find("status:"), std::string::npos) << y.out;
  EXPECT_NE(y.out.find("uid:"), std::string::npos) << y.out;
  Run bad = Gpuctl({"run", "--type", "tpu", "--", "python"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("unknown GPU type \"tpu\""), std::string::npos) << bad.err;
  EXPECT_EQ(Gpuctl({"run", "--gpus", "1"}).code, 2);  // no command
}

// What one thread writes, for another to wait on: the text, and how often it was flushed (gpuctl
// get -w flushes once the list is printed, and after each change it prints).
class WatchedOutput : public std::streambuf {
 public:
  std::string Text() {
    std::lock_guard lock(mu_);
    return text_;
  }
  // Waits until `ready(text, flushes)` holds, for at most `limit`; false when it never did.
  bool WaitFor(const std::function<bool(const std::string&, int)>& ready,
               std::chrono::seconds limit) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return ready(text_, flushes_); });
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    changed_.notify_all();
    return n;
  }
  int sync() override {
    std::lock_guard lock(mu_);
    ++flushes_;
    changed_.notify_all();
    return 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::string text_;
  int flushes_ = 0;
};

TEST_F(GpuctlServerTest, GetWatchPrintsChangesAsTheyHappen) {
  ASSERT_EQ(Gpuctl({"run", "--name", "first", "--", "true"}).code, 0);
  WatchedOutput watched;
  std::ostream out(&watched);
  std::istringstream in;
  std::ostringstream err;
  int code = -1;
  std::thread watcher([&] {
    code = GpuctlTo({"get", "jobs", "-w", "--watch-timeout", "4"}, in, out, err);
  });
  // The list is printed and flushed before the watch begins; "second", created after that, is
  // not in the list, so only the watch can report it.
  auto flushed = [](const std::string&, int flushes) { return flushes > 0; };
  auto has_second = [](const std::string& text, int) {
    return text.find("\nsecond ") != std::string::npos;
  };
  const bool listed = watched.WaitFor(flushed, 30s);
  const std::string list = watched.Text();
  const bool created = listed && Gpuctl({"run", "--name", "second", "--", "true"}).code == 0;
  const bool arrived = created && watched.WaitFor(has_second, 30s);
  watcher.join();
  EXPECT_TRUE(listed) << "the list was never printed: " << err.str();
  EXPECT_TRUE(created);
  EXPECT_TRUE(arrived) << "the watch did not report the new job:\n" << watched.Text();
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_NE(list.find("\nfirst "), std::string::npos) << list;
  EXPECT_EQ(list.find("second"), std::string::npos) << list;
  const std::string all = watched.Text();
  auto lines_starting = [&](const std::string& word) {
    int n = 0;
    for (size_t at = 0; (at = all.find("\n" + word + " ", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_EQ(lines_starting("first"), 1) << all;  // the watch starts after the list's revision
  EXPECT_EQ(lines_starting("second"), 1) << all;
  EXPECT_EQ(Gpuctl({"get", "jobs", "first", "-w"}).code, 2);
}

// Issue 16: `gpuctl logs --since` and `--timestamps` through the server; a followed log with
// timestamps goes on where the log does, though each answer is longer than the log it holds.
TEST_F(GpuctlServerTest, LogsSinceAndTimestamps) {
  server::NodeTable nodes;
  server::LogStore logs((dir_ / "logs").string());
  api_->AttachCluster(&nodes, &logs, nullptr);  // before any request reads it
  ASSERT_EQ(Gpuctl({"run", "--name", "train", "--", "true"}).code, 0);
  const server::LogKey key{"default", "train", 0, 0};
  const int64_t t0 = clock_.NowMillis();  // 2023-11-14T22:13:20Z
  ASSERT_TRUE(logs.Append(key, 0, "old\n", t0 - 600'000, t0).ok());
  ASSERT_TRUE(logs.Append(key, 4, "new\n", t0, t0).ok());
  const std::string p_old = "2023-11-14T22:03:20.000000000Z ";
  const std::string p_new = "2023-11-14T22:13:20.000000000Z ";
  Run since = Gpuctl({"logs", "train", "--since", "5m"});
  ASSERT_EQ(since.code, 0) << since.err;
  EXPECT_EQ(since.out, "new\n");
  EXPECT_EQ(Gpuctl({"logs", "train", "--timestamps"}).out, p_old + "old\n" + p_new + "new\n");
  EXPECT_EQ(Gpuctl({"logs", "train", "--since", "1h", "--timestamps", "--tail", "1"}).out,
            p_new + "new\n");

  WatchedOutput watched;
  std::ostream out(&watched);
  std::istringstream in;
  std::ostringstream err;
  int code = -1;
  std::thread follower([&] {
    code = GpuctlTo({"logs", "train", "-f", "--timestamps"}, in, out, err);
  });
  auto has = [](const std::string& line) {
    return [line](const std::string& text, int) { return text.find(line) != std::string::npos; };
  };
  // Each line is appended once the one before it was followed, so each is its own read.
  bool followed = watched.WaitFor(has("new\n"), 30s);
  followed =
      followed && logs.Append(key, 8, "more\n", t0, t0).ok() && watched.WaitFor(has("more\n"), 30s);
  followed = followed && logs.Append(key, 13, "last\n", t0, t0).ok() &&
             watched.WaitFor(has("last\n"), 10s);
  // The job ends: the stream does.
  absl::StatusOr<store::KeyValue> job = store_->Get("/jobs/default/train");
  ASSERT_TRUE(job.ok()) << job.status();
  nlohmann::json doc = nlohmann::json::parse(job->value);
  doc["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(
      store_->Txn({{store::Op::Kind::kPut, "/jobs/default/train", doc.dump(), std::nullopt}}).ok());
  follower.join();
  EXPECT_TRUE(followed) << watched.Text();
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_EQ(watched.Text(),
            p_old + "old\n" + p_new + "new\n" + p_new + "more\n" + p_new + "last\n");
}

// A log followed before the job's first attempt started (attempt 0: `gpuctl logs -f` right after
// a submit) goes on into the first attempt, from its beginning, and ends with the job. It used
// to stay on attempt 0 and end, empty, as soon as attempt 1 began.
TEST_F(GpuctlServerTest, AFollowedLogOfAJobNotStartedYetFollowsItsFirstAttempt) {
  server::NodeTable nodes;
  server::LogStore logs((dir_ / "logs").string());
  api_->AttachCluster(&nodes, &logs, nullptr);  // before any request reads it
  ASSERT_EQ(Gpuctl({"run", "--name", "late", "--", "true"}).code, 0);
  const int64_t t0 = clock_.NowMillis();
  // Attempt 0 has no log in a real cluster (no task ran); a line there shows when the follower
  // has made its first read.
  ASSERT_TRUE(logs.Append({"default", "late", 0, 0}, 0, "queued\n", t0, t0).ok());
  WatchedOutput watched;
  std::ostream out(&watched);
  std::istringstream in;
  std::ostringstream err;
  int code = -1;
  std::thread follower([&] { code = GpuctlTo({"logs", "late", "-f"}, in, out, err); });
  auto has = [](const std::string& line) {
    return [line](const std::string& text, int) { return text.find(line) != std::string::npos; };
  };
  auto set_status = [&](int attempt, const std::string& phase) {
    absl::StatusOr<store::KeyValue> job = store_->Get("/jobs/default/late");
    EXPECT_TRUE(job.ok()) << job.status();  // not ASSERT: the follower thread must be joined
    if (!job.ok()) return;
    nlohmann::json doc = nlohmann::json::parse(job->value);
    doc["status"]["attempt"] = attempt;
    doc["status"]["phase"] = phase;
    EXPECT_TRUE(
        store_->Txn({{store::Op::Kind::kPut, "/jobs/default/late", doc.dump(), std::nullopt}})
            .ok());
  };
  bool followed = watched.WaitFor(has("queued\n"), 30s);
  set_status(1, "Running");
  followed = followed && logs.Append({"default", "late", 1, 0}, 0, "one\n", t0, t0).ok() &&
             watched.WaitFor(has("one\n"), 30s);
  set_status(1, "Succeeded");
  follower.join();
  EXPECT_TRUE(followed) << watched.Text();
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_EQ(watched.Text(), "queued\none\n");
}

TEST_F(GpuctlServerTest, ClearErrors) {
  EXPECT_EQ(Gpuctl({"get", "widgets"}).code, 2);
  std::ofstream(config_) << "server: http://x\ncertificate-authority: a\ntoken: t\n";
  Run bad = Gpuctl({"get", "jobs"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("server: must start with https://"), std::string::npos) << bad.err;
  std::ofstream(config_) << "server: https://127.0.0.1:" << server_->port()
                         << "\ncertificate-authority: " << creds_.ca_cert_path
                         << "\ntoken: wrong\n";
  Run denied = Gpuctl({"get", "jobs"});
  EXPECT_EQ(denied.code, 1);
  EXPECT_EQ(denied.err, "gpuctl: a valid bearer token is required\n");
}

// A Job manifest of one task, with labels.
std::string JobYaml(const std::string& name, const std::string& labels,
                    const std::string& command = "\"true\"") {
  return "apiVersion: gpucloud/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  labels: {" +
         labels + "}\nspec:\n  tasks:\n  - name: main\n    replicas: 1\n" + "    command: [" +
         command + "]\n";
}

TEST_F(GpuctlServerTest, SelectorsNamesAndOutputsAsKubectl) {
  Run a = Gpuctl({"apply", "-f", "-"}, JobYaml("a", "team: vision") + "---\n" +
                                           JobYaml("b", "team: nlp") + "---\n" +
                                           JobYaml("c", "team: vision"));
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, "job.gpucloud/a created\njob.gpucloud/b created\njob.gpucloud/c created\n");
  Run names = Gpuctl({"get", "jobs", "-l", "team=vision", "-o", "name"});
  EXPECT_EQ(names.code, 0) << names.err;
  EXPECT_EQ(names.out, "job/a\njob/c\n");
  EXPECT_EQ(Gpuctl({"get", "jobs", "--selector", "team!=vision", "-o", "name"}).out, "job/b\n");
  EXPECT_EQ(Gpuctl({"get", "jobs", "-o", "jsonpath={.items[*].metadata.name}"}).out, "a b c");
  EXPECT_EQ(Gpuctl({"get", "job", "b", "-o", "jsonpath={.metadata.labels.team}"}).out, "nlp");
  EXPECT_EQ(Gpuctl({"get", "jobs", "-l", "team=vision", "-o",
                    "jsonpath={range .items[*]}{.metadata.name}:{.status.phase}{\"\\n\"}{end}"})
                .out,
            "a:Pending\nc:Pending\n");
  EXPECT_EQ(Gpuctl({"get", "job/a", "job/c", "-o", "name"}).out, "job/a\njob/c\n");
  Run several = Gpuctl({"get", "jobs,nodes", "-o", "json"});
  ASSERT_EQ(several.code, 0) << several.err;
  nlohmann::json list = nlohmann::json::parse(several.out);
  EXPECT_EQ(list["kind"], "List");
  EXPECT_EQ(list["items"].size(), 3u);  // no nodes here
  Run tables = Gpuctl({"get", "jobs,queues"});
  EXPECT_TRUE(tables.out.starts_with("NAME ")) << tables.out;
  EXPECT_NE(tables.out.find("\n\nNAME "), std::string::npos) << tables.out;  // two tables
  Run wide = Gpuctl({"get", "jobs", "-o", "wide"});
  EXPECT_NE(wide.out.find("QUEUE"), std::string::npos) << wide.out;
  EXPECT_NE(wide.out.find(" default "), std::string::npos) << wide.out;
  // Usage errors, before anything is sent.
  Run typo = Gpuctl({"get", "jbos"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_EQ(typo.err,
            "gpuctl: unknown resource type \"jbos\" for \"gpuctl get\"; did you mean \"jobs\"?\n");
  EXPECT_EQ(Gpuctl({"get", "jobs", "a", "-l", "team=x"}).code, 2);
  Run bad_path = Gpuctl({"get", "jobs", "-o", "jsonpath={..name}"});
  EXPECT_EQ(bad_path.code, 2);
  EXPECT_NE(bad_path.err.find("recursive descent (..) is not supported"), std::string::npos);
  EXPECT_EQ(Gpuctl({"get", "jobs", "-o", "xml"}).code, 2);
  // delete by selector: the list, then each of its objects.
  Run del = Gpuctl({"delete", "jobs", "-l", "team=vision"});
  EXPECT_EQ(del.code, 0) << del.err;
  EXPECT_EQ(del.out, "job.gpucloud/a deleted\njob.gpucloud/c deleted\n");
  EXPECT_EQ(Gpuctl({"get", "jobs", "-o", "name"}).out, "job/b\n");
  EXPECT_EQ(Gpuctl({"delete", "job/b"}).out, "job.gpucloud/b deleted\n");
  EXPECT_EQ(Gpuctl({"delete", "jobs"}).code, 2);  // no NAME, no selector: nothing is deleted
}

TEST_F(GpuctlServerTest, DiffDryRunAndDeleteFromFiles) {
  std::string file = (dir_ / "job.yaml").string();
  std::ofstream(file) << JobYaml("train", "team: vision", "python, train.py");
  Run diff_new = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(diff_new.code, 1) << diff_new.err;
  EXPECT_TRUE(diff_new.out.starts_with("--- /dev/null\n+++ file/job.gpucloud/train\n@@ -0,0 "))
      << diff_new.out;
  Run dry = Gpuctl({"apply", "-f", file, "--dry-run=client"});
  EXPECT_EQ(dry.out, "job.gpucloud/train created (dry run)\n");
  EXPECT_EQ(Gpuctl({"get", "job", "train"}).code, 1);  // nothing was sent
  Run server_dry = Gpuctl({"apply", "-f", file, "--dry-run=server"});
  if (server_dry.code == 0) {  // a server that takes dryRun=All
    EXPECT_EQ(server_dry.out, "job.gpucloud/train created (server dry run)\n");
  } else {  // one that does not yet says so, naming the parameter
    EXPECT_EQ(server_dry.code, 1);
    EXPECT_NE(server_dry.err.find("dryRun"), std::string::npos) << server_dry.err;
  }
  EXPECT_EQ(Gpuctl({"get", "job", "train"}).code, 1);  // nothing was stored
  ASSERT_EQ(Gpuctl({"apply", "-f", file}).code, 0);
  Run same = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out, "");
  std::ofstream(file) << JobYaml("train", "team: nlp", "python, train.py");
  Run changed = Gpuctl({"diff", "-f", file});
  EXPECT_EQ(changed.code, 1) << changed.err;
  EXPECT_NE(changed.out.find("\n-    team: vision\n+    team: nlp\n"), std::string::npos)
      << changed.out;
  EXPECT_TRUE(changed.out.starts_with("--- live/job.gpucloud/train\n+++ file/job.gpucloud/train\n"))
      << changed.out;
  EXPECT_EQ(Gpuctl({"apply", "-f", file}).out, "job.gpucloud/train configured\n");
  Run del = Gpuctl({"delete", "-f", file});
  EXPECT_EQ(del.code, 0) << del.err;
  EXPECT_EQ(del.out, "job.gpucloud/train deleted\n");
  Run again = Gpuctl({"delete", "-f", file});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err, "gpuctl: job.gpucloud/train: Job default/train not found\n");
}

TEST_F(GpuctlServerTest, ASecondApplyOfEveryKindIsUnchanged) {
  std::vector<std::string> files;
  for (const char* f : {"queues.yaml", "nodepools.yaml", "llm-finetune.yaml", "pod-mig.yaml",
                        "single-gpu.json", "seed-001-runtimeclass.yaml"}) {
    files.push_back("-f");
    files.push_back(std::string(GPUCLOUD_SOURCE_DIR) + "/examples/" + f);
  }
  std::vector<std::string> apply = {"apply"};
  apply.insert(apply.end(), files.begin(), files.end());
  Run first = Gpuctl(apply);
  ASSERT_EQ(first.code, 0) << first.err;
  Run second = Gpuctl(apply);
  ASSERT_EQ(second.code, 0) << second.err;
  std::istringstream lines(second.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_TRUE(line.ends_with(" unchanged")) << line << "\nfirst:\n" << first.out;
  }
  EXPECT_GT(n, 4) << second.out;
  // The RuntimeClass, cluster-scoped, among them.
  EXPECT_NE(first.out.find("runtimeclass.gpucloud/gpu-runtime created\n"), std::string::npos)
      << first.out;
  EXPECT_EQ(Gpuctl({"get", "runtimeclass/gpu-runtime", "-o", "name"}).out,
            "runtimeclass/gpu-runtime\n");
  std::vector<std::string> diff = {"diff"};
  diff.insert(diff.end(), files.begin(), files.end());
  Run same = Gpuctl(diff);
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_EQ(same.out, "");
}

// A job naming a RuntimeClass the server has (applied before, not in this file) is stored with
// the class's node selector merged in: a second apply of the same file writes nothing and says
// so, though the file's spec and the stored one differ.
TEST_F(GpuctlServerTest, ASecondApplyOfAJobNamingAStoredRuntimeClassIsUnchanged) {
  const std::string examples = std::string(GPUCLOUD_SOURCE_DIR) + "/examples/";
  ASSERT_EQ(Gpuctl({"apply", "-f", examples + "seed-001-runtimeclass.yaml"}).code, 0);
  const std::string job = (dir_ / "job.yaml").string();
  std::ofstream(job) << "apiVersion: v1\nkind: Pod\nmetadata: {name: resnet}\nspec:\n"
                        "  runtimeClassName: gpu-runtime\n  containers:\n  - name: t\n"
                        "    command: [python3, train.py]\n"
                        "    resources: {limits: {nvidia.com/gpu: 1}}\n";
  Run first = Gpuctl({"apply", "-f", job});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, "job.gpucloud/resnet created\n");
  Run second = Gpuctl({"apply", "-f", job});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(second.out, "job.gpucloud/resnet unchanged\n");
}

// gpuctl cost reads the server's usage records: a deleted job's attempt still counts, and only
// the part inside --since/--until.
TEST_F(GpuctlServerTest, CostReadsUsageRecordsForAWindow) {
  const int64_t jan1 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
  auto put = [&](const std::string& job, int64_t start, int64_t end) {
    api::AttemptUsage u{.ns = "default",
                        .job = job,
                        .uid = job + "-uid",
                        .queue = "default",
                        .attempt = 1,
                        .start_ms = start,
                        .end_ms = end,
                        .gpus = 2,
                        .gpus_by_type = {{"H100-80GB", 2}},
                        .usd_per_hour = {{"spot", 3.0}},
                        .usd_per_hour_by_pool = {{"sp", 3.0}}};
    ASSERT_TRUE(
        store_->Txn({store::Op{.key = api::UsageKey(u), .value = api::UsageToJson(u).dump()}})
            .ok());
  };
  put("gone", jan1 + 22 * 3'600'000, jan1 + 26 * 3'600'000);  // 2 of its 4 hours on Jan 1
  put("older", jan1 - 90 * 86'400'000LL, jan1 - 89 * 86'400'000LL);
  Run r = Gpuctl({"cost", "--by", "job", "--since", "2026-01-01", "--until", "2026-01-02", "-n",
                  "default", "-o", "csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "job,jobs,total_usd,gpu_hours,energy_kwh,co2e_kg,spot_usd\n"
            "default/gone,1,6.0000,4.0000,0.0000,0.0000,6.0000\n");
  Run all = Gpuctl({"cost", "--by", "pool", "-o", "json"});
  ASSERT_EQ(all.code, 0) << all.err;
  nlohmann::json rows = nlohmann::json::parse(all.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["pool"], "sp");
  EXPECT_DOUBLE_EQ(rows[0]["totalUsd"].get<double>(), 3.0 * 4 + 3.0 * 24);
  // The same window priced four ways: 2 H100s for 2 hours, at the catalog's $6.98 on demand.
  Run tco = Gpuctl({"cost", "tco", "--since", "2026-01-01", "--until", "2026-01-02", "-o", "json"});
  ASSERT_EQ(tco.code, 0) << tco.err;
  nlohmann::json t = nlohmann::json::parse(tco.out);
  EXPECT_DOUBLE_EQ(t["gpuHours"].get<double>(), 4.0);
  EXPECT_EQ(t["scenarios"][0]["name"], "on-demand");
  EXPECT_NEAR(t["scenarios"][0]["usd"].get<double>(), 4 * 6.98, 1e-9);
  EXPECT_EQ(t["scenarios"].size(), 4u);
  EXPECT_EQ(Gpuctl({"cost", "tco", "--pue", "9"}).code, 2);  // out of range
  Run bad = Gpuctl({"cost", "--since", "yesterday"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--since: \"yesterday\""), std::string::npos) << bad.err;
}

// gpuctl budget: set, shown, refused with the server's reason (nothing changes), cleared.
TEST_F(GpuctlServerTest, BudgetSetShowAndClear) {
  ASSERT_EQ(Gpuctl({"create", "namespace", "team-a"}).code, 0);
  EXPECT_EQ(Gpuctl({"budget", "team-a"}).out, "namespace team-a has no budget\n");
  Run set = Gpuctl({"budget", "team-a", "--monthly-usd", "5000", "--alert-at", "50,90",
                    "--on-exceeded", "stop"});
  ASSERT_EQ(set.code, 0) << set.err;
  EXPECT_EQ(set.out,
            "namespace team-a: 5000 USD a month; alerts at 50%, 90%; over budget: running jobs "
            "stop too\n");
  EXPECT_EQ(Gpuctl({"budget", "team-a"}).out, set.out);
  Run bad = Gpuctl({"budget", "team-a", "--monthly-usd", "10", "--currency", "EUR"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("spec.budget.currency: \"EUR\" is not this server's currency"),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(Gpuctl({"budget", "team-a"}).out, set.out);  // unchanged
  EXPECT_EQ(Gpuctl({"budget", "team-a", "--clear"}).out, "namespace team-a: budget cleared\n");
  EXPECT_EQ(Gpuctl({"budget", "team-a"}).out, "namespace team-a has no budget\n");
  EXPECT_EQ(Gpuctl({"budget", "team-a", "--alert-at", "50"}).code, 2);  // no amount
}

TEST_F(GpuctlServerTest, VersionOfClientAndServer) {
  Run v = Gpuctl({"version", "--client"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, "Client Version: v0.1.0\n");
  Run both = Gpuctl({"version"});
  ASSERT_TRUE(both.out.starts_with("Client Version: v0.1.0\n")) << both.out;
  if (both.code == 0) {  // a server with GET /version
    EXPECT_TRUE(both.out.find("\nServer Version: ") != std::string::npos) << both.out;
  } else {
    EXPECT_TRUE(both.err.starts_with("gpuctl: server version: ")) << both.err;
  }
}

}  // namespace
}  // namespace gpucloud::cli
