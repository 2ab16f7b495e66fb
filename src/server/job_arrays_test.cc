// Job arrays on the server: the elements an array becomes, the parallelism gate (pure), the
// environment of an element's tasks, and the controller honouring the parallelism.
#include "server/job_arrays.h"

#include <gtest/gtest.h>

#include "manifest/manifest.h"
#include "server/controller_fixture.h"

namespace gpucloud::server {
namespace {

Job ArrayJob(const std::string& array) {
  manifest::ParseResult p = manifest::ParseManifests(
      Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: sweep, labels: {team: a}}\n"
          "spec:\n  tasks: [{name: main, command: [python, train.py]}]\n  array: ",
          array, "\n"),
      "job.yaml");
  EXPECT_TRUE(p.ok());
  return std::get<Job>(p.manifests.at(0).object);
}

TEST(ArrayElements, OneJobPerIndexNamedLabelledAndMarked) {
  std::vector<Job> e = ArrayElements(ArrayJob("{indices: \"1,3,5-6\", parallelism: 2}"));
  ASSERT_EQ(e.size(), 4u);
  std::vector<std::string> names;
  for (const Job& j : e) names.push_back(j.metadata.name);
  EXPECT_EQ(names, (std::vector<std::string>{"sweep-1", "sweep-3", "sweep-5", "sweep-6"}));
  const Job& j = e[1];
  EXPECT_EQ(j.metadata.labels.at("gpucloud.io/array"), "sweep");
  EXPECT_EQ(j.metadata.labels.at("gpucloud.io/array-index"), "3");
  EXPECT_EQ(j.metadata.labels.at("team"), "a");
  ASSERT_TRUE(j.spec.array && j.spec.array->element());
  EXPECT_EQ(j.spec.array->name, "sweep");
  EXPECT_EQ(j.spec.array->index, 3);
  EXPECT_EQ(j.spec.array->count, 4);
  EXPECT_EQ(j.spec.array->parallelism, 2);
  EXPECT_TRUE(j.spec.array->indices.empty());
  EXPECT_EQ(j.spec.tasks, ArrayJob("{count: 1}").spec.tasks);
  EXPECT_TRUE(ArrayElements(j).empty()) << "an element is not an array asked for";
}

TEST(AddArrayEnv, IndexAndNameInGpucloudsAndSlurmsNames) {
  std::vector<Job> e = ArrayElements(ArrayJob("{count: 10}"));
  std::map<std::string, std::string> env{{"USER_VAR", "x"}};
  AddArrayEnv(e[7].spec, &env);
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"GPUCLOUD_ARRAY_COUNT", "10"},
                                                     {"GPUCLOUD_ARRAY_INDEX", "7"},
                                                     {"GPUCLOUD_ARRAY_NAME", "sweep"},
                                                     {"SLURM_ARRAY_JOB_ID", "sweep"},
                                                     {"SLURM_ARRAY_TASK_COUNT", "10"},
                                                     {"SLURM_ARRAY_TASK_ID", "7"},
                                                     {"USER_VAR", "x"}}));
  std::map<std::string, std::string> plain;
  AddArrayEnv(JobSpec{}, &plain);
  EXPECT_TRUE(plain.empty());
}

TEST(AdmitArrayMembers, LowestIndicesUpToTheRoomLeft) {
  // Array a (parallelism 2) holds one; candidates 5, 3, 9: only 3 goes.
  std::vector<ArrayMember> m{
      {"ns/a", 5, 2, false}, {"ns/a", 0, 2, true}, {"ns/a", 3, 2, false}, {"ns/a", 9, 2, false}};
  EXPECT_EQ(AdmitArrayMembers(m), (std::vector<bool>{false, true, true, false}));
  // Full: nothing goes.
  m.push_back({"ns/a", 1, 2, true});
  EXPECT_EQ(AdmitArrayMembers(m), (std::vector<bool>{false, true, false, false, true}));
}

TEST(AdmitArrayMembers, ArraysAndNamespacesAreApart) {
  std::vector<ArrayMember> m{{"ns/a", 0, 1, true},
                             {"ns/a", 1, 1, false},
                             {"ns/b", 1, 1, false},
                             {"other/a", 2, 1, false},
                             {"other/a", 1, 1, false}};
  EXPECT_EQ(AdmitArrayMembers(m), (std::vector<bool>{true, false, true, false, true}));
}

TEST(AdmitArrayMembers, OverfullArraysAdmitNothingNew) {
  // More holding than the bound (the parallelism was lowered by a re-created array): none.
  std::vector<ArrayMember> m{
      {"ns/a", 0, 3, true}, {"ns/a", 1, 3, true}, {"ns/a", 2, 1, true}, {"ns/a", 3, 3, false}};
  EXPECT_EQ(AdmitArrayMembers(m), (std::vector<bool>{true, true, true, false}));
}

TEST(ArrayGate, SortsCandidatesIntoAdmittedAndHeld) {
  ArrayGate<int> gate;
  JobArraySpec a{.parallelism = 2, .name = "a", .index = 0, .count = 4};
  for (int i : {3, 1, 0, 2}) {
    a.index = i;
    gate.Candidate("ns", a, i);
  }
  ArrayGate<int>::Verdict v = gate.Decide();
  EXPECT_EQ(v.admitted, (std::vector<int>{1, 0}));
  EXPECT_EQ(v.held, (std::vector<int>{3, 2}));
}

// --- the controller -------------------------------------------------------------------------

class ControllerArrayTest : public ControllerTest {
 protected:
  void SubmitArray(const std::string& array) {
    Submit(GangJob("sweep", 1, 1, 3, Cat("  array: ", array, "\n")));
  }
  std::vector<std::string> Elements(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(Cat("sweep-", i));
    return out;
  }
  std::vector<std::string> InPhase(const std::string& phase, int n) {
    std::vector<std::string> out;
    for (const std::string& e : Elements(n)) {
      if (api::PhaseName(Status(e).phase) == phase) out.push_back(e);
    }
    return out;
  }
  // Scheduled or Running: what holds a place of the array's parallelism.
  std::vector<std::string> Admitted(int n) {
    std::vector<std::string> out;
    for (const std::string& e : Elements(n)) {
      if (Status(e).Active()) out.push_back(e);
    }
    return out;
  }
};

TEST_F(ControllerArrayTest, AtMostParallelismElementsAreAdmittedAtOnce) {
  Register("node-a", 8);
  SubmitArray("{count: 5, parallelism: 2}");
  Pass();
  EXPECT_EQ(InPhase("Scheduled", 5), (std::vector<std::string>{"sweep-0", "sweep-1"}));
  for (const char* e : {"sweep-2", "sweep-3", "sweep-4"}) {
    JobStatus s = Status(e);
    EXPECT_EQ(s.phase, api::JobPhase::kPending) << e;
    EXPECT_EQ(s.reason, "ArrayParallelism") << e;
    EXPECT_EQ(s.message, "array sweep runs at most 2 elements at once") << e;
  }
  Pass();  // nothing changed: nothing more admitted, nothing written
  const int64_t revision = store_->Revision();
  Pass();
  EXPECT_EQ(store_->Revision(), revision);
  EXPECT_EQ(InPhase("Scheduled", 5).size(), 2u);

  // One ends: the next index takes its place, never more than two at once.
  Heartbeat("node-a", {Report("sweep-0", 0, api::TaskState::kSucceeded, 0),
                       Report("sweep-1", 0, api::TaskState::kRunning)});
  Pass();
  EXPECT_LE(Admitted(5).size(), 2u);
  Pass();
  EXPECT_EQ(Status("sweep-0").phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(Admitted(5), (std::vector<std::string>{"sweep-1", "sweep-2"}));
  EXPECT_EQ(Status("sweep-3").reason, "ArrayParallelism");
}

TEST_F(ControllerArrayTest, WithoutParallelismEveryElementThatFitsRuns) {
  Register("node-a", 8);
  SubmitArray("{count: 5}");
  Pass();
  EXPECT_EQ(InPhase("Scheduled", 5).size(), 5u);
}

TEST_F(ControllerArrayTest, ElementsTasksGetTheirIndexInTheEnvironment) {
  Register("node-a", 8);
  SubmitArray("{indices: \"4,7\"}");
  Pass();
  std::map<std::string, std::string> index_of;
  for (const store::KeyValue& kv : Assignments("node-a")) {
    absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(kv.value);
    ASSERT_TRUE(a.ok()) << a.status();
    index_of[a->job] = a->env.at("GPUCLOUD_ARRAY_INDEX");
    EXPECT_EQ(a->env.at("SLURM_ARRAY_TASK_ID"), a->env.at("GPUCLOUD_ARRAY_INDEX"));
    EXPECT_EQ(a->env.at("SLURM_ARRAY_JOB_ID"), "sweep");
    EXPECT_EQ(a->env.at("GPUCLOUD_ARRAY_COUNT"), "2");
  }
  EXPECT_EQ(index_of, (std::map<std::string, std::string>{{"sweep-4", "4"}, {"sweep-7", "7"}}));
}

TEST_F(ControllerArrayTest, CancelOfTheArrayStopsEveryElement) {
  Register("node-a", 8);
  SubmitArray("{count: 3, parallelism: 1}");
  Pass();
  ASSERT_EQ(InPhase("Scheduled", 3), (std::vector<std::string>{"sweep-0"}));
  Response r = Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs/sweep/cancel");
  EXPECT_EQ(r.status, 202) << r.body;
  Pass();
  Heartbeat("node-a", {Report("sweep-0", 0, api::TaskState::kStopped, 143)});
  Pass();
  Pass();
  EXPECT_EQ(InPhase("Cancelled", 3).size(), 3u);
  EXPECT_TRUE(Assignments("node-a").empty());
}

}  // namespace
}  // namespace gpucloud::server
