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

}  // namespace
}  // namespace gpucloud::api
