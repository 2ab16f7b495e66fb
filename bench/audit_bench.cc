// The audit log's work per request, off the store (issue 14): what the request's thread and the
// store's writer spend on a job create's record, step by step, so that a change to one step is
// seen apart from the store's and the machine's noise (scripts/bench-audit-overhead measures the
// whole, side by side). The request is a tenant's job create as `api_load` makes it.
#include <benchmark/benchmark.h>

#include <string>
#include <utility>

#include "server/audit_chain.h"
#include "server/audited_store.h"
#include "server/rest.h"

namespace gpucloud::server {
namespace {

Request CreateRequest() {
  Request r;
  r.method = "POST";
  r.path = "/apis/gpucloud/v1/namespaces/team-a/jobs";
  r.who.user = "alice";
  r.who.namespace_ = "team-a";
  r.who.token_name = "alice-laptop";
  r.who.groups = {"ml-team", "gpucloud:authenticated"};
  return r;
}

// The request's record as the front makes it (BeginAudit), with a new id.
AuditRecord RequestRecord(const Request& r) {
  return AuditRecordFor(r, "127.0.0.1", "gpuctl/0.1.0", NewAuditId(), 1764979200123);
}

// What AuditedStore::Txn and authorization add to its copy before committing it.
void MarkCommitted(AuditRecord& rec) {
  rec.stage = kAuditCommittedStage;
  rec.object_name = "train-00042";
  rec.action = "jobs:Create";
  rec.resource = "gpucloud:job/team-a/train-00042";
  rec.decision = "allow";
  rec.reason = "gpucloud:tenant/TenantOwnNamespace";
}

// The record as AuditedStore::Txn commits it, with the annotations a job's create carries.
AuditRecord CommittedRecord() {
  AuditRecord rec = RequestRecord(CreateRequest());
  MarkCommitted(rec);
  rec.stage_ms = 1764979200125;
  rec.annotations["gpucloud.io/estimated-hourly-cost"] = "2.5";
  rec.annotations["gpucloud.io/gpu-type"] = "H100-80GB";
  return rec;
}

const std::string kPrevHash(64, 'a');

// The front's part: the request's record (BeginAudit) with its new id.
void BM_RecordForRequest(benchmark::State& state) {
  const Request r = CreateRequest();
  for (auto _ : state) {
    AuditRecord rec = RequestRecord(r);
    benchmark::DoNotOptimize(rec);
  }
}
BENCHMARK(BM_RecordForRequest);

// AuditedStore::Txn's copy of the request's record.
void BM_RecordCopy(benchmark::State& state) {
  const AuditRecord rec = CommittedRecord();
  for (auto _ : state) {
    AuditRecord copy = rec;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_RecordCopy);

// The request's thread encodes the record before its place in the chain is known.
void BM_PrepareRecord(benchmark::State& state) {
  const AuditRecord rec = CommittedRecord();
  for (auto _ : state) {
    PreparedRecord p = PrepareRecord(rec);
    benchmark::DoNotOptimize(p);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(EncodeRecord(rec).size()));
}
BENCHMARK(BM_PrepareRecord);

// The store's writer chains it: seq, prevHash, the SHA-256 and the final text (serial: in
// every group-commit batch's critical section).
void BM_ChainRecord(benchmark::State& state) {
  AuditRecord rec = CommittedRecord();
  const PreparedRecord p = PrepareRecord(rec);
  int64_t seq = 1000000;
  for (auto _ : state) {
    std::string text = ChainRecord(p, ++seq, kPrevHash, rec);
    benchmark::DoNotOptimize(text);
  }
}
BENCHMARK(BM_ChainRecord);

// All of a create's record off the store, in order: made, copied, prepared, chained, dropped.
void BM_CreateRecordPath(benchmark::State& state) {
  const Request r = CreateRequest();
  int64_t seq = 1000000;
  for (auto _ : state) {
    AuditRecord scope = RequestRecord(r);
    AuditRecord rec = scope;
    MarkCommitted(rec);
    PreparedRecord p = PrepareRecord(rec);
    std::string text = ChainRecord(p, ++seq, kPrevHash, rec);
    benchmark::DoNotOptimize(text);
  }
}
BENCHMARK(BM_CreateRecordPath);

}  // namespace
}  // namespace gpucloud::server

BENCHMARK_MAIN();
