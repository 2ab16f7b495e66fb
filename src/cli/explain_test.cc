// gpuctl explain (explain.h): kubectl explain's layout from the compiled-in schema, offline.
#include "cli/explain.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "cli/gpuctl.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

// Runs gpuctl with `args`; the exit code, and stdout or stderr in *out.
int Gpuctl(std::vector<const char*> args, std::string* out, std::string* err) {
  args.insert(args.begin(), "gpuctl");
  std::istringstream in;
  std::ostringstream o, e;
  int code = RunGpuctl(static_cast<int>(args.size()), args.data(), in, o, e);
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(Explain, AKindListsItsTopFields) {
  absl::StatusOr<std::string> text = Explain("jobs", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(text->starts_with(
      "GROUP:      gpucloud\nKIND:       Job\nVERSION:    v1\n\nDESCRIPTION:\n    A gang of "))
      << *text;
  EXPECT_NE(text->find("FIELDS:\n  apiVersion\t<string> -required-\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("\n  spec\t<Object> -required-\n    What the job runs"), std::string::npos)
      << *text;
  EXPECT_NE(text->find("\n  status\t<Object>\n"), std::string::npos);
  // Name order, as kubectl prints properties.
  EXPECT_LT(text->find("  apiVersion\t"), text->find("  kind\t"));
  EXPECT_LT(text->find("  metadata\t"), text->find("  spec\t"));
}

TEST(Explain, AFieldPathThroughALists) {
  absl::StatusOr<std::string> text = Explain("job.spec.tasks.resources", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("VERSION:    v1\n\nFIELD: resources <Object>\n\n\nDESCRIPTION:\n    What "
                       "each replica of the task needs.\n    \nFIELDS:\n"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("  cpu\t<Quantity>\n    CPU cores per replica"), std::string::npos);
  EXPECT_NE(text->find("  gpu\t<Object>\n    GPUs per replica"), std::string::npos);
  EXPECT_NE(text->find("(or a whole number of GPUs: gpu: 4)"), std::string::npos);
  text = Explain("jobs.spec.tasks", false);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("FIELD: tasks <[]Object>\n"), std::string::npos);
  EXPECT_NE(text->find("  name\t<string> -required-\n"), std::string::npos);
  EXPECT_NE(text->find("  imagePullPolicy\t<string>\n  enum: Always, IfNotPresent, Never\n"),
            std::string::npos)
      << *text;
}

TEST(Explain, AnEnumFieldListsItsValues) {
  absl::StatusOr<std::string> text = Explain("job.spec.tasks.resources.gpu.sharing", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("FIELD: sharing <string>\nENUM:\n    time-slicing\n    mps\n\n"
                       "DESCRIPTION:\n"),
            std::string::npos)
      << *text;
  EXPECT_EQ(text->find("FIELDS:"), std::string::npos);
  EXPECT_TRUE(text->ends_with("default time-slicing.\n    \n\n")) << *text;
  // A list's values are its elements': kubectl shows none, nor does gpuctl.
  text = Explain("job.spec.policies", false);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("  events\t<[]string>\n    Events that"), std::string::npos) << *text;
}

TEST(Explain, RecursivePrintsEveryFieldBelowByNameAndType) {
  absl::StatusOr<std::string> text = Explain("job.spec", true);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("  tasks\t<[]Object> -required-\n    args\t<[]string>\n"), std::string::npos)
      << *text;
  EXPECT_NE(text->find("\n      gpu\t<Object>\n        count\t<Quantity>\n"), std::string::npos)
      << *text;
  EXPECT_EQ(text->find("What the job runs and where"), text->find("DESCRIPTION:") + 17);
  EXPECT_EQ(text->find("GPUs per replica"), std::string::npos);  // no field descriptions
}

TEST(Explain, DescriptionsWrapAtKubectlsWidth) {
  absl::StatusOr<std::string> text = Explain("job", false);
  ASSERT_TRUE(text.ok());
  for (const std::string& line : SplitAny(*text, "\n")) EXPECT_LE(line.size(), 80u) << line;
}

TEST(Explain, OtherKindsByTheirNames) {
  for (const char* name : {"queues", "np", "RuntimeClass", "nodes", "secret", "sa", "users",
                           "groups", "policy.spec.Statement", "tokens", "jobs.gpucloud.spec"}) {
    EXPECT_TRUE(Explain(name, false).ok()) << name;
  }
}

TEST(Explain, TheCommandWorksOfflineAndNamesWhatIsUnknown) {
  std::string out, err;
  // No config, no server: the schema is compiled in.
  EXPECT_EQ(Gpuctl({"--config", "/nonexistent", "explain", "job.spec.tasks.resources"}, &out, &err),
            kExitOk)
      << err;
  EXPECT_NE(out.find("FIELD: resources <Object>"), std::string::npos);
  EXPECT_EQ(Gpuctl({"explain", "job.spec.tasks.colour"}, &out, &err), kExitInvalid);
  EXPECT_EQ(err, "gpuctl explain: field \"colour\" does not exist in Job.spec.tasks\n");
  EXPECT_EQ(Gpuctl({"explain", "jobz"}, &out, &err), kExitInvalid);
  EXPECT_NE(err.find("unknown resource type \"jobz\""), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"jobs\""), std::string::npos) << err;
  EXPECT_EQ(Gpuctl({"explain", "--recursive", "queue.spec"}, &out, &err), kExitOk) << err;
  EXPECT_NE(out.find("  quota\t<[]Object>\n    gpuType\t<string> -required-\n"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace gpucloud::cli
