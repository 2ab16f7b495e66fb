// The SQLite backend of Store: one database file in WAL mode with synchronous=FULL, so every
// acknowledged transaction survives a crash of the process or the machine. Tables: objects
// (current values), changes (the log, by revision) and meta (revision, compacted revision).
// Writes are group-committed: transactions that arrive while a batch is being written go into
// the next batch, each with its own revision, under one fsync. Reads use a second connection
// and see committed data only. Compaction runs in batches that take turns with the writes and
// then truncates the WAL.
//
// The database file and its -wal and -shm files are readable by their owner only (0600): they
// hold job environments, secrets included. A file that fails SQLite's integrity check is
// refused at open; a read or write that meets a corrupt page later fails with DataLoss, never
// answers with partial data.
// Thread-safe.
#ifndef GPUCLOUD_STORE_SQLITE_STORE_H_
#define GPUCLOUD_STORE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace gpucloud::store {

struct SqliteStoreOptions {
  // PRAGMA quick_check at open: reads every page once (about a second per GB). Tests turn it
  // off to reach the read paths with a corrupt file.
  bool quick_check = true;
  // About how many change rows one compaction transaction drops (a revision's rows always go
  // together): bounds how long a compaction holds the writer and how much WAL one batch writes.
  int compaction_batch_rows = 10000;
};

// Opens (creating if needed) the store at `path`, creating the file 0600 and restricting an
// existing one (and its -wal and -shm files) to 0600. Unavailable when the file cannot be
// opened or its mode set, DataLoss when it is not a gpucloud store or is corrupt (fails PRAGMA
// quick_check: the message is SQLite's first complaint), InvalidArgument for bad options.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                       const SqliteStoreOptions& options = {});

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_SQLITE_STORE_H_
