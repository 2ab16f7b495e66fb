// The SQLite backend of Store: one database file in WAL mode with synchronous=FULL, so every
// acknowledged transaction survives a crash of the process or the machine. Tables: objects
// (current values), changes (the log, by revision) and meta (revision, compacted revision).
// Writes are group-committed: transactions that arrive while a batch is being written go into
// the next batch, each with its own revision, under one fsync. Reads use a second connection
// and see committed data only.
// Thread-safe.
#ifndef GPUCLOUD_STORE_SQLITE_STORE_H_
#define GPUCLOUD_STORE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace gpucloud::store {

// Opens (creating if needed) the store at `path`. Unavailable when the file cannot be opened,
// DataLoss when it is not a gpucloud store or is corrupt.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_SQLITE_STORE_H_
