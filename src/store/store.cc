#include "store/store.h"

#include <set>

#include "core/text.h"

namespace gpucloud::store {

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
