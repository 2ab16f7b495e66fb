#include "cli/secret_commands.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/escaping.h"
#include "cli/gpuctl.h"
#include "testing/temp_dir.h"

namespace gpucloud::cli {
namespace {

using nlohmann::json;

std::string Unbase64(const nlohmann::ordered_json& value) {
  std::string plain;
  EXPECT_TRUE(absl::Base64Unescape(value.get<std::string>(), &plain));
  return plain;
}

// Files by path, for GenericSecretBody.
ReadFileFn Files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> absl::StatusOr<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError("cannot read " + path + ": no such file");
    return it->second;
  };
}

TEST(DockerConfigJson, IsByteForByteWhatKubectlWrites) {
  // The .dockerconfigjson of `kubectl create secret docker-registry private-reg-cred
  // --docker-username=docker_user --docker-password=dock_password
  // --docker-server=myprivateregistry.com:5000 --docker-email=dock_user@myprivateregistry.com
  // --dry-run=client -o yaml`, as kubectl printed it.
  EXPECT_EQ(
      absl::Base64Escape(DockerConfigJson("myprivateregistry.com:5000", "docker_user",
                                          "dock_password", "dock_user@myprivateregistry.com")),
      "eyJhdXRocyI6eyJteXByaXZhdGVyZWdpc3RyeS5jb206NTAwMCI6eyJ1c2VybmFtZSI6ImRvY2tlcl91c2"
      "VyIiwicGFzc3dvcmQiOiJkb2NrX3Bhc3N3b3JkIiwiZW1haWwiOiJkb2NrX3VzZXJAbXlwcml2YXRlcmVn"
      "aXN0cnkuY29tIiwiYXV0aCI6IlpHOWphMlZ5WDNWelpYSTZaRzlqYTE5d1lYTnpkMjl5WkE9PSJ9fX0=");
  // No email: left out (omitempty), as Go leaves it.
  EXPECT_EQ(DockerConfigJson("127.0.0.1:5000", "U", "P", ""),
            R"({"auths":{"127.0.0.1:5000":{"username":"U","password":"P","auth":"VTpQ"}}})");
}

TEST(DockerConfigJson, EscapesAsGoDoes) {
  // json.Marshal escapes <, > and & (HTML), U+2028 and U+2029, controls as \uXXXX but for
  // \b \f \n \r \t, and writes an invalid UTF-8 byte as \ufffd; other UTF-8 stays as it is.
  const std::string password = "a<b>&\"\\\x01\t\xE2\x80\xA8\xC3\xA9\xFF";
  const std::string json = DockerConfigJson("r:1", "u", password, "");
  EXPECT_EQ(json,
            "{\"auths\":{\"r:1\":{\"username\":\"u\",\"password\":"
            "\"a\\u003cb\\u003e\\u0026\\\"\\\\\\u0001\\t\\u2028\xC3\xA9\\ufffd\",\"auth\":\"" +
                absl::Base64Escape("u:" + password) + "\"}}}");
  // And it is JSON that reads back to the same password (but for the invalid byte).
  EXPECT_EQ(json::parse(json)["auths"]["r:1"]["password"],
            "a<b>&\"\\\x01\t\xE2\x80\xA8\xC3\xA9\xEF\xBF\xBD");
}

TEST(DockerRegistrySecretBody, IsAPullSecret) {
  DockerRegistryOptions o{.name = "regcred",
                          .ns = "team-a",
                          .server = "127.0.0.1:5000",
                          .username = "U",
                          .password = "P"};
  absl::StatusOr<nlohmann::ordered_json> body = DockerRegistrySecretBody(o);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)["apiVersion"], "gpucloud/v1");
  EXPECT_EQ((*body)["kind"], "Secret");
  EXPECT_EQ((*body)["metadata"], json({{"name", "regcred"}, {"namespace", "team-a"}}));
  EXPECT_EQ((*body)["type"], "kubernetes.io/dockerconfigjson");
  ASSERT_EQ((*body)["data"].size(), 1u);
  EXPECT_EQ(Unbase64((*body)["data"][".dockerconfigjson"]),
            R"({"auths":{"127.0.0.1:5000":{"username":"U","password":"P","auth":"VTpQ"}}})");
  o.password = "";
  EXPECT_EQ(DockerRegistrySecretBody(o).status().message(), "--docker-password is required");
  // kubectl's default registry: Docker Hub.
  EXPECT_EQ(DockerRegistryOptions{}.server, "https://index.docker.io/v1/");
}

TEST(GenericSecretBody, LiteralsAndFilesInData) {
  GenericSecretOptions o{.name = "hf", .ns = "team-a"};
  o.literals = {"token=hf_abc=def", "empty="};
  o.files = {"/home/me/ca.crt", "key.pem=/tmp/k", "bin=/tmp/b"};
  const std::string binary("\x00\xff\x01 bytes\n", 9);
  absl::StatusOr<nlohmann::ordered_json> body = GenericSecretBody(
      o, Files({{"/home/me/ca.crt", "CERT"}, {"/tmp/k", "KEY"}, {"/tmp/b", binary}}));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)["type"], "Opaque");
  EXPECT_EQ((*body)["metadata"]["namespace"], "team-a");
  EXPECT_FALSE(body->contains("stringData"));
  const auto& data = (*body)["data"];
  std::vector<std::string> keys;
  for (const auto& [k, v] : data.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"bin", "ca.crt", "empty", "key.pem", "token"}));
  EXPECT_EQ(Unbase64(data["token"]), "hf_abc=def");  // split at the first '='
  EXPECT_EQ(Unbase64(data["empty"]), "");
  EXPECT_EQ(Unbase64(data["ca.crt"]), "CERT");  // the file's base name
  EXPECT_EQ(Unbase64(data["key.pem"]), "KEY");
  EXPECT_EQ(Unbase64(data["bin"]), binary);            // bytes, NUL included
  EXPECT_EQ(data["bin"], absl::Base64Escape(binary));  // standard, padded: what the server takes
  o = {.name = "x", .ns = "default", .type = "kubernetes.io/dockerconfigjson"};
  o.files = {".dockerconfigjson=/c"};
  body = GenericSecretBody(o, Files({{"/c", "{}"}}));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)["type"], "kubernetes.io/dockerconfigjson");
  EXPECT_EQ(Unbase64((*body)["data"][".dockerconfigjson"]), "{}");
}

TEST(GenericSecretBody, RefusesBadFlagsNamingThemNeverTheValue) {
  auto error = [](std::vector<std::string> literals, std::vector<std::string> files) {
    GenericSecretOptions o{.name = "s", .ns = "default"};
    o.literals = std::move(literals);
    o.files = std::move(files);
    absl::StatusOr<nlohmann::ordered_json> body = GenericSecretBody(o, Files({{"/f", "F"}}));
    EXPECT_FALSE(body.ok());
    return std::string(body.status().message());
  };
  EXPECT_EQ(error({"a=1", "hf_SECRET"}, {}), "--from-literal #2 is not KEY=VALUE: it has no '='");
  EXPECT_EQ(error({"=hf_SECRET"}, {}), "--from-literal #1 has no KEY before '='");
  EXPECT_EQ(error({"token=1", "token=2"}, {}),
            "key \"token\" is given twice (--from-literal and --from-literal)");
  EXPECT_EQ(error({"f=1"}, {"/f"}), "key \"f\" is given twice (--from-literal and --from-file)");
  EXPECT_EQ(error({"to ken=hf_SECRET"}, {}),
            "--from-literal: \"to ken\" is not a valid key: a key is 1 to 253 of [-._a-zA-Z0-9], "
            "not . or ..");
  EXPECT_EQ(error({"..=x"}, {}).substr(0, 35), "--from-literal: \"..\" is not a valid");
  EXPECT_EQ(error({}, {"/missing"}), "--from-file: cannot read /missing: no such file");
  EXPECT_EQ(error({}, {"k="}), "--from-file=k=: no PATH");
  EXPECT_EQ(error({}, {"=/f"}), "--from-file==/f: no KEY before '='");
  EXPECT_EQ(error({}, {"/tmp/my key"}),
            "--from-file: \"my key\" is not a valid key: a key is 1 to 253 of [-._a-zA-Z0-9], not "
            ". or ..; name it with --from-file=KEY=/tmp/my key");
  for (const std::string& m : {error({"a=1", "hf_SECRET"}, {}), error({"=hf_SECRET"}, {})}) {
    EXPECT_EQ(m.find("hf_SECRET"), std::string::npos) << m;
  }
}

TEST(ReadSecretFile, ReadsBytesAndRefusesDirectoriesAndHugeFiles) {
  testing_util::TempDir tmp{"secret-file"};
  const std::string file = (tmp.path() / "f").string();
  std::ofstream(file, std::ios::binary) << std::string("a\0b", 3);
  EXPECT_EQ(*ReadSecretFile(file), std::string("a\0b", 3));
  EXPECT_EQ(ReadSecretFile(tmp.path().string()).status().message(),
            tmp.path().string() + " is a directory: name each file");
  EXPECT_EQ(ReadSecretFile(file + "-none").status().message(),
            "cannot read " + file + "-none: No such file or directory");
  std::ofstream(file, std::ios::binary) << std::string(kMaxSecretFileBytes + 1, 'x');
  EXPECT_EQ(ReadSecretFile(file).status().message(),
            file + " is larger than 1048576 bytes, the most a Secret holds");
}

TEST(PrintSecretsTable, IsKubectls) {
  const int64_t now = 1'780'000'000'000;  // 2026-05-28T20:26:40Z
  std::vector<json> items = {
      json::parse(R"({"metadata": {"name": "hf", "namespace": "team-a",
                      "creationTimestamp": "2026-05-28T20:26:00Z"}, "type": "Opaque",
                      "status": {"data": {"token": {"bytes": 5}, "user": {"bytes": 3}}}})"),
      json::parse(R"({"metadata": {"name": "regcred", "namespace": "team-a",
                      "creationTimestamp": "2026-05-26T18:26:40Z"},
                      "type": "kubernetes.io/dockerconfigjson",
                      "status": {"data": {".dockerconfigjson": {"bytes": 90}}}})"),
      json::parse(R"({"metadata": {"name": "empty"}, "status": {"data": {}}})")};
  std::ostringstream out;
  PrintSecretsTable(items, false, now, out);
  EXPECT_EQ(out.str(),
            "NAME      TYPE                             DATA   AGE\n"
            "hf        Opaque                           2      40s\n"
            "regcred   kubernetes.io/dockerconfigjson   1      2d2h\n"
            "empty     Opaque                           0      <unknown>\n");
  std::ostringstream wide;
  PrintSecretsTable({items[0]}, true, now, wide);
  EXPECT_EQ(wide.str(),
            "NAMESPACE   NAME   TYPE     DATA   AGE\n"
            "team-a      hf     Opaque   2      40s\n");
}

TEST(PrintSecretDescription, ShowsKeysAndSizesOnly) {
  std::ostringstream out;
  PrintSecretDescription(json::parse(R"({"metadata": {"name": "hf", "namespace": "team-a",
                      "labels": {"team": "a", "tier": "b"}}, "type": "Opaque",
                      "status": {"data": {"token": {"bytes": 37, "keyId": "kek-1"},
                                          "user": {"bytes": 5, "keyId": "kek-1"}}}})"),
                         out);
  EXPECT_EQ(out.str(),
            "Name:         hf\n"
            "Namespace:    team-a\n"
            "Labels:       team=a\n"
            "              tier=b\n"
            "\n"
            "Type:  Opaque\n"
            "\n"
            "Data\n"
            "====\n"
            "token:  37 bytes\n"
            "user:  5 bytes\n");
}

// The commands on a command line of their own, against a transport that counts its calls.
struct Parsed {
  int code = -1;
  int connects = 0;
  std::vector<std::string> bodies;
  std::string out, err;
};
Parsed RunSecretCommand(std::vector<std::string> args) {
  CLI::App app{"gpuctl", "gpuctl"};
  CLI::App* create = app.add_subcommand("create", "");
  SecretCommands secrets(*create);
  std::vector<const char*> argv = {"gpuctl", "create", "secret"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  Parsed p;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    p.err = e.what();
    p.code = kExitUsage;
    return p;
  }
  EXPECT_TRUE(secrets.parsed());
  std::ostringstream out, err;
  p.code = secrets.Run(
      [&p]() -> std::optional<CallFn> {
        ++p.connects;
        return CallFn([&p](std::string_view, const std::string&,
                           const std::string& body) -> absl::StatusOr<api::HttpResponse> {
          p.bodies.push_back(body);
          return api::HttpResponse{.status = 201, .body = "{}"};
        });
      },
      out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(SecretCommands, FlagErrorsExitOneAndSendNothing) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"generic", "hf", "--from-literal=hf_SECRET"},
        {"generic", "hf", "--from-literal=a=1", "--from-literal=a=2"},
        {"generic", "hf", "--from-file=/nonexistent/file"},
        {"generic", "hf", "--from-literal=bad key=1"}}) {
    Parsed p = RunSecretCommand(args);
    EXPECT_EQ(p.code, 1) << args.back();
    EXPECT_EQ(p.connects, 0) << args.back();
    EXPECT_TRUE(p.err.starts_with("gpuctl create secret generic: ")) << p.err;
    EXPECT_NE(p.err.find("--from-"), std::string::npos) << p.err;  // names the flag
    EXPECT_EQ(p.err.find("hf_SECRET"), std::string::npos) << p.err;
  }
  Parsed bad_name = RunSecretCommand({"generic", "Not_A_Label", "--from-literal=a=1"});
  EXPECT_EQ(bad_name.code, kExitUsage);
  EXPECT_EQ(bad_name.connects, 0);
  EXPECT_EQ(RunSecretCommand({"docker-registry", "r", "--docker-username=u"}).code, kExitUsage);
}

TEST(SecretCommands, CreateSendsTheBodyAndDryRunSendsNothing) {
  // A NAME after a repeated flag is the NAME, not one more KEY=VALUE.
  Parsed p = RunSecretCommand(
      {"generic", "--from-literal", "a=1", "hf", "-n", "team-a", "--from-literal=token=VALUE"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out, "secret/hf created\n");
  ASSERT_EQ(p.bodies.size(), 1u);
  json body = json::parse(p.bodies[0]);
  EXPECT_EQ(body["metadata"]["name"], "hf");
  EXPECT_EQ(body["metadata"]["namespace"], "team-a");
  EXPECT_EQ(body["data"], json({{"a", "MQ=="}, {"token", absl::Base64Escape("VALUE")}}));
  Parsed dry = RunSecretCommand({"docker-registry", "regcred", "--docker-server=127.0.0.1:5000",
                                 "--docker-username=U", "--docker-password=P", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.connects, 0);
  EXPECT_NE(dry.out.find("type: kubernetes.io/dockerconfigjson"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find(absl::Base64Escape(DockerConfigJson("127.0.0.1:5000", "U", "P", ""))),
            std::string::npos)
      << dry.out;
}

}  // namespace
}  // namespace gpucloud::cli
