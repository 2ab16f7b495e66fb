#include "api/client.h"

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace gpucloud::api {
namespace {

// gpuctl makes one request per process, so OpenSSL is not cleaned up at its exit (issue 17: that
// was about 0.5-0.9 ms of each `gpuctl run`). In a fresh process (this test binary run again,
// for this test alone, so that nothing initialized OpenSSL before): a handler registered before
// the client's first connection attempt runs after any clean-up OpenSSL registers then, and
// OpenSSL initializes again only if it was not cleaned up.
TEST(Client, OpenSslIsNotCleanedUpAtExit) {
  if (std::getenv("GPUCLOUD_OPENSSL_EXIT_PROBE") != nullptr) {  // the fresh process
    std::atexit([] { _exit(OPENSSL_init_crypto(0, nullptr) == 1 ? 0 : 3); });
    ClientConfig config;
    config.host = "127.0.0.1";
    config.ca_path = "/nonexistent/ca.crt";  // fails after the TLS context is made
    (void)Client(config).Call("GET", "/version");
    std::exit(0);
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("GPUCLOUD_OPENSSL_EXIT_PROBE", "1", 1);
    execl("/proc/self/exe", "client_probe", "--gtest_filter=Client.OpenSslIsNotCleanedUpAtExit",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "OpenSSL was cleaned up at exit";
}

TEST(ClientConfig, ServerMayNameSeveralServersInOrder) {
  const std::string rest = "certificate-authority: ca.crt\ntoken: t\n";
  for (const std::string& servers :
       {std::string("server: https://a.example:8443, https://b.example,https://[::1]:9443\n"),
        std::string("server:\n  - https://a.example:8443\n  - https://b.example\n"
                    "  - https://[::1]:9443/\n")}) {
    absl::StatusOr<ClientConfig> c = ParseClientConfig(servers + rest, "cfg");
    ASSERT_TRUE(c.ok()) << servers << c.status();
    EXPECT_EQ(c->host, "a.example");
    EXPECT_EQ(c->port, 8443);
    EXPECT_EQ(c->more_servers, (std::vector<ServerAddress>{{"b.example", 443}, {"::1", 9443}}));
  }
  absl::StatusOr<ClientConfig> one = ParseClientConfig("server: https://h:1\n" + rest, "cfg");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->host, "h");
  EXPECT_TRUE(one->more_servers.empty());
}

TEST(ClientConfig, ABadServerIsNamed) {
  const std::string rest = "certificate-authority: ca.crt\ntoken: t\n";
  struct Case {
    std::string server, error;
  };
  for (const Case& c : std::vector<Case>{
           {"server: https://a:1,http://b:2\n",
            "cfg: server: must start with https://, got http://b:2"},
           {"server: https://a:70000\n", "cfg: server: bad port in https://a:70000"},
           {"server: https://a:x\n", "cfg: server: bad port in https://a:x"},
           {"server: https://:1\n", "cfg: server: no host in https://:1"},
           {"server:\n  - [https://a]\n", "cfg: server: a list of https:// URLs"},
           {"server: {a: 1}\n", "cfg: server: a URL or a list of URLs"},
           {"server: ' , '\n", "cfg: server: is required"},
           {"", "cfg: server: is required"},
       }) {
    absl::StatusOr<ClientConfig> got = ParseClientConfig(c.server + rest, "cfg");
    ASSERT_FALSE(got.ok()) << c.server;
    EXPECT_EQ(got.status().message(), c.error) << c.server;
  }
}

}  // namespace
}  // namespace gpucloud::api
