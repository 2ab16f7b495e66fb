#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::sim {
namespace {

using Json = nlohmann::ordered_json;

double Round3(double v) { return std::round(v * 1000) / 1000; }

Json Stats(std::vector<double> v) {
  Json out = Json::object();
  out["count"] = v.size();
  if (v.empty()) return out;
  double sum = 0;
  for (double x : v) sum += x;
  out["mean"] = Round3(sum / static_cast<double>(v.size()));
  out["median"] = Percentile(v, 50);
  out["p95"] = Percentile(v, 95);
  out["p99"] = Percentile(v, 99);
  return out;
}

std::string SizeClass(MilliGpu gpus) {
  int64_t g = gpus.raw();
  if (g < kMilliPerUnit) return "<1";
  if (g == kMilliPerUnit) return "1";
  if (g <= 4 * kMilliPerUnit) return "2-4";
  if (g <= 8 * kMilliPerUnit) return "5-8";
  if (g <= 32 * kMilliPerUnit) return "9-32";
  return "33+";
}

struct Times {
  std::vector<double> jct, wait;
};

double JctOf(const JobOutcome& j) { return static_cast<double>(*j.end_s - j.submit_s); }

// Mean of allocated GPUs over [0, end] divided by capacity.
double MeanUtilization(const SimResult& r) {
  if (r.end_s <= 0 || r.total_gpus == 0) return 0;
  double area = 0;
  for (size_t i = 0; i < r.allocated.size(); ++i) {
    int64_t from = r.allocated[i].first;
    int64_t to = i + 1 < r.allocated.size() ? r.allocated[i + 1].first : r.end_s;
    area += r.allocated[i].second * static_cast<double>(std::max<int64_t>(0, to - from));
  }
  return area / (static_cast<double>(r.total_gpus) * static_cast<double>(r.end_s));
}

// Utilization in `buckets` equal spans of [0, end]: each span's start, its mean (the
// allocated-GPU step function's integral over the span) and its peak, so that a busy stretch
// shorter than a span still shows (as its peak) rather than falling between samples.
struct UtilizationBucket {
  int64_t start_s = 0;
  double mean = 0, peak = 0;
};
std::vector<UtilizationBucket> UtilizationSeries(const SimResult& r, int buckets) {
  std::vector<UtilizationBucket> out;
  if (r.end_s <= 0 || r.total_gpus == 0) return out;
  const double total = static_cast<double>(r.total_gpus);
  size_t k = 0;
  double current = 0;  // allocated GPUs at the span's start
  for (int i = 0; i < buckets; ++i) {
    const int64_t from = r.end_s * i / buckets, to = r.end_s * (i + 1) / buckets;
    while (k < r.allocated.size() && r.allocated[k].first <= from)
      current = r.allocated[k++].second;
    double area = 0, peak = current;
    int64_t t = from;
    while (k < r.allocated.size() && r.allocated[k].first < to) {
      area += current * static_cast<double>(r.allocated[k].first - t);
      t = r.allocated[k].first;
      current = r.allocated[k++].second;
      peak = std::max(peak, current);
    }
    area += current * static_cast<double>(to - t);
    const double span = static_cast<double>(std::max<int64_t>(1, to - from));
    out.push_back({from, Round3(area / span / total), Round3(peak / total)});
  }
  return out;
}

// The finished jobs' completion times as a CDF of at most about 400 points: (seconds, fraction).
std::vector<std::pair<double, double>> JctCdf(const SimResult& r) {
  std::vector<double> jct;
  for (const JobOutcome& j : r.jobs) {
    if (j.state == JobState::kFinished) jct.push_back(JctOf(j));
  }
  std::sort(jct.begin(), jct.end());
  std::vector<std::pair<double, double>> c;
  size_t step = std::max<size_t>(1, jct.size() / 400);
  for (size_t i = 0; i < jct.size(); i += step) {
    c.push_back({jct[i], static_cast<double>(i + 1) / jct.size()});
  }
  if (!jct.empty()) c.push_back({jct.back(), 1.0});
  return c;
}

// The services replayed beside the trace: what each got, and its timeline as
// [time_s, rps, desired, ready] at every change.
Json ServicesJson(const SimResult& r) {
  Json all = Json::array();
  for (const ServiceOutcome& s : r.services) {
    Json timeline = Json::array();
    for (const ServicePoint& p : s.timeline) {
      timeline.push_back(Json::array({p.t_s, Round3(p.rps), p.desired, p.ready}));
    }
    all.push_back(Json{{"name", s.name},
                       {"gpu_hours", Round3(s.gpu_hours)},
                       {"ready_replica_hours", Round3(s.ready_replica_hours)},
                       {"shortfall_replica_hours", Round3(s.shortfall_replica_hours)},
                       {"requests", std::llround(s.requests)},
                       {"peak_ready", s.peak_ready},
                       {"replicas_started", s.replicas_started},
                       {"replicas_preempted", s.preempted},
                       {"rejected", s.rejected.empty() ? Json(nullptr) : Json(s.rejected)},
                       {"timeline", std::move(timeline)}});
  }
  return all;
}

Json RunJson(const SimResult& r) {
  Json out = Json::object();
  out["policy"] = r.policy_name;
  std::map<std::string, int> states;
  Times all;
  std::map<std::string, Times> by_size, by_queue;
  double ideal_sum = 0;
  int64_t latest_ideal_end = 0, first_submit = INT64_MAX, last_end = 0;
  double gpu_seconds = 0;
  for (const JobOutcome& j : r.jobs) {
    ++states[std::string(JobStateName(j.state))];
    ideal_sum += static_cast<double>(j.duration_s);
    latest_ideal_end = std::max(latest_ideal_end, j.submit_s + j.duration_s);
    first_submit = std::min(first_submit, j.submit_s);
    gpu_seconds += j.gpus.raw() / 1000.0 * static_cast<double>(j.duration_s);
    if (j.first_start_s) {
      double wait = static_cast<double>(*j.first_start_s - j.submit_s);
      all.wait.push_back(wait);
      by_size[SizeClass(j.gpus)].wait.push_back(wait);
      by_queue[j.queue].wait.push_back(wait);
    }
    if (j.state == JobState::kFinished) {
      all.jct.push_back(JctOf(j));
      by_size[SizeClass(j.gpus)].jct.push_back(JctOf(j));
      by_queue[j.queue].jct.push_back(JctOf(j));
      last_end = std::max(last_end, *j.end_s);
    }
  }
  Json jobs = Json::object();
  jobs["total"] = r.jobs.size();
  for (const char* s : {"finished", "rejected", "pending", "running", "not-submitted"}) {
    jobs[s] = states[s];
  }
  out["jobs"] = std::move(jobs);
  out["jct_s"] = Stats(all.jct);
  out["queueing_delay_s"] = Stats(all.wait);
  auto group = [](const std::map<std::string, Times>& m) {
    Json g = Json::object();
    for (const auto& [k, t] : m) {
      g[k] = Json{{"jct_s", Stats(t.jct)}, {"queueing_delay_s", Stats(t.wait)}};
    }
    return g;
  };
  Json sizes = group(by_size);
  // Size classes in increasing order rather than by name.
  Json ordered_sizes = Json::object();
  for (const char* c : {"<1", "1", "2-4", "5-8", "9-32", "33+"}) {
    if (sizes.contains(c)) ordered_sizes[c] = sizes[c];
  }
  out["by_size_gpus"] = std::move(ordered_sizes);
  out["by_queue"] = group(by_queue);
  // null, not 0, when no job finished.
  out["makespan_s"] = all.jct.empty() ? Json(nullptr) : Json(last_end - first_submit);
  out["end_s"] = r.end_s;
  Json lower = Json::object();
  lower["mean_jct_s"] = Round3(r.jobs.empty() ? 0 : ideal_sum / static_cast<double>(r.jobs.size()));
  lower["makespan_s"] =
      std::max<int64_t>(latest_ideal_end - (r.jobs.empty() ? 0 : first_submit),
                        std::llround(std::ceil(gpu_seconds / std::max<int64_t>(1, r.total_gpus))));
  out["lower_bounds"] = std::move(lower);
  Json util = Json::object();
  util["mean"] = Round3(MeanUtilization(r));
  Json series = Json::array();
  for (const UtilizationBucket& b : UtilizationSeries(r, 200)) {
    series.push_back(Json::array({b.start_s, b.mean, b.peak}));
  }
  util["series"] = std::move(series);
  out["utilization"] = std::move(util);
  // The same CDF as report.html's chart, for the web console's simulator page.
  Json cdf = Json::array();
  for (const auto& [seconds, fraction] : JctCdf(r)) {
    cdf.push_back(Json::array({seconds, Round3(fraction)}));
  }
  out["jct_cdf"] = std::move(cdf);
  Json frag = Json::object();
  double fsum = 0;
  for (const auto& [t, f] : r.fragmentation) fsum += f;
  frag["mean"] = Round3(r.fragmentation.empty() ? 0 : fsum / r.fragmentation.size());
  frag["samples"] = r.fragmentation.size();
  out["fragmentation"] = std::move(frag);
  out["preemptions"] = r.preemptions;
  out["failures"] = r.failures;
  out["restarts"] = r.restarts;
  out["gpu_hours_lost"] = Round3(r.gpu_hours_lost);
  if (r.prediction.flags > 0 || r.prediction.failures > 0) {
    const PredictionResult& p = r.prediction;
    out["failure_prediction"] = Json{{"flags", p.flags},
                                     {"true_flags", p.true_flags},
                                     {"failures", p.failures},
                                     {"predicted_failures", p.predicted_failures},
                                     {"precision", Round3(p.precision())},
                                     {"recall", Round3(p.recall())},
                                     {"median_lead_hours", Round3(p.median_lead_hours)},
                                     {"migrations", p.migrations},
                                     {"gpu_hours_migration", Round3(p.gpu_hours_migration)},
                                     {"gpu_hours_cordoned", Round3(p.gpu_hours_cordoned)}};
  }
  Json cost = Json::object();
  double jobs_usd = 0, capacity_usd = 0;
  for (const auto& [k, v] : r.cost_usd) {
    cost[k] = Round3(v);
    jobs_usd += v;
  }
  out["cost_usd"] = std::move(cost);
  Json capacity = Json::object();
  for (const auto& [k, v] : r.capacity.capacity_cost_usd) {
    capacity[k] = Round3(v);
    capacity_usd += v;
  }
  out["capacity_cost_usd"] = std::move(capacity);
  out["idle_cost_usd"] = Round3(capacity_usd - jobs_usd);
  out["gpu_hours_provisioned"] = Round3(r.capacity.gpu_hours_provisioned);
  if (r.autoscaled) {
    const ElasticResult& e = r.capacity;
    out["autoscaling"] =
        Json{{"requests", e.requests},           {"nodes_added", e.nodes_added},
             {"nodes_removed", e.nodes_removed}, {"cancelled_requests", e.cancelled},
             {"peak_nodes", e.peak_nodes},       {"spot_reclaims", e.spot_reclaims}};
  }
  out["gpu_hours_training"] = Round3(r.gpu_hours_training);
  if (!r.services.empty()) out["services"] = ServicesJson(r);
  out["scheduler_cycles"] = r.cycles;
  return out;
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// A line chart: one polyline per series, x and y scaled into a 640 x 300 plot.
std::string Chart(
    const std::string& title, const std::string& x_label, const std::string& y_label,
    const std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>& series,
    bool log_x) {
  double x0 = INFINITY, x1 = -INFINITY, y1 = 0;
  auto fx = [&](double x) { return log_x ? std::log10(std::max(x, 1.0)) : x; };
  for (const auto& [name, pts] : series) {
    for (const auto& [x, y] : pts) {
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y1 = std::max(y1, y);
    }
  }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (y1 <= 0) y1 = 1;
  const double W = 640, H = 300, L = 60, T = 30;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<text x=\"{}\" y=\"18\" font-size=\"14\">{}</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n",
      W + L + 160, H + T + 50, L, Escape(title), L, T, W, H);
  for (int i = 0; i <= 4; ++i) {
    double y = y1 * i / 4;
    double px = log_x ? x0 + (x1 - x0) * i / 4 : x0 + (x1 - x0) * i / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2f}</text>\n", L - 4,
                       T + H - H * i / 4 + 4, y);
    double label = log_x ? std::pow(10.0, px) : px;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n",
                       L + W * i / 4, T + H + 16, label);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", L + W / 2,
                     T + H + 36, Escape(x_label));
  svg += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>\n",
      T + H / 2, T + H / 2, Escape(y_label));
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = kColors[s % std::size(kColors)];
    std::string points;
    for (const auto& [x, y] : series[s].second) {
      points += fmt::format("{:.1f},{:.1f} ", L + W * (fx(x) - x0) / (x1 - x0), T + H - H * y / y1);
    }
    svg +=
        fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                    color, points);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", L + W + 10,
                       T + 14 + 16 * s, color, Escape(series[s].first));
  }
  return svg + "</svg>\n";
}

// A skip reason without the values it quotes: each "..." becomes "…".
std::string ReasonKind(std::string_view reason) {
  std::string out;
  bool quoted = false;
  for (char c : reason) {
    if (c == '"') {
      out += quoted ? "\"" : "\"\u2026";
      quoted = !quoted;
    } else if (!quoted) {
      out += c;
    }
  }
  return out;
}

// RFC 4180 quoting when needed.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

std::string ReportJson(const ReportInput& in) {
  Json out = Json::object();
  Json trace = Json::object();
  trace["file"] = in.trace_file;
  trace["format"] = in.trace->format;
  trace["rows"] = in.trace->rows;
  trace["jobs"] = in.trace->jobs.size();
  trace["skipped_rows"] = in.trace->skipped.size();
  Json examples = Json::array();
  for (size_t i = 0; i < in.trace->skipped.size() && i < 20; ++i) {
    examples.push_back(
        Json{{"line", in.trace->skipped[i].line}, {"reason", in.trace->skipped[i].reason}});
  }
  trace["skipped_examples"] = std::move(examples);
  // Every skipped row is counted under its reason with the values taken out ("duration
  // \"x\" is not a number of seconds" -> "duration \"…\" is not a number of seconds").
  std::map<std::string, int64_t> by_reason;
  for (const SkippedRow& s : in.trace->skipped) ++by_reason[ReasonKind(s.reason)];
  Json counts = Json::object();
  for (const auto& [reason, n] : by_reason) counts[reason] = n;
  trace["skipped_by_reason"] = std::move(counts);
  out["trace"] = std::move(trace);
  Json cluster = Json::object();
  cluster["name"] = in.cluster->name;
  cluster["nodes"] = in.cluster->nodes.size();
  cluster["gpus"] = in.cluster->TotalGpus();
  Json pools = Json::array();
  for (size_t p = 0; p < in.cluster->pools.size(); ++p) {
    const NodePool& pool = in.cluster->pools[p];
    pools.push_back(Json{{"name", pool.metadata.name},
                         {"gpuType", pool.spec.gpu_type},
                         {"gpusPerNode", pool.spec.gpus_per_node},
                         {"nodes", pool.spec.max_nodes},
                         {"billing", BillingClassName(pool.spec.billing)},
                         {"pricePerGpuHour", FormatPrice(in.cluster->price_of_pool[p])}});
  }
  cluster["pools"] = std::move(pools);
  out["cluster"] = std::move(cluster);
  Json runs = Json::array();
  for (const SimResult& r : in.runs) runs.push_back(RunJson(r));
  out["runs"] = std::move(runs);
  return out.dump(2) + "\n";
}

std::string ReportHtml(const ReportInput& in) {
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> util, cdf;
  for (const SimResult& r : in.runs) {
    std::vector<std::pair<double, double>> mean, peak;
    for (const UtilizationBucket& b : UtilizationSeries(r, 400)) {
      mean.push_back({b.start_s / 3600.0, b.mean});
      peak.push_back({b.start_s / 3600.0, b.peak});
    }
    util.push_back({r.policy_name, std::move(mean)});
    util.push_back({r.policy_name + " (peak)", std::move(peak)});
    cdf.push_back({r.policy_name, JctCdf(r)});
  }
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpucloud sim report</title>\n"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>\n";
  html += fmt::format(
      "<h1>gpucloud sim</h1>\n<p>Trace {} ({}, {} jobs, {} rows skipped) on "
      "cluster {} ({} nodes, {} GPUs).</p>\n",
      Escape(in.trace_file), Escape(in.trace->format), in.trace->jobs.size(),
      in.trace->skipped.size(), Escape(in.cluster->name), in.cluster->nodes.size(),
      in.cluster->TotalGpus());
  html += "<pre>" + Escape(SummaryTable(in)) + "</pre>\n";
  html += Chart("GPU utilization over time", "hours", "allocated / all GPUs", util, false);
  html += Chart("Job completion time (CDF)", "seconds (log scale)", "fraction of jobs", cdf, true);
  html +=
      "<p>Data from the Microsoft Philly trace is used under CC-BY-4.0: Jeon et al., "
      "\"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads\", "
      "USENIX ATC 2019 (https://github.com/msr-fiddle/philly-traces), as extracted by the "
      "Pollux authors, when that trace is replayed.</p>\n</body></html>\n";
  return html;
}

std::string JobsCsv(const ReportInput& in) {
  std::string out =
      "policy,id,queue,gpus,submit_s,start_s,end_s,state,restarts,preemptions,reason\n";
  for (const SimResult& r : in.runs) {
    for (const JobOutcome& j : r.jobs) {
      out += Cat(r.policy_name, ",", CsvField(j.id), ",", CsvField(j.queue), ",",
                 FormatMilli(j.gpus.raw()), ",", j.submit_s, ",",
                 j.first_start_s ? std::to_string(*j.first_start_s) : "", ",",
                 j.end_s ? std::to_string(*j.end_s) : "", ",", JobStateName(j.state), ",",
                 j.restarts, ",", j.preemptions, ",", CsvField(j.reason), "\n");
    }
  }
  return out;
}

// What the machines cost, what of it the jobs used, and what autoscaling did; empty when no
// machine had a price.
static std::string CostTable(const ReportInput& in) {
  bool priced = false;
  for (const SimResult& r : in.runs) priced = priced || !r.capacity.capacity_cost_usd.empty();
  if (!priced) return "";
  std::string out =
      fmt::format("\n{:<22} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "cost", "machines $",
                  "jobs $", "idle $", "GPU-h paid", "peak nodes", "scale-ups");
  for (const SimResult& r : in.runs) {
    double capacity = 0, jobs = 0;
    for (const auto& [k, v] : r.capacity.capacity_cost_usd) capacity += v;
    for (const auto& [k, v] : r.cost_usd) jobs += v;
    out += fmt::format("{:<22} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.1f} {:>10} {:>10}\n",
                       r.policy_name, capacity, jobs, capacity - jobs,
                       r.capacity.gpu_hours_provisioned, r.capacity.peak_nodes,
                       r.autoscaled ? std::to_string(r.capacity.requests) : std::string("-"));
  }
  return out;
}

// GPU-hours of training and of each service, per run; "" without services.
static std::string ServiceTable(const ReportInput& in) {
  bool any = false;
  for (const SimResult& r : in.runs) any = any || !r.services.empty();
  if (!any) return "";
  std::string out =
      fmt::format("\n{:<22} {:<24} {:>9} {:>10} {:>11} {:>10} {:>9}\n", "services", "service",
                  "GPU-h", "ready rep-h", "short rep-h", "peak ready", "preempted");
  for (const SimResult& r : in.runs) {
    out +=
        fmt::format("{:<22} {:<24} {:>9.1f}\n", r.policy_name, "(training)", r.gpu_hours_training);
    for (const ServiceOutcome& s : r.services) {
      out += fmt::format("{:<22} {:<24} {:>9.1f} {:>10.1f} {:>11.1f} {:>10} {:>9}{}\n",
                         r.policy_name, s.name, s.gpu_hours, s.ready_replica_hours,
                         s.shortfall_replica_hours, s.peak_ready, s.preempted,
                         s.rejected.empty() ? "" : "  rejected: " + s.rejected);
    }
  }
  return out;
}

std::string SummaryTable(const ReportInput& in) {
  std::string out = fmt::format(
      "{:<14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>12}\n", "policy", "finished",
      "unfinished", "mean JCT", "median", "p95", "p99", "mean wait", "util", "makespan");
  // Seconds, or "-" when there is nothing to measure (no job finished or started): not 0s.
  auto secs = [](const std::vector<double>& v, double x) {
    return v.empty() ? std::string("-") : fmt::format("{:.0f}s", x);
  };
  for (const SimResult& r : in.runs) {
    std::vector<double> jct, wait;
    int64_t first = INT64_MAX, last = 0, unfinished = 0;
    for (const JobOutcome& j : r.jobs) {
      first = std::min(first, j.submit_s);
      if (j.first_start_s) wait.push_back(static_cast<double>(*j.first_start_s - j.submit_s));
      if (j.state == JobState::kFinished) {
        jct.push_back(JctOf(j));
        last = std::max(last, *j.end_s);
      }
      if (j.state == JobState::kPending || j.state == JobState::kRunning) ++unfinished;
    }
    double mean_jct = 0, mean_wait = 0;
    for (double x : jct) mean_jct += x;
    for (double x : wait) mean_wait += x;
    if (!jct.empty()) mean_jct /= jct.size();
    if (!wait.empty()) mean_wait /= wait.size();
    out += fmt::format("{:<14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>5.1f}% {:>12}\n",
                       r.policy_name, jct.size(), unfinished, secs(jct, mean_jct),
                       secs(jct, Percentile(jct, 50)), secs(jct, Percentile(jct, 95)),
                       secs(jct, Percentile(jct, 99)), secs(wait, mean_wait),
                       100 * MeanUtilization(r), secs(jct, static_cast<double>(last - first)));
  }
  out += CostTable(in);
  out += ServiceTable(in);
  bool any_prediction = false;
  for (const SimResult& r : in.runs) any_prediction = any_prediction || r.prediction.failures > 0;
  if (!any_prediction) return out;
  out += fmt::format("\n{:<22} {:>8} {:>6} {:>9} {:>7} {:>9} {:>10} {:>11} {:>10} {:>10}\n",
                     "failures", "count", "flags", "precision", "recall", "lead (h)", "lost GPU-h",
                     "migr. GPU-h", "total GPU-h", "cordon GPU-h");
  for (const SimResult& r : in.runs) {
    const PredictionResult& p = r.prediction;
    out += fmt::format(
        "{:<22} {:>8} {:>6} {:>9.3f} {:>7.3f} {:>9.1f} {:>10.1f} {:>11.1f} {:>10.1f} {:>10.1f}\n",
        r.policy_name, p.failures, p.flags, p.precision(), p.recall(), p.median_lead_hours,
        r.gpu_hours_lost, p.gpu_hours_migration, r.gpu_hours_lost + p.gpu_hours_migration,
        p.gpu_hours_cordoned);
  }
  return out;
}

}  // namespace gpucloud::sim
