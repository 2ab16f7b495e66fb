#include "sim/trace.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpucloud::sim {
namespace {

// The shared traces: $GPUCLOUD_SHARED_DIR/traces when it is set, else those beside the source
// tree (CMake's GPUCLOUD_SHARED_DIR, ../shared by default).
std::filesystem::path SharedTraces() {
  const char* env = std::getenv("GPUCLOUD_SHARED_DIR");
  return std::filesystem::path(env != nullptr && *env != '\0' ? env : GPUCLOUD_SHARED_DIR) /
         "traces";
}

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Trace, TiresiasSixtyJobs) {
  const std::filesystem::path dir = SharedTraces();
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << dir << " is not there (set GPUCLOUD_SHARED_DIR to the shared directory)";
  }
  // The directory is there: a missing or empty trace is a failure, not a skip.
  std::string text = Slurp(dir / "tiresias_60_job.csv");
  ASSERT_FALSE(text.empty()) << dir / "tiresias_60_job.csv"
                             << " is missing or empty";
  absl::StatusOr<Trace> t = ReadTrace(text, "auto");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format, "tiresias");
  ASSERT_EQ(t->jobs.size(), 60u);
  EXPECT_TRUE(t->skipped.empty());
  EXPECT_EQ(t->jobs[0].id, "0");
  EXPECT_EQ(t->jobs[0].duration_s, 164);
  EXPECT_EQ(t->jobs[1].submit_s, 30);
  EXPECT_EQ(t->jobs[1].TotalGpus(), WholeGpus(8));
  EXPECT_EQ(t->jobs.back().submit_s, 1779);  // SOURCES.md: the last submission
}

TEST(Trace, PhillyTimestampsBecomeSecondsFromTheFirstAndRowsAreSorted) {
  absl::StatusOr<Trace> t = ReadTrace(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
      "2017-10-09 06:13:03,bad,1,1,x\n"
      "yesterday,10,1,10,x\n"
      "2017-10-09 06:14:03,10,0,0,x\n"
      "2017-10-09 06:15:03,10,1.5,15,x\n",
      "philly");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].queue, "6214e9");
  EXPECT_EQ(t->jobs[0].submit_s, 0);
  EXPECT_EQ(t->jobs[0].TotalGpus(), WholeGpus(2));
  EXPECT_EQ(t->jobs[1].submit_s, 48 * 60 + 52);
  EXPECT_EQ(t->rows, 6);
  ASSERT_EQ(t->skipped.size(), 4u);
  EXPECT_EQ(t->skipped[0].line, 4);
  EXPECT_EQ(t->skipped[0].reason, "duration \"bad\" is not a number of seconds");
  EXPECT_EQ(t->skipped[1].reason, "submit time \"yesterday\" is not a time");
  EXPECT_EQ(t->skipped[2].reason, "uses no GPU");
  EXPECT_EQ(t->skipped[3].line, 7);
  EXPECT_EQ(t->skipped[3].reason, "GPUs \"1.5\" is not a whole number (or a fraction below 1)");
}

TEST(Trace, HeliosColumns) {
  absl::StatusOr<Trace> t = ReadTrace(
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n"
      "1,alice,vc1,8,32,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 "
      "01:01:00,3600,0\n"
      "2,bob,vc2,0,4,1,COMPLETED,2020-04-01 00:00:00,,,20,0\n",
      "auto");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format, "helios");
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].user, "alice");
  EXPECT_EQ(t->jobs[0].queue, "vc1");
  EXPECT_EQ(t->jobs[0].duration_s, 3600);
  ASSERT_EQ(t->skipped.size(), 1u);
  EXPECT_EQ(t->skipped[0].reason, "uses no GPU");
}

TEST(Trace, PaiJobAndTaskTables) {
  // Headerless, as published. Job a: 2 workers of half a GPU plus a CPU-only PS, on T4.
  std::string jobs =
      "a,i1,u1,Terminated,100,400\n"
      "b,i2,u2,Terminated,50,\n"
      "c,i3,u1,Terminated,10,20\n"
      "d,i4,u3,Terminated,30,90\n";
  std::string tasks =
      "a,worker,2,Terminated,100,400,600,29,50,T4\n"
      "a,ps,1,Terminated,100,400,600,29,,\n"
      "c,tensorflow,1,Terminated,10,20,600,29,,\n"
      "d,worker,1,Terminated,30,90,800,58,200,V100M32\n";
  absl::StatusOr<Trace> t = ReadTrace(jobs, "pai", tasks);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 2u);
  const TraceJob& d = t->jobs[0];  // submitted at 30, before a (100)
  EXPECT_EQ(d.id, "d");
  EXPECT_EQ(d.submit_s, 0);
  EXPECT_EQ(d.duration_s, 60);
  EXPECT_EQ(d.TotalGpus(), WholeGpus(2));
  EXPECT_TRUE(d.gpu_types.empty());  // V100M32 is no catalog name: any type
  const TraceJob& a = t->jobs[1];
  EXPECT_EQ(a.submit_s, 70);
  ASSERT_EQ(a.tasks.size(), 1u);
  EXPECT_EQ(a.tasks[0].replicas, 2);
  EXPECT_EQ(a.tasks[0].gpus_per_replica, MilliGpu(500));
  EXPECT_EQ(a.gpu_types, std::vector<std::string>{"T4"});
  ASSERT_EQ(t->skipped.size(), 2u);
  EXPECT_EQ(t->skipped[0].line, 2);
  EXPECT_EQ(t->skipped[0].reason, "no end_time (still running when the trace was taken)");
  EXPECT_EQ(t->skipped[1].reason, "uses no GPU");
  EXPECT_EQ(ReadTrace(jobs, "pai").status().message(),
            "format pai needs the task table (pai_task_table.csv)");
}

TEST(Trace, GenericCsvWithOptionalColumns) {
  absl::StatusOr<Trace> t = ReadTrace(
      "id,submit,duration,gpus,queue,gpu_type,estimate,priority\n"
      "a,0,100,4,team-a,h100,120,5\n"
      "b,10,50,0.25,,,,\n"
      "a,20,5,1,,,,\n"
      "c,30,5,1,,tpu,,\n"
      "d,40,5,1,,,,high\n",
      "csv");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].gpu_types, std::vector<std::string>{"H100-80GB"});
  EXPECT_EQ(t->jobs[0].estimate_s, 120);
  EXPECT_EQ(t->jobs[0].priority, 5);
  EXPECT_EQ(t->jobs[0].queue, "team-a");
  EXPECT_EQ(t->jobs[1].queue, "default");
  EXPECT_EQ(t->jobs[1].TotalGpus(), MilliGpu(250));
  ASSERT_EQ(t->skipped.size(), 3u);
  EXPECT_EQ(t->skipped[0].reason, "job id \"a\" appears again");
  EXPECT_EQ(t->skipped[1].reason, "unknown GPU type \"tpu\"");
  EXPECT_EQ(t->skipped[2].reason, "priority \"high\" is not -1000..1000");
}

// gpu_type may list several types: any of them will do; one unknown among them skips the row.
TEST(Trace, GenericCsvTakesSeveralGpuTypes) {
  absl::StatusOr<Trace> t = ReadTrace(
      "id,submit,duration,gpus,gpu_type\n"
      "a,0,100,1,T4|A10\n"
      "b,0,100,1,t4 | t4\n"
      "c,0,100,1,T4|tpu\n",
      "csv");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].gpu_types, (std::vector<std::string>{"T4", "A10"}));
  EXPECT_EQ(t->jobs[1].gpu_types, std::vector<std::string>{"T4"});
  ASSERT_EQ(t->skipped.size(), 1u);
  EXPECT_EQ(t->skipped[0].reason, "unknown GPU type \"tpu\"");
}

TEST(Trace, BadFilesAreRefusedWithAReason) {
  EXPECT_EQ(ReadTrace("", "auto").status().message(), "the trace is empty");
  EXPECT_EQ(ReadTrace("a,b\n1,2\n", "tiresias").status().message(),
            "line 1: not a tiresias trace: no column \"submit_time\" in the header");
  EXPECT_EQ(ReadTrace("x,y,z\n1,2,3\n", "auto").status().message(),
            "line 1: cannot tell the trace's format from its header; name it with --format "
            "(tiresias, philly, helios, pai, csv)");
  EXPECT_EQ(ReadTrace("id,submit,duration,gpus\n", "slurm").status().message(),
            "unknown trace format \"slurm\" (known: tiresias, philly, helios, pai, csv, auto)");
  EXPECT_EQ(ReadTrace("id,submit,duration,gpus\na,0,0,1\n", "csv").status().message(),
            "no usable job in the trace (line 2: duration is 0)");
  EXPECT_FALSE(ReadTrace("id,submit,duration,gpus\n\"a,0,10,1\n", "csv").ok());  // open quote
}

}  // namespace
}  // namespace gpucloud::sim
