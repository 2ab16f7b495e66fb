// Decoder of IAM-style policy documents: the gpucloud/v1 Policy kind (the document in `spec`) and
// a bare document ({"Version": ..., "Statement": ...}) for `gpuctl policy simulate`; and their
// printer. Validation is against core/policy.h's catalog, so whatever parses also evaluates.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "core/policy.h"
#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace internal {
namespace {

// Bounds, so that one policy cannot make every decision slow (docs/policies.md, "Limits").
constexpr size_t kMaxStatements = 100;
constexpr size_t kMaxEntries = 100;  // patterns per Action/Resource, values per condition key

// A string or a non-empty list of strings (Action, Resource, condition values), each item with
// its location. Condition values may also be written as numbers or booleans (any scalar).
std::optional<std::vector<std::pair<std::string, Field>>> ReadStringOrList(Context& ctx,
                                                                           const Field& f,
                                                                           bool any_scalar) {
  std::vector<Field> items;
  if (f.value.IsSequence()) {
    std::optional<std::vector<Field>> list = ReadList(ctx.sink, f);
    if (!list) return std::nullopt;
    items = std::move(*list);
    if (items.empty()) {
      ctx.sink.Error(f.mark, f.path, "must not be empty");
      return std::nullopt;
    }
    if (items.size() > kMaxEntries) {
      ctx.sink.Error(f.mark, f.path,
                     Cat("has ", items.size(), " entries (the limit is ", kMaxEntries, ")"));
      return std::nullopt;
    }
  } else {
    items.push_back(f);
  }
  std::vector<std::pair<std::string, Field>> out;
  bool ok = true;
  for (const Field& item : items) {
    std::optional<std::string> s;
    if (any_scalar && item.value.IsScalar() && ClassifyScalar(item.value) != ScalarKind::kNull &&
        ClassifyScalar(item.value) != ScalarKind::kString) {
      s = item.value.Scalar();
    } else {
      s = ReadString(ctx.sink, item);
    }
    ok = s.has_value() && ok;
    if (s) out.emplace_back(std::move(*s), item);
  }
  if (!ok) return std::nullopt;
  return out;
}

bool DecodeActions(Context& ctx, const Field& f, std::vector<std::string>* out) {
  auto items = ReadStringOrList(ctx, f, /*any_scalar=*/false);
  if (!items) return false;
  bool ok = true;
  for (auto& [text, at] : *items) {
    if (MatchPolicyActions(text).empty()) {
      ctx.sink.Error(at.mark, at.path,
                     Cat("unknown action \"", Excerpt(text),
                         "\": an action is <resource>:<Verb> such as jobs:Create, and a wildcard "
                         "must match at least one (docs/policies.md lists them)"));
      ok = false;
    } else {
      out->push_back(std::move(text));
    }
  }
  return ok;
}

bool DecodeResources(Context& ctx, const Field& f, std::vector<std::string>* out) {
  auto items = ReadStringOrList(ctx, f, /*any_scalar=*/false);
  if (!items) return false;
  bool ok = true;
  for (auto& [text, at] : *items) {
    if (absl::Status s = ValidateResourcePattern(text); !s.ok()) {
      ctx.sink.Error(at.mark, at.path, std::string(s.message()));
      ok = false;
    } else {
      out->push_back(std::move(text));
    }
  }
  return ok;
}

// One `"Operator": {"key": values}` entry of a Condition block.
bool DecodeConditionOperator(Context& ctx, const std::string& name, const Field& f,
                             std::vector<Condition>* out) {
  absl::StatusOr<OperatorSpelling> spelling = ParseConditionOperator(name);
  if (!spelling.ok()) {
    ctx.sink.Error(f.mark, f.path, std::string(spelling.status().message()));
    return false;
  }
  MapReader keys(ctx.sink, f);
  if (!keys.valid()) return false;
  bool ok = true;
  for (const std::string& key_name : keys.Keys()) {
    std::optional<Field> v = keys.Require(key_name);  // a key with no value is an error
    if (!v) {
      ok = false;
      continue;
    }
    const ConditionKeyInfo* key = FindConditionKey(key_name);
    if (key == nullptr) {
      std::vector<std::string> known;
      for (const ConditionKeyInfo& k : ConditionKeys()) known.emplace_back(k.name);
      ctx.sink.Error(v->mark, v->path,
                     Cat("unknown condition key \"", Excerpt(key_name),
                         "\" (known: ", Join(known, ", "), ")"));
      ok = false;
      continue;
    }
    Condition c{spelling->op, spelling->if_exists, spelling->qualifier, std::string(key->name)};
    std::optional<ConditionKeyType> type = OperatorKeyType(c.op);
    if (type && *type != key->type) {
      ctx.sink.Error(v->mark, v->path,
                     Cat(key->name, " is a ", ConditionKeyTypeName(key->type), " key; ", name,
                         " tests ", ConditionKeyTypeName(*type), " keys"));
      ok = false;
      continue;
    }
    if (c.op != ConditionOperator::kNull &&
        key->multi_valued != (c.qualifier != SetQualifier::kNone)) {
      ctx.sink.Error(v->mark, v->path,
                     key->multi_valued
                         ? Cat(key->name, " is multi-valued: write ForAnyValue:", name,
                               " or ForAllValues:", name)
                         : Cat(key->name, " is single-valued: drop ForAnyValue:/ForAllValues:"));
      ok = false;
      continue;
    }
    auto values = ReadStringOrList(ctx, *v, /*any_scalar=*/true);
    if (!values) {
      ok = false;
      continue;
    }
    for (auto& [text, at] : *values) {
      absl::Status s = c.op == ConditionOperator::kNull ? ParsePolicyBool(text).status()
                                                        : ValidateConditionValue(key->type, text);
      if (!s.ok()) {
        ctx.sink.Error(at.mark, at.path, std::string(s.message()));
        ok = false;
      }
      c.values.push_back(std::move(text));
    }
    out->push_back(std::move(c));
  }
  keys.Finish();
  return ok;
}

bool DecodeConditions(Context& ctx, const Field& f, std::vector<Condition>* out) {
  MapReader ops(ctx.sink, f);
  if (!ops.valid()) return false;
  bool ok = true;
  for (const std::string& name : ops.Keys()) {
    std::optional<Field> v = ops.Require(name);
    ok = v && DecodeConditionOperator(ctx, name, *v, out) && ok;
  }
  ops.Finish();
  return ok;
}

// Exactly one of `a` and `b` (Action/NotAction, Resource/NotResource).
std::optional<std::pair<Field, bool>> TakeOneOf(Context& ctx, MapReader& m, std::string_view a,
                                                std::string_view b) {
  std::optional<Field> fa = m.Take(a);
  std::optional<Field> fb = m.Take(b);
  if (fa && fb) {
    ctx.sink.Error(fb->mark, fb->path, Cat("a statement has ", a, " or ", b, ", not both"));
    return std::nullopt;
  }
  if (!fa && !fb) {
    ctx.sink.Error(m.mark(), m.path(), Cat("a statement needs ", a, " or ", b));
    return std::nullopt;
  }
  return fa ? std::make_pair(*fa, false) : std::make_pair(*fb, true);
}

bool DecodeStatement(Context& ctx, MapReader& m, Statement* st) {
  bool ok = true;
  if (std::optional<Field> sid = m.Take("Sid")) {
    std::optional<std::string> s = ReadString(ctx.sink, *sid);
    if (s &&
        (s->size() > 128 || s->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                                 "qrstuvwxyz0123456789-_") != std::string::npos)) {
      ctx.sink.Error(
          sid->mark, sid->path,
          Cat("must be at most 128 letters, digits, - and _, got \"", Excerpt(*s), "\""));
      s.reset();
    }
    ok = s.has_value();
    if (s) st->sid = *s;
  }
  if (std::optional<Field> e = m.Require("Effect")) {
    std::optional<std::string> s = ReadOneOf(ctx, *e, {"Allow", "Deny"});
    ok = s.has_value() && ok;
    if (s) st->effect = *s == "Allow" ? PolicyEffect::kAllow : PolicyEffect::kDeny;
  } else {
    ok = false;
  }
  if (auto action = TakeOneOf(ctx, m, "Action", "NotAction")) {
    st->not_action = action->second;
    ok = DecodeActions(ctx, action->first, &st->actions) && ok;
  } else {
    ok = false;
  }
  if (auto resource = TakeOneOf(ctx, m, "Resource", "NotResource")) {
    st->not_resource = resource->second;
    ok = DecodeResources(ctx, resource->first, &st->resources) && ok;
  } else {
    ok = false;
  }
  if (std::optional<Field> c = m.Take("Condition")) {
    ok = DecodeConditions(ctx, *c, &st->conditions) && ok;
  }
  return ok;
}

}  // namespace

bool DecodePolicyDocument(Context& ctx, MapReader& m, PolicyDocument* doc) {
  bool ok = true;
  if (std::optional<Field> v = m.Take("Version")) {
    std::optional<std::string> s = ReadOneOf(ctx, *v, {kPolicyVersion});
    ok = s.has_value();
  }
  m.Ignore("Id");  // AWS's optional document identifier; gpucloud names policies by metadata
  std::optional<Field> st = m.Require("Statement");
  if (!st) return false;
  std::vector<Field> items;
  if (st->value.IsSequence()) {
    std::optional<std::vector<Field>> list = ReadList(ctx.sink, *st);
    if (!list) return false;
    items = std::move(*list);
  } else {
    items.push_back(*st);
  }
  if (items.empty() || items.size() > kMaxStatements) {
    ctx.sink.Error(st->mark, st->path,
                   Cat("must hold 1 to ", kMaxStatements, " statements, got ", items.size()));
    return false;
  }
  for (const Field& item : items) {
    MapReader sm(ctx.sink, item);
    if (!sm.valid()) {
      ok = false;
      continue;
    }
    Statement statement;
    bool good = DecodeStatement(ctx, sm, &statement);
    sm.Finish();
    if (good && !statement.sid.empty()) {
      for (const Statement& earlier : doc->statements) {
        if (earlier.sid == statement.sid) {
          ctx.sink.Error(item.mark, ChildPath(item.path, "Sid"),
                         Cat("duplicate Sid \"", statement.sid, "\""));
          good = false;
        }
      }
    }
    ok = good && ok;
    if (good) doc->statements.push_back(std::move(statement));
  }
  return ok;
}

std::optional<Policy> DecodePolicy(Context& ctx, MapReader& doc) {
  Policy policy;
  bool ok = DecodeMetadata(ctx, doc, &policy.metadata, /*namespaced=*/false);
  std::optional<Field> spec = doc.Require("spec");
  if (!spec) return std::nullopt;
  MapReader s(ctx.sink, *spec);
  if (!s.valid()) return std::nullopt;
  ok = DecodePolicyDocument(ctx, s, &policy.spec) && ok;
  s.Finish();
  if (!ok) return std::nullopt;
  return policy;
}

}  // namespace internal

namespace {

using Json = nlohmann::ordered_json;

Json StringOrList(const std::vector<std::string>& items) {
  if (items.size() == 1) return items[0];
  return Json(items);
}

}  // namespace

PolicyDocumentResult ParsePolicyDocument(std::string_view text, std::string_view file) {
  PolicyDocumentResult result;
  std::string file_name(file);
  std::vector<internal::LoadedDocument> docs =
      internal::LoadDocuments(text, file_name, &result.errors);
  if (!result.errors.empty()) return result;
  if (docs.size() != 1) {
    result.errors.push_back(Diagnostic{
        .file = file_name,
        .message = Cat("must hold one policy document, got ", docs.size(), " documents")});
    return result;
  }
  Sink sink(file_name, 1, 1, docs[0].first_line, &result.errors, &result.warnings);
  const GpuCatalog& catalog = GpuCatalog::Default();
  internal::Context ctx{sink, catalog};
  Field root{docs[0].node, docs[0].node.Mark(), ""};
  MapReader m(sink, root);
  if (!m.valid()) return result;
  Policy policy;
  if (m.Has("apiVersion") || m.Has("kind")) {
    std::optional<Field> api = m.Require("apiVersion");
    std::optional<Field> kind = m.Require("kind");
    if (api) internal::ReadOneOf(ctx, *api, {kApiVersion});
    if (kind) internal::ReadOneOf(ctx, *kind, {"Policy"});
    if (sink.error_count() > 0) return result;
    std::optional<Policy> p = internal::DecodePolicy(ctx, m);
    m.Ignore("status");
    if (p) policy = std::move(*p);
  } else {
    internal::DecodePolicyDocument(ctx, m, &policy.spec);
  }
  m.Finish();
  if (result.errors.empty()) {
    result.name = policy.metadata.name;
    result.document = std::move(policy.spec);
  }
  return result;
}

std::string PolicyToJson(const Policy& policy) {
  Json statements = Json::array();
  for (const Statement& s : policy.spec.statements) {
    Json j = Json::object();
    if (!s.sid.empty()) j["Sid"] = s.sid;
    j["Effect"] = s.effect == PolicyEffect::kAllow ? "Allow" : "Deny";
    j[s.not_action ? "NotAction" : "Action"] = StringOrList(s.actions);
    j[s.not_resource ? "NotResource" : "Resource"] = StringOrList(s.resources);
    if (!s.conditions.empty()) {
      Json cond = Json::object();
      for (const Condition& c : s.conditions) {
        cond[ConditionOperatorName(c)][c.key] = StringOrList(c.values);
      }
      j["Condition"] = std::move(cond);
    }
    statements.push_back(std::move(j));
  }
  Json metadata = Json::object();
  metadata["name"] = policy.metadata.name;
  if (!policy.metadata.labels.empty()) metadata["labels"] = policy.metadata.labels;
  if (!policy.metadata.annotations.empty()) {
    metadata["annotations"] = policy.metadata.annotations;
  }
  Json out = Json::object();
  out["apiVersion"] = kApiVersion;
  out["kind"] = "Policy";
  out["metadata"] = std::move(metadata);
  out["spec"] = Json{{"Version", policy.spec.version}, {"Statement", std::move(statements)}};
  return out.dump(2) + "\n";
}

}  // namespace gpucloud::manifest
