// Manifest parsing speed: how fast `gpuctl validate` and, later, the API server's admission path
// read manifests. Results are recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <string>

#include "manifest/manifest.h"

namespace {

const char* kVolcanoJob = R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: pytorch-job-NAME
spec:
  minAvailable: 4
  tasks:
  - replicas: 4
    name: worker
    template:
      spec:
        containers:
        - name: pytorch
          image: pytorch/pytorch:2.0-cuda11.7-cudnn8-runtime
          command: ["python", "train.py"]
          resources:
            limits:
              nvidia.com/gpu: 1
)";

const char* kGpucloudJob = R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: llama-NAME
  namespace: team-nlp
spec:
  queue: team-nlp
  minAvailable: 2
  checkpoint: {dir: /ckpt, interval: 15m}
  tasks:
  - name: trainer
    replicas: 2
    image: nvcr.io/nvidia/pytorch:24.05-py3
    command: ["torchrun", "--nnodes=2", "--nproc-per-node=8", "finetune.py"]
    resources:
      gpu: {count: 8, type: h100}
      cpu: "96"
      memory: 1Ti
)";

std::string ManyDocuments(const char* tmpl, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string doc = tmpl;
    doc.replace(doc.find("NAME"), 4, std::to_string(i));
    out += "---\n" + doc;
  }
  return out;
}

void BM_ParseVolcanoJobs(benchmark::State& state) {
  std::string text = ManyDocuments(kVolcanoJob, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    gpucloud::manifest::ParseResult r = gpucloud::manifest::ParseManifests(text, "bench.yaml");
    if (!r.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseVolcanoJobs)->Arg(1)->Arg(1000);

void BM_ParseGpucloudJobs(benchmark::State& state) {
  std::string text = ManyDocuments(kGpucloudJob, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    gpucloud::manifest::ParseResult r = gpucloud::manifest::ParseManifests(text, "bench.yaml");
    if (!r.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ParseGpucloudJobs)->Arg(1)->Arg(1000);

void BM_PrintYaml(benchmark::State& state) {
  gpucloud::manifest::ParseResult r =
      gpucloud::manifest::ParseManifests(ManyDocuments(kGpucloudJob, 1), "bench.yaml");
  for (auto _ : state) benchmark::DoNotOptimize(gpucloud::manifest::ToYaml(r.manifests[0].object));
}
BENCHMARK(BM_PrintYaml);

}  // namespace

BENCHMARK_MAIN();
