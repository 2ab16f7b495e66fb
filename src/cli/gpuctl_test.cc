#include "cli/gpuctl.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/cluster_commands.h"

namespace gpucloud::cli {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Gpuctl(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), "gpuctl");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
  return {code, out.str(), err.str()};
}

std::string Src(const std::string& rel) { return std::string(GPUCLOUD_SOURCE_DIR) + "/" + rel; }

TEST(Gpuctl, ValidateExamplesDirectory) {
  CliRun r = Gpuctl({"validate", "-f", Src("examples")});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("seed-003-volcano-pytorch.yaml: valid (1 object)"), std::string::npos);
  EXPECT_NE(r.out.find("  Job default/pytorch-job: 4 x worker (1 GPU, any type); gang of 4"),
            std::string::npos)
      << r.out;
}

TEST(Gpuctl, InvalidInputExitsOneWithLocatedErrors) {
  CliRun r = Gpuctl({"validate", "-f", "-"},
                    "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: j}\nspec:\n"
                    "  tasks:\n  - name: w\n    replicas: 0\n");
  EXPECT_EQ(r.code, kExitInvalid);
  EXPECT_EQ(r.out, "<stdin>: invalid\n");
  EXPECT_EQ(r.err, "<stdin>:7:15: spec.tasks[0].replicas: must be >= 1, got 0\n1 error\n");
}

TEST(Gpuctl, MissingFileIsInvalidInput) {
  CliRun r = Gpuctl({"validate", "-f", "/nonexistent/job.yaml"});
  EXPECT_EQ(r.code, kExitInvalid);
  EXPECT_EQ(r.err, "/nonexistent/job.yaml: cannot read: No such file or directory\n1 error\n");
}

TEST(Gpuctl, UnknownCommandsSuggestTheNearestAndExitTwo) {
  CliRun r = Gpuctl({"gett", "jobs"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuctl: unknown command \"gett\" for \"gpuctl\"; did you mean \"get\"?\n");
  r = Gpuctl({"--config", "/nonexistent", "delet", "job", "x"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "gpuctl: unknown command \"delet\" for \"gpuctl\"; did you mean \"delete\"?\n");
  r = Gpuctl({"frobnicate"});
  EXPECT_EQ(r.err, "gpuctl: unknown command \"frobnicate\" for \"gpuctl\"\n");
  r = Gpuctl({"describe", "jbo", "x"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "gpuctl: unknown resource type \"jbo\" for \"gpuctl describe\"; did you mean "
            "\"job\"?\n");
  r = Gpuctl({"delete", "nodez", "n1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "gpuctl: unknown resource type \"nodez\" for \"gpuctl delete\"; did you mean "
            "\"nodes\"?\n");
  r = Gpuctl({"get", "job/a", "b"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "gpuctl get: \"b\": give every argument as TYPE/NAME, or a TYPE and then NAMEs\n");
  EXPECT_EQ(Gpuctl({"logs", "j", "--since", "soon"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"version", "--client"}).out, "Client Version: v0.1.0\n");
}

// Runs `script` with bash; its standard output.
std::string Bash(const std::string& script) {
  std::string file = testing::TempDir() + "/gpuctl-completion-test.sh";
  std::ofstream(file) << script;
  FILE* p = popen(("bash " + file + " 2>&1; echo \"rc=$?\"").c_str(), "r");
  std::string output;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  pclose(p);
  return output;
}

TEST(Gpuctl, CompletionScriptsCompleteCommandsFlagsAndTypes) {
  CliRun bash = Gpuctl({"completion", "bash"});
  ASSERT_EQ(bash.code, kExitOk) << bash.err;
  auto complete = [&](const std::string& words, int cword) {
    return Bash(bash.out + "COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                "; _gpuctl; echo \"${COMPREPLY[*]}\"\n");
  };
  EXPECT_EQ(complete("gpuctl ge", 1), "get\nrc=0\n");
  EXPECT_EQ(complete("gpuctl get no", 2), "nodes nodepools\nrc=0\n");
  EXPECT_EQ(complete("gpuctl --config x logs j --ta", 5), "--tail\nrc=0\n");
  EXPECT_EQ(complete("gpuctl images p", 2), "pull\nrc=0\n");
  EXPECT_EQ(complete("gpuctl get jobs --sel", 3), "--selector\nrc=0\n");
  EXPECT_EQ(complete("gpuctl create secret d", 3), "docker-registry\nrc=0\n");
  EXPECT_EQ(complete("gpuctl create secret generic hf --from-f", 5), "--from-file\nrc=0\n");
  EXPECT_EQ(complete("gpuctl get se", 2), "secrets serviceaccounts\nrc=0\n");
  CliRun zsh = Gpuctl({"completion", "zsh"});
  ASSERT_EQ(zsh.code, kExitOk);
  EXPECT_TRUE(zsh.out.find("bashcompinit") != std::string::npos);
  for (const std::string& script : {bash.out, zsh.out}) {
    EXPECT_EQ(Bash("set -e\nbash -n <<'EOF'\n" + script + "EOF\n"), "rc=0\n");
  }
  EXPECT_EQ(Gpuctl({"completion", "fish"}).code, kExitUsage);
}

TEST(Gpuctl, UsageErrorsExitTwo) {
  EXPECT_EQ(Gpuctl({}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"validate"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"frobnicate"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"convert", "-f", "x.yaml", "-o", "xml"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"--help"}).code, kExitOk);
}

// Issue 16: `gpuctl get job x/events` printed x's events as jobs. A name that is not a DNS
// label is a usage error, found before any config is read or request sent.
TEST(Gpuctl, NamesThatAreNotDnsLabelsAreUsageErrors) {
  const std::string kControl = std::string("a\x01") + "b";  // (argv cannot hold a NUL)
  const std::vector<std::vector<std::string>> commands = {
      {"get", "job", "train/events"},
      {"get", "jobs", ".."},
      {"get", "job", "a%2Fb"},
      {"get", "job", "train?watch=true"},
      {"get", "job", "Train"},
      {"delete", "job", "x/.."},
      {"describe", "job", "a/b"},
      {"describe", "node", "n1/heartbeat"},
      {"logs", "a?rank=1"},
      {"events", "../x"},
      {"cancel", "a%2F"},
      {"cordon", "n1/../n2"},
      {"reclaim", "--pool", "spot/x"},
      {"get", "jobs", "-n", "team-a/jobs", "x"},
      {"logs", "job", "-n", kControl},
      {"get", "job", ""},
  };
  for (const std::vector<std::string>& c : commands) {
    CliRun r = Gpuctl(c);
    EXPECT_EQ(r.code, kExitUsage) << c[0] << " " << c.back() << ": " << r.err;
    EXPECT_NE(r.err.find("is not a valid name: a DNS label"), std::string::npos) << r.err;
  }
  CliRun r = Gpuctl({"get", "job", "x/events"});
  EXPECT_EQ(r.err,
            "gpuctl: NAME \"x/events\" is not a valid name: a DNS label (lower-case letters, "
            "digits and '-', starting and ending with a letter or digit, at most 63 "
            "characters)\n");
  CliRun control = Gpuctl({"logs", "job", "-n", kControl});
  EXPECT_NE(control.err.find("\"a\\x01b\""), std::string::npos) << control.err;
  EXPECT_EQ(r.out, "");
}

TEST(Gpuctl, CatalogListsTypesAndMigProfiles) {
  CliRun r = Gpuctl({"catalog"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("TYPE"), std::string::npos);
  EXPECT_NE(r.out.find("H100-80GB        80Gi Hopper   9.0      4     6.98  1g.10gb 1g.10gb+me "
                       "1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("T4               16Gi Turing   7.5    0.4     0.53  -\n"),
            std::string::npos)
      << r.out;
}

TEST(Gpuctl, ConvertPrintsNormalizedYaml) {
  CliRun r = Gpuctl({"convert", "-f", Src("examples/seed-000-pod.yaml")});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: ml-training
  namespace: default
spec:
  queue: default
  priority: 0
  billing: on-demand
  minAvailable: 1
  restartPolicy:
    maxRestarts: 3
    backoff: 10s
  tasks:
    - name: pytorch
      replicas: 1
      image: pytorch/pytorch:latest
      resources:
        gpu:
          count: 4
)");
}

TEST(Gpuctl, ConvertedOutputValidatesAgain) {
  for (const char* format : {"yaml", "json"}) {
    CliRun converted = Gpuctl({"convert", "-f", Src("examples"), "-o", format});
    ASSERT_EQ(converted.code, kExitOk) << converted.err;
    CliRun again = Gpuctl({"convert", "-f", "-", "-o", format}, converted.out);
    EXPECT_EQ(again.code, kExitOk) << again.err;
    EXPECT_EQ(again.out, converted.out) << format;
  }
}

TEST(Gpuctl, SameObjectInTwoFilesIsKeptOnceAndConflictsAreErrors) {
  std::string path = testing::TempDir() + "/queue-q.yaml";
  std::ofstream(path) << "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";
  CliRun same = Gpuctl({"convert", "-f", path, "-f", "-"},
                       "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n");
  EXPECT_EQ(same.code, kExitOk) << same.err;
  EXPECT_EQ(same.out.find("---"), std::string::npos);  // printed once
  CliRun conflict = Gpuctl({"validate", "-f", path, "-f", "-"},
                           "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\n"
                           "spec: {weight: 2}\n");
  EXPECT_EQ(conflict.code, kExitInvalid);
  EXPECT_EQ(conflict.err,
            "<stdin>: metadata.name: duplicate Queue q with different content (also in " + path +
                ")\n1 error\n");
}

TEST(Gpuctl, ConvertPrintsNothingWhenAnyFileIsInvalid) {
  CliRun r = Gpuctl({"convert", "-f", Src("examples/seed-000-pod.yaml"), "-f",
                     Src("testdata/manifests/seed-000-verbatim.yaml")});
  EXPECT_EQ(r.code, kExitInvalid);
  EXPECT_EQ(r.out, "");
}

// get jobs reads each job's status through api::JobStatus: its phase, attempt, nodes and message;
// a status the server would never write shows "?" and names the field it got wrong.
TEST(Gpuctl, JobsTableReadsTheStatusWireType) {
  using Json = nlohmann::json;
  std::vector<Json> jobs = {
      Json::parse(R"({"metadata": {"name": "train"}, "status": {"phase": "Running", "attempt": 2,
          "message": "2 of 2 tasks running", "gpus": 2,
          "placement": [{"node": "node-b", "gpus": [{"index": 0}]},
                        {"node": "node-a", "gpus": [{"index": 1}]}]}})"),
      Json::parse(R"({"metadata": {"name": "new"}})"),
      Json::parse(R"({"metadata": {"name": "odd"}, "status": {"phase": "Runing"}})"),
      Json::parse(R"({"metadata": {"name": "typed"}, "status": {"attempt": "1"}})"),
  };
  std::ostringstream out;
  PrintJobsTable(jobs, /*with_namespace=*/false, out, /*wide=*/true);
  std::istringstream lines(out.str());
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 5u) << out.str();
  EXPECT_EQ(rows[1],
            "train                    Running           2  node-a,node-b        default          "
            "    2  2 of 2 tasks running");
  EXPECT_EQ(rows[2].substr(0, 44), "new                      Pending           0");
  EXPECT_EQ(rows[3].substr(0, 37), "odd                      ?           ");
  EXPECT_NE(rows[3].find("status.phase: unknown phase \"Runing\""), std::string::npos) << rows[3];
  EXPECT_NE(rows[4].find("status.attempt: must be an integer"), std::string::npos) << rows[4];
}

}  // namespace
}  // namespace gpucloud::cli
