#include "cli/object_commands.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "absl/time/clock.h"
#include "api/client.h"
#include "api/paths.h"
#include "api/session_wire.h"
#include "cli/apply_prune.h"
#include "cli/cluster_commands.h"
#include "cli/gpuctl.h"
#include "cli/iam_commands.h"
#include "cli/jsonpath.h"
#include "cli/label_selector.h"
#include "cli/manifest_files.h"
#include "cli/remote.h"
#include "cli/resources.h"
#include "cli/secret_apply.h"
#include "cli/secret_commands.h"
#include "cli/service_commands.h"
#include "cli/unified_diff.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/json_yaml.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kIamTypes = {"users", "groups", "tokens", "policies"};

enum class Format { kTable, kWide, kName, kJson, kYaml, kJsonPath };
struct Output {
  Format format = Format::kTable;
  std::optional<JsonPath> jsonpath;
};

absl::StatusOr<Output> ParseOutput(const std::string& flag) {
  if (flag.empty() || flag == "table") return Output{Format::kTable, std::nullopt};
  if (flag == "wide") return Output{Format::kWide, std::nullopt};
  if (flag == "name") return Output{Format::kName, std::nullopt};
  if (flag == "json") return Output{Format::kJson, std::nullopt};
  if (flag == "yaml") return Output{Format::kYaml, std::nullopt};
  if (flag.starts_with("jsonpath=")) {
    absl::StatusOr<JsonPath> p = JsonPath::Parse(flag.substr(9));
    if (!p.ok()) return p.status();
    return Output{Format::kJsonPath, std::move(*p)};
  }
  return absl::InvalidArgumentError(Cat("unknown output format \"", flag,
                                        "\" (table, wide, name, json, yaml, jsonpath=TEMPLATE)"));
}

// One request's objects as the server answered them.
struct Fetched {
  const ResourceType* type = nullptr;
  std::vector<Json> objects;
  std::string body;            // the server's last answer, verbatim
  std::string path;            // the collection
  std::string revision = "0";  // a list's resourceVersion
  bool list = false;           // the collection asked for, not named objects
};

std::string CollectionFor(const ResourceType& type, const std::string& ns, bool all_namespaces) {
  if (all_namespaces && type.namespaced) return api::ClusterScopedPath(type.plural);
  return type.Collection(ns);
}

// The object's REST path, from the types gpuctl knows; "" for a kind the server does not take.
std::string PathOf(const manifest::Object& object) {
  const ResourceType* type = FindResourceType(manifest::KindOf(object));
  if (type == nullptr) return "";
  const ObjectMeta& meta = manifest::MetaOf(object);
  return Cat(type->Collection(meta.namespace_), "/", meta.name);
}

// The objects of `req` into `f`; false after saying why on `err` (the others still fetched).
bool Fetch(const api::Client& client, const ResourceRequest& req, const GetOptions& o, Fetched& f,
           std::ostream& err) {
  f.type = req.type;
  f.path = CollectionFor(*req.type, o.ns, o.all_namespaces && req.names.empty());
  f.list = req.names.empty();
  if (f.list) {
    std::string target = f.path;
    if (!o.selector.empty()) target += "?labelSelector=" + api::PercentEncode(o.selector);
    std::optional<api::HttpResponse> r = Send(client, "GET", target, "", err);
    if (!r) return false;
    f.body = r->body;
    Json j = Json::parse(r->body, nullptr, false);
    if (!j.is_object() || !j.contains("items") || !j["items"].is_array()) {
      err << "gpuctl: the server's answer is not a list\n";
      return false;
    }
    for (const Json& item : j["items"]) f.objects.push_back(item);
    if (j.contains("metadata")) f.revision = j["metadata"].value("resourceVersion", "0");
    return true;
  }
  bool ok = true;
  for (const std::string& name : req.names) {
    std::optional<api::HttpResponse> r = Send(client, "GET", f.path + "/" + name, "", err);
    if (!r) {
      ok = false;
      continue;
    }
    f.body = r->body;
    f.objects.push_back(Json::parse(r->body, nullptr, false));
  }
  return ok;
}

Json ListOf(const std::vector<Fetched>& all) {
  Json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", Json::array()}};
  for (const Fetched& f : all) {
    for (const Json& o : f.objects) list["items"].push_back(o);
  }
  return list;
}

// What a table says of an object that is not a manifest kind: a Namespace's phase and owner, a
// ServiceAccount's policies.
std::string IdentitySummary(const Json& item) {
  const std::string kind = item.value("kind", "");
  const Json spec = item.value("spec", Json::object());
  if (kind == "Namespace") {
    std::string phase = item.value("status", Json::object()).value("phase", "Active");
    std::string owner = spec.is_object() ? spec.value("owner", "") : "";
    return owner.empty() ? phase : Cat(phase, ", owner ", owner);
  }
  if (kind == "ServiceAccount") {
    std::vector<std::string> names;
    for (const Json& p : spec.value("policies", Json::array())) {
      if (p.is_string()) names.push_back(p.get<std::string>());
    }
    return names.empty() ? "no policies" : Cat("policies ", Join(names, ", "));
  }
  return "?";
}

void PrintSummaryTable(const std::vector<Json>& items, std::ostream& out) {
  out << fmt::format("{:<24} {:>8}  {}\n", "NAME", "REVISION", "SUMMARY");
  for (const Json& item : items) {
    manifest::ParseResult p = manifest::ParseManifests(item.dump(), "server");
    std::string summary = p.ok() && p.manifests.size() == 1
                              ? manifest::Summarize(p.manifests[0].object)
                              : IdentitySummary(item);
    const Json& meta = item.contains("metadata") ? item["metadata"] : Json::object();
    out << fmt::format("{:<24} {:>8}  {}\n", meta.value("name", "?"),
                       meta.value("resourceVersion", "?"), summary);
  }
}

void PrintTable(const ResourceType& type, const std::vector<Json>& items, bool with_namespace,
                bool wide, std::ostream& out) {
  if (type.plural == "jobs") {
    PrintJobsTable(items, with_namespace, out, wide);
  } else if (type.plural == "nodes") {
    PrintNodesTable(items, out, wide);
  } else if (type.plural == "inferenceservices") {
    PrintServicesTable(items, with_namespace, out);
  } else if (type.plural == "secrets") {
    PrintSecretsTable(items, with_namespace, absl::ToUnixMillis(absl::Now()), out);
  } else {
    PrintSummaryTable(items, out);
  }
}

std::string NameOf(const Json& object) {
  if (!object.is_object() || !object.contains("metadata")) return "?";
  return object["metadata"].value("name", "?");
}

void PrintObjects(const std::vector<Fetched>& all, const Output& output, const GetOptions& o,
                  std::ostream& out) {
  // One list, or one named object: the server's answer is what is printed (-o json) or what
  // the template starts from (-o jsonpath), as in kubectl; anything more, a List of them all.
  const bool one_answer =
      all.size() == 1 && (all[0].list || (all[0].objects.size() == 1 && !all[0].body.empty()));
  switch (output.format) {
    case Format::kJson:
      if (one_answer) {
        out << all[0].body;
      } else {
        out << ListOf(all).dump(2) << "\n";
      }
      return;
    case Format::kYaml:  // the very objects -o json prints, one document each
      for (const Fetched& f : all) {
        for (const Json& item : f.objects) {
          absl::StatusOr<std::string> yaml = manifest::JsonToYaml(item.dump());
          if (yaml.ok()) out << "---\n" << *yaml;
        }
      }
      return;
    case Format::kName:
      for (const Fetched& f : all) {
        for (const Json& item : f.objects) out << f.type->singular << "/" << NameOf(item) << "\n";
      }
      return;
    case Format::kJsonPath: {
      Json root = !one_answer   ? ListOf(all)
                  : all[0].list ? Json::parse(all[0].body, nullptr, false)
                                : all[0].objects[0];
      out << output.jsonpath->Execute(root);
      return;
    }
    case Format::kTable:
    case Format::kWide:
      for (size_t i = 0; i < all.size(); ++i) {
        if (i > 0) out << "\n";
        PrintTable(*all[i].type, all[i].objects, o.all_namespaces, output.format == Format::kWide,
                   out);
      }
      return;
  }
}

// After the list, every change as it happens: rows of the same table, without its header.
int WatchAfter(const api::Client& client, const Fetched& f, const GetOptions& o, bool wide,
               std::ostream& out, std::ostream& err) {
  out.flush();
  std::string target = Cat(f.path, "?watch=true&resourceVersion=", f.revision);
  if (!o.selector.empty()) target += "&labelSelector=" + api::PercentEncode(o.selector);
  if (o.watch_seconds > 0) target += Cat("&timeoutSeconds=", o.watch_seconds);
  const bool tabled = f.type->plural == "jobs" || f.type->plural == "nodes";
  absl::StatusOr<api::HttpResponse> w = client.Stream(target, [&](const std::string& line) {
    Json e = Json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("object")) return;
    if (tabled) {
      std::ostringstream row;
      PrintTable(*f.type, {e["object"]}, o.all_namespaces, wide, row);
      std::string text = row.str();
      out << text.substr(text.find('\n') + 1);  // without the header
      out.flush();
      return;
    }
    const Json& meta = e["object"]["metadata"];
    out << fmt::format("{:<24} {:>8}  {}\n", meta.value("name", "?"),
                       meta.value("resourceVersion", "?"), e.value("type", "?"));
    out.flush();
  });
  if (!w.ok() || w->status != 200) {
    err << "gpuctl: " << (w.ok() ? StatusMessage(*w) : std::string(w.status().message())) << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

// The names and the namespace the requests put into paths, checked; false after saying why.
bool RequestNamesAreLabels(const std::vector<ResourceRequest>& requests, const std::string& ns,
                           std::ostream& err) {
  std::vector<std::pair<std::string_view, std::string>> named = {{"namespace", ns}};
  for (const ResourceRequest& r : requests) {
    for (const std::string& n : r.names) named.emplace_back("NAME", n);
  }
  return NamesAreLabels(named, err);
}

// Requests from `args`, checked: nullopt after a usage message on `err`.
std::optional<std::vector<ResourceRequest>> UsableRequests(const std::vector<std::string>& args,
                                                           const std::string& ns,
                                                           const std::string& selector,
                                                           std::string_view context,
                                                           std::ostream& err) {
  absl::StatusOr<std::vector<ResourceRequest>> requests =
      ParseResourceArgs(args, context, kIamTypes);
  if (!requests.ok()) {
    std::string message(requests.status().message());  // some name the command already
    err << (message.starts_with("gpuctl") ? "" : "gpuctl: ") << message << "\n";
    return std::nullopt;
  }
  for (const ResourceRequest& r : *requests) {
    if (!selector.empty() && !r.names.empty()) {
      err << context << ": NAMEs and --selector together: give one or the other\n";
      return std::nullopt;
    }
    if (!selector.empty() && r.type->plain_collection) {
      err << context << ": " << r.type->plural << " take no --selector\n";
      return std::nullopt;
    }
  }
  if (!RequestNamesAreLabels(*requests, ns, err)) return std::nullopt;
  return *requests;
}

}  // namespace

int Get(const GetOptions& o, const std::string& config, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Output> output = ParseOutput(o.output);
  if (!output.ok()) {
    err << "gpuctl get: " << output.status().message() << "\n";
    return kExitUsage;
  }
  std::optional<std::vector<ResourceRequest>> requests =
      UsableRequests(o.args, o.ns, o.selector, "gpuctl get", err);
  if (!requests) return kExitUsage;
  const bool wide = output->format == Format::kWide;
  for (const ResourceRequest& r : *requests) {
    if (r.type->plain_collection && (o.all_namespaces || o.watch_seconds >= 0)) {
      err << "gpuctl get: " << r.type->plural << " are listed one namespace at a time, "
          << "without -A or -w\n";
      return kExitUsage;
    }
  }
  if (o.watch_seconds >= 0 && (requests->size() != 1 || !(*requests)[0].names.empty() ||
                               (output->format != Format::kTable && !wide))) {
    err << "gpuctl get -w: watches one whole collection, as a table\n";
    return kExitUsage;
  }
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return kExitInvalid;
  std::vector<Fetched> all(requests->size());
  bool ok = true;
  for (size_t i = 0; i < requests->size(); ++i) {
    ok = Fetch(*client, (*requests)[i], o, all[i], err) && ok;
  }
  PrintObjects(all, *output, o, out);
  if (!ok) return kExitInvalid;
  if (o.watch_seconds < 0) return kExitOk;
  return WatchAfter(*client, all[0], o, wide, out, err);
}

namespace {

// The files' manifests and a client to send them with; nullopt (said on `err`) when a file is
// invalid or the config does not connect.
struct FilesAndClient {
  LoadedManifests manifests;
  api::Client client;
};
std::optional<FilesAndClient> LoadAndConnect(const std::vector<std::string>& files,
                                             const std::string& config, std::istream& in,
                                             std::ostream& err) {
  LoadedManifests loaded = LoadManifests(files, in);
  PrintDiagnostics(loaded, err);
  if (!loaded.errors.empty()) return std::nullopt;
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return std::nullopt;
  return FilesAndClient{std::move(loaded), std::move(*client)};
}

// DELETE one object; prints "job.gpucloud/NAME deleted" or says why on `err`.
bool DeleteOne(const api::Client& client, const std::string& path, const std::string& what,
               std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r = Send(client, "DELETE", path, "", err, what);
  if (!r) return false;
  out << what << " deleted" << (r->status == 202 ? " (its tasks are stopped first)" : "") << "\n";
  return true;
}

int DeleteFiles(const std::vector<std::string>& files, const std::string& config, std::istream& in,
                std::ostream& out, std::ostream& err) {
  std::optional<FilesAndClient> fc = LoadAndConnect(files, config, in, err);
  if (!fc) return kExitInvalid;
  const LoadedManifests& loaded = fc->manifests;
  api::Client* client = &fc->client;
  int code = kExitOk;
  for (const manifest::Manifest& m : loaded.manifests) {
    std::string what =
        Cat(ToLower(manifest::KindOf(m.object)), ".gpucloud/", manifest::MetaOf(m.object).name);
    std::string path = PathOf(m.object);
    if (path.empty()) {
      err << "gpuctl: " << what << ": the server does not take this kind yet\n";
      code = kExitInvalid;
    } else if (!DeleteOne(*client, path, what, out, err)) {
      code = kExitInvalid;
    }
  }
  for (const manifest::SecretManifest& s : loaded.secrets) {  // after the jobs that use them
    if (!DeleteSecret(*client, s.secret, out, err)) code = kExitInvalid;
  }
  return code;
}

}  // namespace

int Delete(const DeleteOptions& o, const std::string& config, std::istream& in, std::ostream& out,
           std::ostream& err) {
  if (!o.files.empty()) {
    if (!o.args.empty() || !o.selector.empty()) {
      err << "gpuctl delete: -f, or TYPE NAME / --selector: not both\n";
      return kExitUsage;
    }
    return DeleteFiles(o.files, config, in, out, err);
  }
  std::optional<std::vector<ResourceRequest>> requests =
      UsableRequests(o.args, o.ns, o.selector, "gpuctl delete", err);
  if (!requests) return kExitUsage;
  for (const ResourceRequest& r : *requests) {
    if (r.names.empty() && o.selector.empty()) {
      err << "gpuctl delete: " << r.type->plural
          << ": give NAMEs, TYPE/NAMEs, -l SELECTOR or -f FILE\n";
      return kExitUsage;
    }
  }
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return kExitInvalid;
  int code = kExitOk;
  for (const ResourceRequest& r : *requests) {
    Fetched f;
    std::vector<std::string> names = r.names;
    if (!o.selector.empty()) {  // as kubectl: the list, then each of its objects
      GetOptions list{.args = {}, .ns = o.ns, .selector = o.selector};
      if (!Fetch(*client, r, list, f, err)) {
        code = kExitInvalid;
        continue;
      }
      for (const Json& item : f.objects) names.push_back(NameOf(item));
      if (names.empty()) out << "No resources found\n";
    }
    std::string base = CollectionFor(*r.type, o.ns, false);
    for (const std::string& name : names) {
      if (!DeleteOne(*client, base + "/" + name, Cat(r.type->Qualified(), "/", name), out, err))
        code = kExitInvalid;
    }
  }
  return code;
}

namespace {

bool Empty(const Json& j) { return j.is_null() || (j.is_object() && j.empty()); }

// What a user writes of an object, for comparison: apiVersion, kind, metadata's name,
// namespace, labels and annotations, and spec. Not status, uid, revisions or timestamps.
Json Written(const Json& object) {
  Json out = Json::object();
  for (const char* key : {"apiVersion", "kind", "spec"}) {
    if (object.contains(key) && !Empty(object[key])) out[key] = object[key];
  }
  if (!object.contains("metadata")) return out;
  for (const char* key : {"name", "namespace", "labels", "annotations"}) {
    const Json& meta = object["metadata"];
    if (meta.contains(key) && !Empty(meta[key])) out["metadata"][key] = meta[key];
  }
  return out;
}

// `object` as apply writes it: with kLastAppliedLabel, gpuctl's mark (apply_prune.h).
manifest::Object Marked(const manifest::Object& object) {
  manifest::Object marked = object;
  std::visit([](auto& o) { o.metadata.labels[std::string(kLastAppliedLabel)] = "true"; }, marked);
  return marked;
}

// Whether a PUT over `live` changed it: the server answers an object it did not write with the
// revision it had (what the server stores can differ from the file, e.g. a RuntimeClass's node
// selector merged in, so comparing with the file alone would say "configured" every time).
bool Wrote(const std::optional<Json>& live, const std::string& answer) {
  auto revision = [](const Json& j) -> std::string {
    if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) return "";
    return j["metadata"].value("resourceVersion", "");
  };
  if (!live) {  // a job array's answer, a Status: Unchanged when its jobs were as asked
    Json j = Json::parse(answer, nullptr, false);
    return !(j.is_object() && j.value("kind", "") == "Status" &&
             j.value("reason", "") == "Unchanged");
  }
  const std::string before = revision(*live);
  return before.empty() || revision(Json::parse(answer, nullptr, false)) != before;
}

bool ApplyOne(const api::Client& client, const manifest::Object& file_object, DryRun dry_run,
              std::ostream& out, std::ostream& err) {
  const manifest::Object object = Marked(file_object);
  std::string what =
      Cat(ToLower(manifest::KindOf(object)), ".gpucloud/", manifest::MetaOf(object).name);
  std::string path = PathOf(object);
  if (path.empty()) {
    err << "gpuctl: " << what << ": the server does not take this kind yet\n";
    return false;
  }
  absl::StatusOr<std::optional<Json>> live = ReadLive(client, path);
  if (!live.ok()) {
    err << "gpuctl: " << what << ": " << live.status().message() << "\n";
    return false;
  }
  const std::string_view suffix = DryRunSuffix(dry_run);
  Json want = Json::parse(manifest::ToJson(object));
  if (live->has_value() && Written(**live) == Written(want)) {
    out << what << " unchanged" << suffix << "\n";
    return true;
  }
  if (dry_run == DryRun::kClient) {
    out << what << (live->has_value() ? " configured" : " created") << suffix << "\n";
    return true;
  }
  std::string target = dry_run == DryRun::kServer ? path + "?dryRun=All" : path;
  std::optional<api::HttpResponse> r =
      Send(client, "PUT", target, manifest::ToYaml(object), err, what);
  if (!r) return false;
  const char* said = r->status == 201        ? " created"
                     : Wrote(*live, r->body) ? " configured"
                                             : " unchanged";
  out << what << said << suffix << "\n";
  return true;
}

// What prune keeps: every object and Secret this apply wrote.
std::vector<ObjectRef> AppliedRefs(const std::vector<const manifest::Object*>& objects,
                                   const std::vector<const manifest::SecretObject*>& secrets) {
  std::vector<ObjectRef> refs;
  for (const manifest::Object* o : objects) {
    const ResourceType* type = FindResourceType(manifest::KindOf(*o));
    const ObjectMeta& meta = manifest::MetaOf(*o);
    if (type != nullptr) refs.push_back({type, type->namespaced ? meta.namespace_ : "", meta.name});
  }
  for (const manifest::SecretObject* s : secrets) {
    refs.push_back({FindResourceType("secrets"), s->metadata.namespace_, s->metadata.name});
  }
  return refs;
}

// The objects gpuctl marked in each type and namespace of `applied`, into `listed`; false after
// saying why on `err`.
bool ListMarked(const api::Client& client, const std::vector<ObjectRef>& applied,
                std::vector<ListedObject>* listed, std::ostream& err) {
  std::vector<ObjectRef> collections;  // type and namespace (names left empty)
  auto add = [&](const ObjectRef& c) {
    if (std::find(collections.begin(), collections.end(), c) == collections.end()) {
      collections.push_back(c);
    }
  };
  for (const ObjectRef& r : applied) {
    if (!r.type->namespaced) {
      add({r.type, "", ""});
      continue;
    }
    for (const ResourceType* t : NamespacedPruneTypes()) add({t, r.ns, ""});
  }
  for (const ObjectRef& c : collections) {
    std::string target = c.type->Collection(c.ns);  // secrets take no labelSelector
    if (!c.type->plain_collection)
      target += "?labelSelector=" + api::PercentEncode(kLastAppliedLabel);
    absl::StatusOr<api::HttpResponse> r = client.Call("GET", target);
    if (r.ok() && r->status == 404) continue;  // a server that keeps no secrets
    if (!r.ok() || r->status != 200) {
      err << "gpuctl: prune: " << c.type->plural << ": "
          << (r.ok() ? StatusMessage(*r) : std::string(r.status().message())) << "\n";
      return false;
    }
    Json list = Json::parse(r->body, nullptr, false);
    if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
      err << "gpuctl: the server's answer is not a list\n";
      return false;
    }
    for (const Json& item : list["items"]) {
      ListedObject o{.ref = {c.type, c.ns, NameOf(item)}};
      const Json meta = item.value("metadata", Json::object());
      if (meta.is_object() && meta.contains("labels") && meta["labels"].is_object()) {
        for (const auto& [k, v] : meta["labels"].items()) {
          if (v.is_string()) o.labels[k] = v.get<std::string>();
        }
      }
      listed->push_back(std::move(o));
    }
  }
  return true;
}

// Deletes what WhatToPrune picks ("job.gpucloud/NAME pruned"); in a dry run only says so.
int Prune(const api::Client& client, const std::vector<ObjectRef>& applied,
          const LabelSelector& selector, DryRun mode, std::ostream& out, std::ostream& err) {
  std::vector<ListedObject> listed;
  if (!ListMarked(client, applied, &listed, err)) return kExitInvalid;
  int code = kExitOk;
  for (const ObjectRef& p : WhatToPrune(applied, listed, selector)) {
    const std::string what =
        p.type->plural == "secrets" ? "secret/" + p.name : Cat(p.type->Qualified(), "/", p.name);
    if (mode == DryRun::kNone &&
        !Send(client, "DELETE", Cat(p.type->Collection(p.ns), "/", p.name), "", err, what)) {
      code = kExitInvalid;
      continue;
    }
    out << what << " pruned" << DryRunSuffix(mode) << "\n";
  }
  return code;
}

// The selector of apply's -l, checked with the prune flags; nullopt after a usage message.
std::optional<LabelSelector> ApplySelector(const ApplyOptions& o, std::ostream& err) {
  if (o.prune && o.selector.empty() && !o.all) {
    err << "gpuctl apply: --prune needs -l SELECTOR or --all (every object gpuctl applied, of "
           "the kinds and namespaces applied)\n";
    return std::nullopt;
  }
  if (o.all && !o.selector.empty()) {
    err << "gpuctl apply: --all and -l together: give one or the other\n";
    return std::nullopt;
  }
  if (o.all && !o.prune) {
    err << "gpuctl apply: --all is for --prune\n";
    return std::nullopt;
  }
  absl::StatusOr<LabelSelector> selector = LabelSelector::Parse(o.selector);
  if (!selector.ok()) {
    err << "gpuctl apply: -l: " << selector.status().message() << "\n";
    return std::nullopt;
  }
  return *selector;
}

}  // namespace

int Apply(const ApplyOptions& o, const std::string& config, std::istream& in, std::ostream& out,
          std::ostream& err) {
  DryRun mode = o.dry_run == "client"   ? DryRun::kClient
                : o.dry_run == "server" ? DryRun::kServer
                                        : DryRun::kNone;
  if (!o.dry_run.empty() && o.dry_run != "none" && mode == DryRun::kNone) {
    err << "gpuctl apply: --dry-run is none, client or server, not \"" << o.dry_run << "\"\n";
    return kExitUsage;
  }
  std::optional<LabelSelector> selector = ApplySelector(o, err);
  if (!selector) return kExitUsage;
  std::optional<FilesAndClient> fc = LoadAndConnect(o.files, config, in, err);
  if (!fc) return kExitInvalid;
  const LoadedManifests& loaded = fc->manifests;
  api::Client* client = &fc->client;
  int code = kExitOk;
  std::vector<const manifest::Object*> objects;  // those the selector takes, as kubectl's -l
  std::vector<const manifest::SecretObject*> secrets;
  // Secrets first, so that a job of the same files finds the ones it names when it starts.
  for (const manifest::SecretManifest& s : loaded.secrets) {
    if (!selector->Matches(s.secret.metadata.labels)) continue;
    secrets.push_back(&s.secret);
    if (!ApplySecret(*client, s.secret, mode, out, err)) code = kExitInvalid;
  }
  for (const manifest::Manifest& m : loaded.manifests) {
    if (!selector->Matches(manifest::MetaOf(m.object).labels)) continue;
    objects.push_back(&m.object);
    if (!ApplyOne(*client, m.object, mode, out, err)) code = kExitInvalid;
  }
  if (!o.prune) return code;
  if (code != kExitOk) {  // as kubectl: an apply that failed prunes nothing
    err << "gpuctl apply: nothing pruned: not every object was applied\n";
    return code;
  }
  return Prune(*client, AppliedRefs(objects, secrets), *selector, mode, out, err);
}

int Diff(const std::vector<std::string>& files, const std::string& config, std::istream& in,
         std::ostream& out, std::ostream& err) {
  constexpr int kDiffError = 2;  // as kubectl diff and diff(1): 0 same, 1 different, >1 error
  std::optional<FilesAndClient> fc = LoadAndConnect(files, config, in, err);
  if (!fc) return kDiffError;
  const LoadedManifests& loaded = fc->manifests;
  api::Client* client = &fc->client;
  bool differ = false;
  for (const manifest::Manifest& m : loaded.manifests) {
    const manifest::Object object = Marked(m.object);  // as apply would write it
    std::string what =
        Cat(ToLower(manifest::KindOf(object)), ".gpucloud/", manifest::MetaOf(object).name);
    std::string path = PathOf(object);
    absl::StatusOr<std::optional<Json>> live =
        path.empty() ? absl::UnimplementedError("the server does not take this kind yet")
                     : ReadLive(*client, path);
    if (!live.ok()) {
      err << "gpuctl: " << what << ": " << live.status().message() << "\n";
      return kDiffError;
    }
    auto yaml = [](const Json& j) { return manifest::JsonToYaml(Written(j).dump()).value_or(""); };
    std::string from = live->has_value() ? yaml(**live) : "";
    std::string diff =
        UnifiedDiff(from, yaml(Json::parse(manifest::ToJson(object))),
                    live->has_value() ? "live/" + what : "/dev/null", "file/" + what);
    out << diff;
    differ = differ || !diff.empty();
  }
  for (const manifest::SecretManifest& s : loaded.secrets) {  // sizes and digests, no value
    absl::StatusOr<std::string> diff = DiffSecret(*client, s.secret);
    if (!diff.ok()) {
      err << "gpuctl: secret/" << s.secret.metadata.name << ": " << diff.status().message() << "\n";
      return kDiffError;
    }
    out << *diff;
    differ = differ || !diff->empty();
  }
  return differ ? kExitInvalid : kExitOk;
}

struct ObjectCommands::Flags {
  CLI::App *get = nullptr, *del = nullptr, *apply = nullptr, *diff = nullptr;
  GetOptions get_options{.ns = std::string(kDefaultNamespace)};
  DeleteOptions delete_options{.ns = std::string(kDefaultNamespace)};
  bool watch = false;
  int watch_timeout = 0;
  ApplyOptions apply_options;
  std::vector<std::string> diff_files;
};

ObjectCommands::ObjectCommands(CLI::App& app) : flags_(std::make_shared<Flags>()) {
  Flags& f = *flags_;
  GetOptions& g = f.get_options;
  f.get = app.add_subcommand(
      "get",
      "List or show objects: get TYPE[,TYPE...] [NAME...] | TYPE/NAME... "
      "(jobs, nodes, queues, nodepools, runtimeclasses, secrets, users, groups, tokens, "
      "policies)");
  f.get->add_option("args", g.args, "TYPE[,TYPE...] [NAME...] or TYPE/NAME...")->required();
  f.get->add_option("-n,--namespace", g.ns, "Namespace (jobs)");
  f.get->add_flag("-A,--all-namespaces", g.all_namespaces, "jobs of every namespace (admins)");
  f.get->add_option("-l,--selector", g.selector, "label selector: team=a,tier!=b,gpu,!spot");
  f.get->add_option("-o,--output", g.output,
                    "table, wide, name, json, yaml or jsonpath=TEMPLATE ({.metadata.name}, "
                    "{range .items[*]}...{end})");
  f.get->add_flag("-w,--watch", f.watch, "after the list, print every change as it happens");
  f.get->add_option("--watch-timeout", f.watch_timeout, "stop watching after this many seconds")
      ->check(CLI::Range(1, 86400));
  DeleteOptions& d = f.delete_options;
  f.del = app.add_subcommand(
      "delete", "Delete objects: delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | -f FILE");
  f.del->add_option("args", d.args, "TYPE NAME... or TYPE/NAME...");
  f.del->add_option("-f,--filename", d.files, "the objects of these manifests");
  f.del->add_option("-n,--namespace", d.ns, "Namespace (jobs)");
  f.del->add_option("-l,--selector", d.selector, "every object of TYPE with these labels");
  ApplyOptions& a = f.apply_options;
  f.apply = app.add_subcommand("apply", "Create or update objects on the server");
  f.apply->add_option("-f,--filename", a.files, "Manifest file, directory, or - for stdin")
      ->required();
  f.apply
      ->add_option("--dry-run", a.dry_run,
                   "none; client (say what would change, send nothing); server (the server "
                   "checks the request and stores nothing)")
      ->check(CLI::IsMember({"none", "client", "server"}));
  f.apply->add_option("-l,--selector", a.selector,
                      "only the files' objects with these labels (and prune among them)");
  f.apply->add_flag("--prune", a.prune,
                    "then delete the objects gpuctl applied before, of the kinds and namespaces "
                    "applied, that match -l (or --all) and are not in the files");
  f.apply->add_flag("--all", a.all, "with --prune: prune without a selector");
  f.diff = app.add_subcommand(
      "diff", "Show how the server's objects differ from the files' (exit 1 when they do)");
  f.diff->add_option("-f,--filename", f.diff_files, "Manifest file, directory, or - for stdin")
      ->required();
}

bool ObjectCommands::parsed() const {
  return flags_->get->parsed() || flags_->del->parsed() || flags_->apply->parsed() ||
         flags_->diff->parsed();
}

int ObjectCommands::Run(const std::string& config, std::istream& in, std::ostream& out,
                        std::ostream& err) {
  Flags& f = *flags_;
  if (f.apply->parsed()) return Apply(f.apply_options, config, in, out, err);
  if (f.diff->parsed()) return Diff(f.diff_files, config, in, out, err);
  if (f.del->parsed()) return Delete(f.delete_options, config, in, out, err);
  GetOptions& g = f.get_options;
  g.watch_seconds = f.watch ? f.watch_timeout : -1;
  if (!IsIamResource(g.args[0])) return Get(g, config, out, err);
  if (f.watch || g.args.size() > 2 || !g.selector.empty()) {
    err << "gpuctl get " << g.args[0] << ": -w, -l and several NAMEs are for jobs, nodes, "
        << "queues and nodepools\n";
    return kExitUsage;
  }
  if (g.args.size() > 1 && !NamesAreLabels({{"NAME", g.args[1]}}, err)) return kExitUsage;
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return kExitInvalid;
  return GetIamObjects(ClientCall(*client), g.args[0], g.args.size() > 1 ? g.args[1] : "", g.output,
                       out, err);
}

}  // namespace gpucloud::cli
