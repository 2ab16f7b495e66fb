// spec.array of a gpucloud/v1 Job: the forms it takes, what they decode to, how they print and
// read back, and the errors of bad ones (field path, line and the offending text).
#include <gtest/gtest.h>

#include <string>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string JobWithArray(const std::string& array, const std::string& name = "sweep") {
  return "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: " + name +
         "}\nspec:\n  tasks: [{name: main, command: [python, train.py]}]\n  array: " + array + "\n";
}

std::string Errors(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  return out;
}

JobArraySpec Decoded(const std::string& array) {
  ParseResult r = ParseManifests(JobWithArray(array), "job.yaml");
  EXPECT_TRUE(r.ok()) << Errors(r);
  if (!r.ok()) return {};
  const Job& job = std::get<Job>(r.manifests[0].object);
  EXPECT_TRUE(job.spec.array.has_value());
  return job.spec.array.value_or(JobArraySpec{});
}

TEST(JobArrayManifest, CountAndParallelism) {
  JobArraySpec a = Decoded("{count: 1000, parallelism: 50}");
  EXPECT_EQ(a.indices, (std::vector<IndexRange>{{0, 999}}));
  EXPECT_EQ(a.count, 1000);
  EXPECT_EQ(a.parallelism, 50);
  EXPECT_FALSE(a.element());
}

TEST(JobArrayManifest, IndicesInSlurmsForm) {
  JobArraySpec a = Decoded("{indices: \"1,3,5-7\"}");
  EXPECT_EQ(a.indices, (std::vector<IndexRange>{{1, 1}, {3, 3}, {5, 7}}));
  EXPECT_EQ(a.count, 5);
  EXPECT_EQ(a.parallelism, 0);
  a = Decoded("{indices: \"0-99%10\"}");
  EXPECT_EQ(a.count, 100);
  EXPECT_EQ(a.parallelism, 10);
}

TEST(JobArrayManifest, AnElementAsTheServerStoresIt) {
  JobArraySpec a = Decoded("{name: sweep, index: 7, count: 1000, parallelism: 50}");
  EXPECT_TRUE(a.element());
  EXPECT_EQ(a.name, "sweep");
  EXPECT_EQ(a.index, 7);
  EXPECT_EQ(a.count, 1000);
  EXPECT_EQ(a.parallelism, 50);
  EXPECT_TRUE(a.indices.empty());
}

TEST(JobArrayManifest, PrintsAndReadsBackTheSame) {
  for (const char* array :
       {"{count: 1000, parallelism: 50}", "{indices: \"1,3,5-7\"}", "{indices: \"2-4%2\"}",
        "{name: sweep, index: 7, count: 1000, parallelism: 50}", "{count: 1}"}) {
    ParseResult r = ParseManifests(JobWithArray(array), "job.yaml");
    ASSERT_TRUE(r.ok()) << array << "\n" << Errors(r);
    const Object& o = r.manifests[0].object;
    for (const std::string& printed : {ToYaml(o), ToJson(o)}) {
      ParseResult again = ParseManifests(printed, "printed");
      ASSERT_TRUE(again.ok()) << printed << Errors(again);
      EXPECT_EQ(std::get<Job>(again.manifests[0].object), std::get<Job>(o)) << printed;
    }
  }
  ParseResult r = ParseManifests(JobWithArray("{indices: \"0-9\"}"), "job.yaml");
  EXPECT_NE(ToYaml(r.manifests[0].object).find("count: 10"), std::string::npos)
      << "indices 0..N-1 print as count";
}

TEST(JobArrayManifest, SummaryMentionsTheArray) {
  ParseResult r = ParseManifests(JobWithArray("{count: 4, parallelism: 2}"), "job.yaml");
  ASSERT_TRUE(r.ok()) << Errors(r);
  EXPECT_NE(Summarize(r.manifests[0].object).find("array of 4 jobs (indices 0-3), at most 2"),
            std::string::npos)
      << Summarize(r.manifests[0].object);
}

TEST(JobArrayManifest, NoArrayIsAPlainJob) {
  ParseResult r = ParseManifests(
      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: a}\nspec:\n"
      "  tasks: [{name: main, command: [x]}]\n",
      "job.yaml");
  ASSERT_TRUE(r.ok()) << Errors(r);
  EXPECT_FALSE(std::get<Job>(r.manifests[0].object).spec.array.has_value());
  EXPECT_EQ(ToYaml(r.manifests[0].object).find("array"), std::string::npos);
}

TEST(JobArrayManifest, BadArraysNameTheField) {
  struct Case {
    std::string array, want;
  } cases[] = {
      {"{count: 0}", "job.yaml:6:18: spec.array.count: must be >= 1, got 0\n"},
      {"{count: 10001}", "job.yaml:6:18: spec.array.count: must be <= 10000, got 10001\n"},
      {"{count: \"5\"}", "job.yaml:6:18: spec.array.count: must be an integer, got string \"5\"\n"},
      {"{count: 5, parallelism: 0}",
       "job.yaml:6:34: spec.array.parallelism: must be >= 1, got 0\n"},
      {"{parallelism: 5}",
       "job.yaml:6:10: spec.array: needs count (1 to 10000: indices 0 to count-1) or indices "
       "(such as \"1,3,5-7\")\n"},
      {"{count: 5, indices: \"0-4\"}",
       "job.yaml:6:30: spec.array.indices: give either count or indices, not both\n"},
      {"{indices: \"0-x\"}",
       "job.yaml:6:20: spec.array.indices: array \"0-x\": \"0-x\" is not an index or a range of "
       "indices from 0 to 999999 (indices are written like 0-999, 1,3,5-7, 0-15:4, with an "
       "optional %PARALLELISM)\n"},
      {"{indices: \"9-3\"}", "spec.array.indices: array \"9-3\": \"9-3\" runs backwards"},
      {"{indices: \"0-9%3\", parallelism: 4}",
       "spec.array.indices: says %3 but parallelism is 4\n"},
      {"{count: 5, name: other}",
       "spec.array.name: is only allowed with index (an element); an array's name is "
       "metadata.name\n"},
      {"{index: 3}",
       "spec.array.name: is required with index: the array this job is an element of\n"},
      {"{name: s, index: 3, indices: \"1\"}",
       "spec.array.indices: is not allowed with index: an element of an array has one index\n"},
      {"{name: s, index: -1}", "spec.array.index: must be >= 0, got -1\n"},
      {"{name: Bad_Name, index: 1}", "spec.array.name: "},
      {"{count: 5, size: 3}", "job.yaml:6:21: spec.array.size: unknown field\n"},
      {"5", "job.yaml:6:10: spec.array: must be a mapping, got integer 5\n"},
  };
  for (const Case& c : cases) {
    ParseResult r = ParseManifests(JobWithArray(c.array), "job.yaml");
    EXPECT_FALSE(r.ok()) << c.array;
    EXPECT_TRUE(r.manifests.empty()) << c.array;
    EXPECT_NE(Errors(r).find(c.want), std::string::npos) << c.array << "\n" << Errors(r);
  }
}

TEST(JobArrayManifest, ElementNamesMustBeDnsLabels) {
  std::string name(58, 'a');  // 58 + "-" + "99999" = 64 characters
  ParseResult r = ParseManifests(JobWithArray("{indices: \"99999\"}", name), "job.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(Errors(r).find("spec.array: makes element names such as " + name +
                           "-99999 (64 characters); names are at most 63: shorten metadata.name"),
            std::string::npos)
      << Errors(r);
  EXPECT_TRUE(ParseManifests(JobWithArray("{indices: \"9999\"}", name), "job.yaml").ok());
}

}  // namespace
}  // namespace gpucloud::manifest
