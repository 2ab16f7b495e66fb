#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "core/parse.h"
#include "core/text.h"
#include "sim/csv.h"

namespace gpucloud::sim {
namespace {

// Column indexes by name, from a header row.
class Columns {
 public:
  explicit Columns(const CsvRow& header) {
    for (size_t i = 0; i < header.fields.size(); ++i) {
      std::string name = ToLower(header.fields[i]);
      // Strip a UTF-8 byte order mark and spaces around names.
      if (name.starts_with("\xEF\xBB\xBF")) name = name.substr(3);
      while (!name.empty() && name.back() == ' ') name.pop_back();
      while (!name.empty() && name.front() == ' ') name.erase(0, 1);
      index_[name] = i;
    }
  }
  Columns(std::initializer_list<std::string_view> names) {
    size_t i = 0;
    for (std::string_view n : names) index_[std::string(n)] = i++;
  }
  bool Has(std::string_view name) const { return index_.contains(std::string(name)); }
  // The missing ones among `names`.
  std::vector<std::string> Missing(std::initializer_list<std::string_view> names) const {
    std::vector<std::string> out;
    for (std::string_view n : names) {
      if (!Has(n)) out.emplace_back(n);
    }
    return out;
  }
  // The field, or "" when the column is absent or the row is short.
  std::string_view Get(const CsvRow& row, std::string_view name) const {
    auto it = index_.find(std::string(name));
    if (it == index_.end() || it->second >= row.fields.size()) return {};
    return row.fields[it->second];
  }

 private:
  std::map<std::string, size_t> index_;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A non-negative number of seconds, integer or decimal ("164", "66.0", "1.5e3").
std::optional<double> Seconds(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> Integer(std::string_view text) {
  text = Trim(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// "2017-10-09 07:01:55" (or with a T), as seconds since the epoch, read as UTC.
std::optional<int64_t> DateTime(std::string_view text) {
  std::string s(Trim(text));
  int y, mo, d, h, mi, sec;
  char sep;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &sec) != 7 ||
      (sep != ' ' && sep != 'T') || h > 23 || mi > 59 || sec > 60) {
    return std::nullopt;
  }
  std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(mo),
                                  std::chrono::day(d)};
  if (!ymd.ok()) return std::nullopt;
  int64_t days = std::chrono::sys_days(ymd).time_since_epoch().count();
  return days * 86400 + h * 3600 + mi * 60 + sec;
}

// Seconds, or a date and time.
std::optional<double> Time(std::string_view text) {
  if (std::optional<double> s = Seconds(text)) return s;
  if (std::optional<int64_t> t = DateTime(text)) return static_cast<double>(*t);
  return std::nullopt;
}

// Whole GPUs (or a fraction below 1) from text such as "8", "0.5" or "8.0".
std::optional<MilliGpu> Gpus(std::string_view text) {
  std::optional<double> v = Seconds(text);
  if (!v) return std::nullopt;
  int64_t milli = std::llround(*v * kMilliPerUnit);
  if (milli > kMilliPerUnit && milli % kMilliPerUnit != 0) return std::nullopt;
  return MilliGpu(milli);
}

// One task of `gpus` in all: whole GPUs as one replica, a share as one shared replica.
TraceTask SingleTask(MilliGpu gpus) { return TraceTask{"main", 1, gpus}; }

std::vector<std::string> CatalogTypes(const GpuCatalog& catalog, std::string_view text) {
  std::vector<std::string> out;
  for (const GpuType* t : catalog.Resolve(std::string(Trim(text)))) out.push_back(t->name);
  return out;
}

struct Reader {
  Trace trace;
  double first_submit = INFINITY;
  std::vector<double> submits;  // parallel to trace.jobs, absolute

  void Skip(int line, std::string reason) { trace.skipped.push_back({line, std::move(reason)}); }
  void Add(TraceJob job, double submit) {
    first_submit = std::min(first_submit, submit);
    submits.push_back(submit);
    trace.jobs.push_back(std::move(job));
  }
  Trace Finish() {
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      trace.jobs[i].submit_s = std::llround(submits[i] - first_submit);
    }
    std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                     [](const TraceJob& a, const TraceJob& b) {
                       return std::tie(a.submit_s, a.line) < std::tie(b.submit_s, b.line);
                     });
    std::sort(trace.skipped.begin(), trace.skipped.end(),
              [](const SkippedRow& a, const SkippedRow& b) { return a.line < b.line; });
    return std::move(trace);
  }
};

// Common checks of one row's duration and GPUs; on failure records the row as skipped.
bool Check(Reader& r, int line, std::optional<double> submit, std::string_view submit_text,
           std::optional<double> duration, std::string_view duration_text,
           std::optional<MilliGpu> gpus, std::string_view gpus_text) {
  if (!submit) {
    r.Skip(line, Cat("submit time \"", submit_text, "\" is not a time"));
  } else if (!duration) {
    r.Skip(line, Cat("duration \"", duration_text, "\" is not a number of seconds"));
  } else if (!gpus) {
    r.Skip(line, Cat("GPUs \"", gpus_text, "\" is not a whole number (or a fraction below 1)"));
  } else if (gpus->raw() == 0) {
    r.Skip(line, "uses no GPU");
  } else if (*duration <= 0) {
    r.Skip(line, "duration is 0");
  } else {
    return true;
  }
  return false;
}

absl::Status NeedColumns(const Columns& c, std::string_view format,
                         std::initializer_list<std::string_view> names) {
  std::vector<std::string> missing = c.Missing(names);
  if (missing.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      Cat("line 1: not a ", format, " trace: no column ", Join(missing, ", "), " in the header"));
}

absl::StatusOr<Trace> ReadGeneric(const std::vector<CsvRow>& rows, std::string_view format,
                                  const GpuCatalog& catalog) {
  Columns c(rows[0]);
  Reader r;
  r.trace.format = std::string(format);
  // Column names per format: id, submit, duration, gpus, queue, user, type, estimate, priority.
  struct Names {
    std::string_view id, submit, duration, gpus, queue, user, type, estimate, priority;
  };
  Names n;
  if (format == "tiresias") {
    n = {"job_id", "submit_time", "duration", "num_gpu", "", "", "", "", ""};
  } else if (format == "philly") {
    n = {"", "timestamp", "duration", "num_gpus", "cluster", "", "", "", ""};
  } else if (format == "helios") {
    n = {"job_id", "submit_time", "duration", "gpu_num", "vc", "user", "", "", ""};
  } else {
    n = {"id", "submit", "duration", "gpus", "queue", "user", "gpu_type", "estimate", "priority"};
  }
  std::vector<std::string_view> required = {n.submit, n.duration, n.gpus};
  if (!n.id.empty()) required.push_back(n.id);
  for (std::string_view col : required) {
    if (!c.Has(col)) {
      return absl::InvalidArgumentError(
          Cat("line 1: not a ", format, " trace: no column \"", col, "\" in the header"));
    }
  }
  std::set<std::string> seen_ids;
  for (size_t i = 1; i < rows.size(); ++i) {
    const CsvRow& row = rows[i];
    ++r.trace.rows;
    std::string_view submit_text = c.Get(row, n.submit), duration_text = c.Get(row, n.duration),
                     gpus_text = c.Get(row, n.gpus);
    std::optional<double> submit = Time(submit_text);
    std::optional<double> duration = Seconds(duration_text);
    std::optional<MilliGpu> gpus = Gpus(gpus_text);
    if (!Check(r, row.line, submit, submit_text, duration, duration_text, gpus, gpus_text)) {
      continue;
    }
    TraceJob job;
    job.line = row.line;
    job.id = n.id.empty() ? Cat("job-", row.line) : std::string(Trim(c.Get(row, n.id)));
    if (job.id.empty()) {
      r.Skip(row.line, "no job id");
      continue;
    }
    if (!seen_ids.insert(job.id).second) {
      r.Skip(row.line, Cat("job id \"", job.id, "\" appears again"));
      continue;
    }
    job.duration_s = std::max<int64_t>(1, std::llround(*duration));
    job.tasks.push_back(SingleTask(*gpus));
    if (!n.queue.empty() && !Trim(c.Get(row, n.queue)).empty()) {
      job.queue = std::string(Trim(c.Get(row, n.queue)));
    }
    if (!n.user.empty()) job.user = std::string(Trim(c.Get(row, n.user)));
    if (!n.type.empty() && !Trim(c.Get(row, n.type)).empty()) {
      // One type or several, "T4|A10": any of them will do.
      std::string unknown;
      for (const std::string& part : SplitAny(c.Get(row, n.type), "|")) {
        std::vector<std::string> types = CatalogTypes(catalog, part);
        if (types.empty() && unknown.empty()) unknown = std::string(Trim(part));
        for (std::string& t : types) {
          if (std::find(job.gpu_types.begin(), job.gpu_types.end(), t) == job.gpu_types.end()) {
            job.gpu_types.push_back(std::move(t));
          }
        }
      }
      if (!unknown.empty() || job.gpu_types.empty()) {
        r.Skip(row.line,
               Cat("unknown GPU type \"",
                   unknown.empty() ? std::string(Trim(c.Get(row, n.type))) : unknown, "\""));
        continue;
      }
    }
    if (!n.estimate.empty() && !Trim(c.Get(row, n.estimate)).empty()) {
      std::optional<double> e = Seconds(c.Get(row, n.estimate));
      if (!e) {
        r.Skip(row.line, Cat("estimate \"", c.Get(row, n.estimate), "\" is not seconds"));
        continue;
      }
      job.estimate_s = std::llround(*e);
    }
    if (!n.priority.empty() && !Trim(c.Get(row, n.priority)).empty()) {
      std::optional<int64_t> p = Integer(c.Get(row, n.priority));
      if (!p || *p < -1000 || *p > 1000) {
        r.Skip(row.line, Cat("priority \"", c.Get(row, n.priority), "\" is not -1000..1000"));
        continue;
      }
      job.priority = static_cast<int32_t>(*p);
    }
    r.Add(std::move(job), *submit);
  }
  return r.Finish();
}

absl::StatusOr<Trace> ReadPai(const std::vector<CsvRow>& job_rows, std::string_view task_text,
                              const GpuCatalog& catalog) {
  if (task_text.empty()) {
    return absl::InvalidArgumentError("format pai needs the task table (pai_task_table.csv)");
  }
  absl::StatusOr<std::vector<CsvRow>> task_rows = ParseCsv(task_text);
  if (!task_rows.ok()) {
    return absl::InvalidArgumentError(Cat("task table: ", task_rows.status().message()));
  }
  const Columns kJobCols = {"job_name", "inst_id", "user", "status", "start_time", "end_time"};
  const Columns kTaskCols = {"job_name", "task_name", "inst_num", "status",   "start_time",
                             "end_time", "plan_cpu",  "plan_mem", "plan_gpu", "gpu_type"};
  auto has_header = [](const std::vector<CsvRow>& rows) {
    return !rows.empty() && !rows[0].fields.empty() && ToLower(rows[0].fields[0]) == "job_name";
  };
  Columns job_cols = has_header(job_rows) ? Columns(job_rows[0]) : kJobCols;
  Columns task_cols = has_header(*task_rows) ? Columns((*task_rows)[0]) : kTaskCols;
  if (absl::Status s =
          NeedColumns(job_cols, "PAI job table", {"job_name", "user", "start_time", "end_time"});
      !s.ok()) {
    return s;
  }
  // Tasks by job: replicas (inst_num) of plan_gpu percent of a GPU each.
  struct Tasks {
    std::vector<TraceTask> tasks;
    std::vector<std::string> types;
    std::string problem;
  };
  std::map<std::string, Tasks> by_job;
  for (size_t i = has_header(*task_rows) ? 1 : 0; i < task_rows->size(); ++i) {
    const CsvRow& row = (*task_rows)[i];
    std::string job(Trim(task_cols.Get(row, "job_name")));
    Tasks& t = by_job[job];
    std::optional<double> inst = Seconds(task_cols.Get(row, "inst_num"));
    std::string_view plan_text = Trim(task_cols.Get(row, "plan_gpu"));
    std::optional<double> plan = plan_text.empty() ? std::optional<double>(0) : Seconds(plan_text);
    if (!inst || !plan || *inst < 1 || *inst != std::floor(*inst)) {
      t.problem = Cat("task table row \"", row.line, "\" has a bad inst_num or plan_gpu");
      continue;
    }
    if (*plan == 0) continue;                  // a CPU-only task
    int64_t milli = std::llround(*plan * 10);  // percent of a GPU -> milli-GPU
    if (milli > kMilliPerUnit) milli = (milli + kMilliPerUnit - 1) / kMilliPerUnit * kMilliPerUnit;
    t.tasks.push_back({std::string(Trim(task_cols.Get(row, "task_name"))),
                       static_cast<int32_t>(*inst), MilliGpu(milli)});
    for (const std::string& type : CatalogTypes(catalog, task_cols.Get(row, "gpu_type"))) {
      if (std::find(t.types.begin(), t.types.end(), type) == t.types.end()) t.types.push_back(type);
    }
  }
  Reader r;
  r.trace.format = "pai";
  std::set<std::string> seen;
  for (size_t i = has_header(job_rows) ? 1 : 0; i < job_rows.size(); ++i) {
    const CsvRow& row = job_rows[i];
    ++r.trace.rows;
    std::string name(Trim(job_cols.Get(row, "job_name")));
    std::optional<double> start = Seconds(job_cols.Get(row, "start_time"));
    std::optional<double> end = Seconds(job_cols.Get(row, "end_time"));
    auto t = by_job.find(name);
    if (name.empty()) {
      r.Skip(row.line, "no job_name");
    } else if (!seen.insert(name).second) {
      r.Skip(row.line, Cat("job \"", name, "\" appears again"));
    } else if (!start) {
      r.Skip(row.line, Cat("start_time \"", job_cols.Get(row, "start_time"), "\" is not a time"));
    } else if (!end) {
      r.Skip(row.line, "no end_time (still running when the trace was taken)");
    } else if (*end <= *start) {
      r.Skip(row.line, "end_time is not after start_time");
    } else if (t == by_job.end()) {
      r.Skip(row.line, Cat("job \"", name, "\" has no tasks in the task table"));
    } else if (!t->second.problem.empty()) {
      r.Skip(row.line, t->second.problem);
    } else if (t->second.tasks.empty()) {
      r.Skip(row.line, "uses no GPU");
    } else {
      TraceJob job;
      job.id = name;
      job.line = row.line;
      job.duration_s = std::max<int64_t>(1, std::llround(*end - *start));
      job.tasks = t->second.tasks;
      job.gpu_types = t->second.types;
      job.user = std::string(Trim(job_cols.Get(row, "user")));
      r.Add(std::move(job), *start);
    }
  }
  return r.Finish();
}

std::string DetectFormat(const std::vector<CsvRow>& rows) {
  if (rows.empty()) return "";
  Columns c(rows[0]);
  if (c.Has("num_gpu") && c.Has("iterations")) return "tiresias";
  if (c.Has("timestamp") && c.Has("num_gpus")) return "philly";
  if (c.Has("gpu_num") && c.Has("vc")) return "helios";
  if (c.Has("id") && c.Has("submit") && c.Has("gpus")) return "csv";
  if (c.Has("job_name") || rows[0].fields.size() == 6) return "pai";
  return "";
}

}  // namespace

MilliGpu TraceJob::TotalGpus() const {
  MilliGpu total;
  for (const TraceTask& t : tasks) total += MilliGpu(t.gpus_per_replica.raw() * t.replicas);
  return total;
}

absl::StatusOr<Trace> ReadTrace(std::string_view text, std::string_view format,
                                std::string_view pai_tasks, const GpuCatalog& catalog) {
  absl::StatusOr<std::vector<CsvRow>> rows = ParseCsv(text);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::InvalidArgumentError("the trace is empty");
  std::string f(format);
  if (f == "auto") {
    f = DetectFormat(*rows);
    if (f.empty()) {
      return absl::InvalidArgumentError(
          Cat("line 1: cannot tell the trace's format from its header; name it with --format (",
              kTraceFormats, ")"));
    }
  }
  absl::StatusOr<Trace> trace;
  if (f == "pai") {
    trace = ReadPai(*rows, pai_tasks, catalog);
  } else if (f == "tiresias" || f == "philly" || f == "helios" || f == "csv") {
    trace = ReadGeneric(*rows, f, catalog);
  } else {
    return absl::InvalidArgumentError(
        Cat("unknown trace format \"", format, "\" (known: ", kTraceFormats, ", auto)"));
  }
  if (trace.ok() && trace->jobs.empty()) {
    std::string why = trace->skipped.empty()
                          ? std::string("it has no rows")
                          : Cat("line ", trace->skipped[0].line, ": ", trace->skipped[0].reason);
    return absl::InvalidArgumentError(Cat("no usable job in the trace (", why, ")"));
  }
  return trace;
}

}  // namespace gpucloud::sim
