#include "server/openapi.h"

#include <algorithm>
#include <optional>

#include "core/text.h"
#include "manifest/schema.h"
#include "server/credentials.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

using manifest::FieldSchema;
using manifest::FieldType;
using manifest::KindSchema;

constexpr std::string_view kApiPrefix = "/apis/gpucloud/v1";
constexpr std::string_view kV3Path = "/openapi/v3/apis/gpucloud/v1";

// Which document a schema goes into: their references and a few keywords differ.
enum class Flavour { kV2, kV3 };

std::string DefinitionName(std::string_view kind) { return Cat("io.gpucloud.v1.", kind); }

std::string Ref(Flavour v, std::string_view kind) {
  return Cat(v == Flavour::kV2 ? "#/definitions/" : "#/components/schemas/", DefinitionName(kind));
}

Json Gvk(std::string_view kind) {
  return Json{{"group", manifest::kSchemaGroup}, {"kind", kind}, {"version", "v1"}};
}

// A scalar (or a quantity or duration) of `type`.
Json ScalarSchema(FieldType type, Flavour v) {
  switch (type) {
    case FieldType::kInteger:
      return Json{{"type", "integer"}, {"format", "int64"}};
    case FieldType::kNumber:
      return Json{{"type", "number"}, {"format", "double"}};
    case FieldType::kBoolean:
      return Json{{"type", "boolean"}};
    case FieldType::kQuantity:
    case FieldType::kDuration: {
      std::string_view name = type == FieldType::kQuantity ? "Quantity" : "Duration";
      // v2 as Kubernetes writes its Quantity: a string (which kubectl's validation reads as
      // "any scalar"); v3 a reference to the component, which says string or number.
      if (v == Flavour::kV2) {
        return Json{{"type", "string"},
                    {"format", type == FieldType::kQuantity ? "quantity" : "duration"}};
      }
      return Json{{"allOf", Json::array({Json{{"$ref", Ref(v, name)}}})}};
    }
    default:
      return Json{{"type", "string"}};
  }
}

Json FieldSchemaJson(const FieldSchema& f, Flavour v);

// The object whose keys are `f.fields` (f itself, or its elements).
Json ObjectSchema(const FieldSchema& f, Flavour v) {
  Json j = Json::object();
  j["type"] = "object";
  if (!f.fields.empty()) {
    Json props = Json::object();
    Json required = Json::array();
    for (const FieldSchema& c : f.fields) {
      props[c.name] = FieldSchemaJson(c, v);
      if (c.required) required.push_back(c.name);
    }
    j["properties"] = std::move(props);
    if (!required.empty()) j["required"] = std::move(required);
  }
  // Keys not listed are taken too. (No additionalProperties: kubectl explain reads one that is
  // an object as a map's values, and an empty one as no schema.)
  if (f.open && v == Flavour::kV3) j["x-kubernetes-preserve-unknown-fields"] = true;
  return j;
}

// The elements of an array or the values of a map.
Json ElementSchema(const FieldSchema& f, Flavour v) {
  if (f.item_type == FieldType::kObject) return ObjectSchema(f, v);
  if (f.item_type == FieldType::kArray) {
    return Json{{"type", "array"}, {"items", Json{{"type", "string"}}}};
  }
  Json j = ScalarSchema(f.item_type, v);
  if (!f.enum_values.empty()) j["enum"] = f.enum_values;
  return j;
}

Json FieldSchemaJson(const FieldSchema& f, Flavour v) {
  Json j;
  switch (f.type) {
    case FieldType::kObject:
      j = ObjectSchema(f, v);
      break;
    case FieldType::kArray:
      j = Json{{"type", "array"}, {"items", ElementSchema(f, v)}};
      break;
    case FieldType::kMap:
      j = Json{{"type", "object"}, {"additionalProperties", ElementSchema(f, v)}};
      break;
    default:
      j = ScalarSchema(f.type, v);
      if (!f.enum_values.empty()) j["enum"] = f.enum_values;
  }
  // Another shape accepted too (gpu: 4, Action: jobs:Get): no type, so that both validate.
  if (f.shorthand) j.erase("type");
  j["description"] =
      f.shorthand_note.empty() ? f.description : Cat(f.description, " (", f.shorthand_note, ")");
  return j;
}

Json KindDefinition(const KindSchema& k, Flavour v) {
  Json j = FieldSchemaJson(k.object, v);
  j["x-kubernetes-group-version-kind"] = Json::array({Gvk(k.kind)});
  return j;
}

// KIND + "List", as a list answers it.
Json ListDefinition(const KindSchema& k, Flavour v) {
  Json string{{"type", "string"}};
  Json meta{{"type", "object"},
            {"description", "The list's revision, and where the next page starts."},
            {"properties",
             {{"resourceVersion", string},
              {"continue", string},
              {"remainingItemCount", Json{{"type", "integer"}}}}}};
  return Json{{"type", "object"},
              {"description", Cat("A list of ", k.kind, " objects.")},
              {"required", Json::array({"items"})},
              {"properties",
               {{"apiVersion", string},
                {"kind", string},
                {"metadata", meta},
                {"items", Json{{"type", "array"}, {"items", Json{{"$ref", Ref(v, k.kind)}}}}}}},
              {"x-kubernetes-group-version-kind", Json::array({Gvk(Cat(k.kind, "List"))})}};
}

Json QueryParameter(std::string_view name, Flavour v) {
  Json j{{"name", name}, {"in", "query"}, {"uniqueItems", true}};
  Json type = name == "limit" || name == "timeoutSeconds"        ? Json("integer")
              : name == "watch" || name == "allowWatchBookmarks" ? Json("boolean")
                                                                 : Json("string");
  if (v == Flavour::kV2) {
    j["type"] = type;
  } else {
    j["schema"] = Json{{"type", type}};
  }
  if (name == "fieldValidation") {
    j["description"] =
        "How the server treats unknown or duplicate fields: Strict, Warn or Ignore. The server "
        "refuses unknown fields whichever is given.";
  }
  return j;
}

// One operation of a path: `action` as Kubernetes names it (get, list, post, put, patch,
// delete), its query parameters, the body it takes (a kind's name, "patch", or none) and what
// it answers (a definition's name, or none).
struct Operation {
  std::string_view method;
  std::string_view action;
  std::span<const std::string_view> query;
  std::string body;
  std::string answer;
};

Json SchemaRefOrObject(const std::string& name, Flavour v) {
  if (name == "patch" || name.empty()) return Json{{"type", "object"}};
  return Json{{"$ref", Cat(v == Flavour::kV2 ? "#/definitions/" : "#/components/schemas/",
                           DefinitionName(name))}};
}

Json OperationJson(const Operation& op, const OpenApiResource& r, Flavour v) {
  Json params = Json::array();
  for (std::string_view q : op.query) params.push_back(QueryParameter(q, v));
  Json j{{"description", Cat(op.action, " ", r.kind, r.namespaced ? " (namespaced)" : "")},
         {"operationId", Cat(op.action, "GpucloudV1", r.namespaced ? "Namespaced" : "", r.kind)},
         {"tags", Json::array({"gpucloud_v1"})}};
  const std::string type =
      op.body == "patch" ? "application/merge-patch+json" : std::string("application/json");
  if (!op.body.empty() && v == Flavour::kV2) {
    params.push_back(Json{{"name", "body"},
                          {"in", "body"},
                          {"required", true},
                          {"schema", SchemaRefOrObject(op.body, v)}});
    j["consumes"] = Json::array({type, "application/yaml"});
  } else if (!op.body.empty()) {
    Json content{{type, {{"schema", SchemaRefOrObject(op.body, v)}}}};
    if (op.body != "patch")
      content["application/yaml"] = {{"schema", SchemaRefOrObject(op.body, v)}};
    j["requestBody"] = Json{{"required", true}, {"content", std::move(content)}};
  }
  if (!params.empty()) j["parameters"] = std::move(params);
  Json ok{{"description", "OK"}};
  if (v == Flavour::kV2) {
    ok["schema"] = SchemaRefOrObject(op.answer, v);
    j["produces"] = Json::array({"application/json"});
  } else {
    ok["content"] = {{"application/json", {{"schema", SchemaRefOrObject(op.answer, v)}}}};
  }
  j["responses"] = Json{{op.method == "post" ? "201" : "200", ok},
                        {"401", Json{{"description", "Unauthorized"}}}};
  j["x-kubernetes-action"] = op.action;
  j["x-kubernetes-group-version-kind"] = Gvk(r.kind);
  return j;
}

bool Has(const OpenApiResource& r, std::string_view verb) {
  return std::find(r.verbs.begin(), r.verbs.end(), verb) != r.verbs.end();
}

Json PathParameters(bool item, const OpenApiResource& r, Flavour v) {
  Json params = Json::array();
  auto param = [&](std::string_view name, std::string_view what) {
    Json p{{"name", name},
           {"in", "path"},
           {"required", true},
           {"description", what},
           {"uniqueItems", true}};
    if (v == Flavour::kV2) {
      p["type"] = "string";
    } else {
      p["schema"] = Json{{"type", "string"}};
    }
    params.push_back(std::move(p));
  };
  if (item) param("name", Cat("name of the ", r.kind));
  if (r.namespaced)
    param("namespace", "object name and auth scope, such as for teams and projects");
  return params;
}

// The collection's and the item's paths of one resource.
void AddPaths(const OpenApiResource& r, Flavour v, Json* paths) {
  const std::string base = r.namespaced ? Cat(kApiPrefix, "/namespaces/{namespace}/", r.name)
                                        : Cat(kApiPrefix, "/", r.name);
  // Only the generic object handlers (the resources that serve PATCH) take the write options.
  const bool generic = Has(r, "patch");
  std::span<const std::string_view> write =
      generic ? std::span<const std::string_view>(kWriteQuery) : kNoQuery;
  const std::string kind(r.kind), list = Cat(r.kind, "List");
  Json collection{{"parameters", PathParameters(false, r, v)}};
  if (Has(r, "list")) {
    collection["get"] = OperationJson({"get", "list", kCollectionQuery, "", list}, r, v);
  }
  if (Has(r, "create"))
    collection["post"] = OperationJson({"post", "post", write, kind, kind}, r, v);
  Json item{{"parameters", PathParameters(true, r, v)}};
  if (Has(r, "get")) item["get"] = OperationJson({"get", "get", kNoQuery, "", kind}, r, v);
  if (Has(r, "update")) item["put"] = OperationJson({"put", "put", write, kind, kind}, r, v);
  if (generic) item["patch"] = OperationJson({"patch", "patch", write, "patch", kind}, r, v);
  if (Has(r, "delete")) {
    static constexpr std::string_view kDeleteQuery[] = {"dryRun", "resourceVersion"};
    item["delete"] = OperationJson(
        {"delete", "delete", generic ? std::span<const std::string_view>(kDeleteQuery) : kNoQuery,
         "", ""},
        r, v);
  }
  if (collection.size() > 1) (*paths)[base] = std::move(collection);
  if (item.size() > 1) (*paths)[Cat(base, "/{name}")] = std::move(item);
}

// The documents' shared body: paths and the kinds' schemas (definitions or components).
std::pair<Json, Json> PathsAndSchemas(std::span<const OpenApiResource> resources, Flavour v) {
  Json paths = Json::object(), schemas = Json::object();
  for (const OpenApiResource& r : resources) {
    const KindSchema* k = manifest::FindKindSchema(r.kind);
    if (k == nullptr || k->kind != r.kind) continue;
    AddPaths(r, v, &paths);
    schemas[DefinitionName(k->kind)] = KindDefinition(*k, v);
    schemas[DefinitionName(Cat(k->kind, "List"))] = ListDefinition(*k, v);
  }
  if (v == Flavour::kV3) {
    schemas[DefinitionName("Quantity")] =
        Json{{"description", "A number or a string with a unit: 4, 0.25, \"500m\", \"10Gi\"."},
             {"oneOf", Json::array({Json{{"type", "string"}}, Json{{"type", "number"}}})}};
    schemas[DefinitionName("Duration")] =
        Json{{"description", "Integer seconds or <n>d, <n>h, <n>m, <n>s in sequence: \"1h30m\"."},
             {"oneOf", Json::array({Json{{"type", "string"}}, Json{{"type", "integer"}}})}};
  }
  return {std::move(paths), std::move(schemas)};
}

Json Info() { return Json{{"title", "gpucloud"}, {"version", "v1"}}; }

Json BearerToken() {
  return Json{{"BearerToken",
               {{"type", "apiKey"},
                {"name", "authorization"},
                {"in", "header"},
                {"description", "Bearer token authentication"}}}};
}

// The three documents as answered, built once.
struct Documents {
  std::string v2, v3, index;
};

const Documents& CachedDocuments() {
  static const Documents* const docs = [] {
    std::vector<OpenApiResource> resources = DiscoveredResources();
    auto* d = new Documents;
    d->v2 = OpenApiV2(resources).dump(2) + "\n";
    d->v3 = OpenApiV3(resources).dump(2) + "\n";
    d->index = OpenApiV3Index(Sha256Hex(d->v3)).dump(2) + "\n";
    return d;
  }();
  return *docs;
}

}  // namespace

Json OpenApiV2(std::span<const OpenApiResource> resources) {
  auto [paths, definitions] = PathsAndSchemas(resources, Flavour::kV2);
  return Json{{"swagger", "2.0"},
              {"info", Info()},
              {"paths", std::move(paths)},
              {"definitions", std::move(definitions)},
              {"securityDefinitions", BearerToken()},
              {"security", Json::array({Json{{"BearerToken", Json::array()}}})}};
}

Json OpenApiV3(std::span<const OpenApiResource> resources) {
  auto [paths, schemas] = PathsAndSchemas(resources, Flavour::kV3);
  return Json{{"openapi", "3.0.0"},
              {"info", Info()},
              {"paths", std::move(paths)},
              {"components", {{"schemas", std::move(schemas)}, {"securitySchemes", BearerToken()}}},
              {"security", Json::array({Json{{"BearerToken", Json::array()}}})}};
}

Json OpenApiV3Index(std::string_view hash) {
  return Json{
      {"paths", {{"apis/gpucloud/v1", {{"serverRelativeURL", Cat(kV3Path, "?hash=", hash)}}}}}};
}

Response ServeOpenApi(const Request& r) {
  std::string_view path = r.path;
  if (path.size() > 1 && path.ends_with('/')) path.remove_suffix(1);
  const Documents& docs = CachedDocuments();
  const std::string* body = path == "/openapi/v2"   ? &docs.v2
                            : path == "/openapi/v3" ? &docs.index
                            : path == kV3Path       ? &docs.v3
                                                    : nullptr;
  if (body == nullptr) return Status(404, "NotFound", Cat("no such path ", r.path));
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  static constexpr std::string_view kWithHash[] = {"timeout", "hash"};
  static constexpr std::string_view kTimeout[] = {"timeout"};
  std::span<const std::string_view> allowed =
      path == kV3Path ? std::span<const std::string_view>(kWithHash) : kTimeout;
  if (std::optional<Response> bad = RefuseQuery(r, allowed)) return *bad;
  Response res{200, *body};
  res.authorization = {"discovery", std::string(path), "allow",
                       "discovery is readable by every authenticated identity"};
  return res;
}

}  // namespace gpucloud::server
