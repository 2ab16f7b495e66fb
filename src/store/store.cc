#include "store/store.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "core/text.h"

namespace gpucloud::store {

absl::StatusOr<ListResult> Store::ListPage(const std::string& prefix, const std::string& after_key,
                                           int64_t limit, int64_t* remaining) {
  if (limit <= 0) return absl::InvalidArgumentError("ListPage: limit must be positive");
  absl::StatusOr<ListResult> all = List(prefix);
  if (!all.ok()) return all.status();
  auto first =
      std::upper_bound(all->items.begin(), all->items.end(), after_key,
                       [](const std::string& key, const KeyValue& kv) { return key < kv.key; });
  auto last = all->items.end() - first > limit ? first + limit : all->items.end();
  *remaining = all->items.end() - last;
  ListResult page{{std::make_move_iterator(first), std::make_move_iterator(last)}, all->revision};
  return page;
}

absl::Status ValidateTxnOps(const std::vector<Op>& ops) {
  if (ops.empty()) return absl::InvalidArgumentError("empty transaction");
  std::set<std::string> keys;
  bool writes = false;
  for (const Op& op : ops) {
    if (op.key.empty()) return absl::InvalidArgumentError("empty key");
    if (!keys.insert(op.key).second) {
      return absl::InvalidArgumentError(Cat("key ", op.key, " appears twice in a transaction"));
    }
    if (op.kind != Op::Kind::kCheck) {
      writes = true;
    } else if (!op.expect_mod_revision || *op.expect_mod_revision <= 0) {
      return absl::InvalidArgumentError(Cat(
          "the check on ", op.key, " needs expect_mod_revision > 0 (the revision it must be at)"));
    }
  }
  if (!writes) {
    return absl::InvalidArgumentError(
        Cat("a transaction of checks only (the first on ", ops[0].key, ") writes nothing"));
  }
  return absl::OkStatus();
}

}  // namespace gpucloud::store
