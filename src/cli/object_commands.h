// gpuctl's commands on objects, with kubectl's verbs and flags where the concept is the same:
//   get TYPE[,TYPE...] [NAME...] | TYPE/NAME...  [-n NS] [-A] [-l SELECTOR]
//       [-o table|wide|name|json|yaml|jsonpath=TEMPLATE] [-w [--watch-timeout S]]
//   delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | -f FILE...   [-n NS]
//   apply -f FILE... [--dry-run=none|client|server] [-l SELECTOR] [--prune (-l SELECTOR | --all)]
//   diff -f FILE...      the server's objects against the files' (exit 0 same, 1 differ, 2 error)
// Lines name objects as kubectl does: "job.gpucloud/NAME created|configured|unchanged|deleted",
// and "secret/NAME ..." for a Secret (secret_apply.h: its values are never printed).
// Each function connects with `config` (see remote.h) once its arguments are checked; usage
// errors exit kExitUsage before anything is sent. Reentrant.
#ifndef GPUCLOUD_CLI_OBJECT_COMMANDS_H_
#define GPUCLOUD_CLI_OBJECT_COMMANDS_H_

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpucloud::cli {

struct GetOptions {
  std::vector<std::string> args;
  std::string ns;
  bool all_namespaces = false;
  std::string output = "table";
  std::string selector;
  int watch_seconds = -1;  // -1: no watch; 0: until the server ends it
};
int Get(const GetOptions& o, const std::string& config, std::ostream& out, std::ostream& err);

struct DeleteOptions {
  std::vector<std::string> args;
  std::vector<std::string> files;
  std::string ns;
  std::string selector;
};
int Delete(const DeleteOptions& o, const std::string& config, std::istream& in, std::ostream& out,
           std::ostream& err);

struct ApplyOptions {
  std::vector<std::string> files;
  // "none" (or ""), "client" (nothing sent but reads) or "server" (?dryRun=All).
  std::string dry_run = "none";
  // Only the files' objects with these labels are applied (and pruned among), as in kubectl.
  std::string selector;
  // After applying, delete what apply_prune.h's WhatToPrune picks ("KIND/NAME pruned"); needs
  // `selector` or `all` (a usage error otherwise, as in kubectl). Nothing is pruned when any
  // object failed to apply, nor in a dry run (the lines end "(dry run)").
  bool prune = false;
  bool all = false;
};
// The files' Secrets first (a job that names one finds it), then their objects in order; every
// one is written with the label kLastAppliedLabel (apply_prune.h).
int Apply(const ApplyOptions& o, const std::string& config, std::istream& in, std::ostream& out,
          std::ostream& err);

int Diff(const std::vector<std::string>& files, const std::string& config, std::istream& in,
         std::ostream& out, std::ostream& err);

// Declares get, delete, apply and diff on `app` and runs the one that was parsed (get of
// users, groups, tokens and policies through iam_commands.h). The object must outlive
// app.parse(): CLI11 writes the flags into it.
class ObjectCommands {
 public:
  explicit ObjectCommands(CLI::App& app);
  ObjectCommands(const ObjectCommands&) = delete;
  ObjectCommands& operator=(const ObjectCommands&) = delete;

  bool parsed() const;
  int Run(const std::string& config, std::istream& in, std::ostream& out, std::ostream& err);

 private:
  struct Flags;
  std::shared_ptr<Flags> flags_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_OBJECT_COMMANDS_H_
