#include "server/fenced_store.h"

namespace gpucloud::server {

absl::StatusOr<int64_t> FencedStore::Txn(const std::vector<store::Op>& ops) {
  std::vector<store::Op> fenced;
  fenced.reserve(ops.size() + 1);
  // First: when the term is over, that is the error, whatever else fails too.
  fenced.push_back({.kind = store::Op::Kind::kCheck, .key = key_, .expect_mod_revision = token_});
  fenced.insert(fenced.end(), ops.begin(), ops.end());
  return store_.Txn(fenced);
}

}  // namespace gpucloud::server
