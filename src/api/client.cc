#include "api/client.h"

#include <openssl/ssl.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>

#include "core/text.h"

namespace gpucloud::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

}  // namespace

std::string DefaultConfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUCLOUD_CONFIG"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return Cat(home ? home : ".", "/.gpucloud/config");
}

absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return absl::InvalidArgumentError(Cat(path, ": cannot read the client config (set one up "
                                                "from the server's admin.config)"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(Cat(path, ": invalid YAML: ", e.msg));
  }
  ClientConfig c;
  for (const char* key : {"server", "certificate-authority", "token"}) {
    if (!doc.IsMap() || !doc[key] || !doc[key].IsScalar() || doc[key].Scalar().empty()) {
      return absl::InvalidArgumentError(Cat(path, ": ", key, ": is required"));
    }
  }
  std::string server = doc["server"].Scalar();
  if (!server.starts_with("https://")) {
    return absl::InvalidArgumentError(Cat(path, ": server: must start with https://, got ", server));
  }
  std::string hostport = server.substr(8);
  if (size_t slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  size_t colon = hostport.rfind(':');
  c.host = hostport.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      c.port = std::stoi(hostport.substr(colon + 1));
    } catch (...) {
      return absl::InvalidArgumentError(Cat(path, ": server: bad port in ", server));
    }
  }
  c.ca_path = doc["certificate-authority"].Scalar();
  c.token = doc["token"].Scalar();
  return c;
}

absl::StatusOr<HttpResponse> Client::Call(std::string_view method, const std::string& target,
                                          const std::string& body) const {
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  beast::error_code ec;
  ctx.load_verify_file(config_.ca_path, ec);
  if (ec) return absl::InvalidArgumentError(Cat(config_.ca_path, ": ", ec.message()));
  ctx.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
  std::string sni = config_.host == "127.0.0.1" ? "localhost" : config_.host;
  SSL_set_tlsext_host_name(stream.native_handle(), sni.c_str());
  stream.set_verify_callback(asio::ssl::host_name_verification(sni));
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(config_.host, std::to_string(config_.port), ec);
  if (!ec) beast::get_lowest_layer(stream).connect(endpoints, ec);
  if (ec) {
    return absl::UnavailableError(
        Cat("cannot reach ", config_.host, ":", config_.port, ": ", ec.message()));
  }
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return absl::UnavailableError(Cat("TLS with ", config_.host, ": ", ec.message()));
  http::request<http::string_body> req{http::string_to_verb(std::string(method)), target, 11};
  req.set(http::field::host, config_.host);
  req.set(http::field::authorization, "Bearer " + config_.token);
  req.set(http::field::content_type, "application/yaml");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buf, res, ec);
  if (ec) return absl::UnavailableError(Cat("request to ", config_.host, ": ", ec.message()));
  return HttpResponse{static_cast<int>(res.result_int()), res.body()};
}

std::string CollectionPath(std::string_view resource, const std::string& namespace_) {
  if (resource == "jobs" || resource == "job") {
    return Cat("/apis/gpucloud/v1/namespaces/", namespace_, "/jobs");
  }
  if (resource == "queues" || resource == "queue") return "/apis/gpucloud/v1/queues";
  if (resource == "nodepools" || resource == "nodepool") return "/apis/gpucloud/v1/nodepools";
  return "";
}

std::string ObjectPath(const manifest::Object& object, bool collection) {
  const ObjectMeta& meta = manifest::MetaOf(object);
  std::string kind = ToLower(manifest::KindOf(object));
  std::string path = CollectionPath(kind, meta.namespace_);
  if (path.empty()) return "";
  return collection ? path : Cat(path, "/", meta.name);
}

}  // namespace gpucloud::api
