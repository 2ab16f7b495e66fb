// The real `gpucloud server` process (CTest label `integration`): killed with SIGKILL after N
// acknowledged creates and started again on the same data directory, it has all N, three times
// over; SIGTERM stops it cleanly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/test_client.h"

extern char** environ;

namespace gpucloud::server {
namespace {

namespace http = boost::beast::http;

struct Running {
  pid_t pid = 0;
  uint16_t port = 0;
  std::string first_lines;
};

// Starts the server and reads its output until it says where it serves.
Running Start(const std::string& dir) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::string data = "--data-dir=" + dir;
  const char* argv[] = {GPUCLOUD_BINARY, "server", data.c_str(), "--listen", "127.0.0.1:0",
                        nullptr};
  Running r;
  EXPECT_EQ(posix_spawn(&r.pid, GPUCLOUD_BINARY, &fa, nullptr, const_cast<char**>(argv), environ),
            0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  std::string text;
  char c;
  while (read(out[0], &c, 1) == 1) {
    text += c;
    size_t at = text.find("serving https://127.0.0.1:");
    if (at != std::string::npos && text.back() == ' ') {
      r.port = static_cast<uint16_t>(std::stoi(text.substr(at + 26)));
      break;
    }
  }
  close(out[0]);  // the server's later lines go to a closed pipe: it only writes at stop
  r.first_lines = text;
  return r;
}

std::string ReadToken(const std::string& dir) {
  std::ifstream f(dir + "/admin.config");
  std::string line;
  while (std::getline(f, line)) {
    if (line.starts_with("token: ")) return line.substr(7);
  }
  return "";
}

TEST(ServerBinary, AcknowledgedCreatesSurviveKillNine) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("gpucloud-server-" + std::to_string(::getpid())))
                        .string();
  std::filesystem::remove_all(dir);
  int created = 0;
  for (int round = 0; round < 3; ++round) {
    Running s = Start(dir);
    ASSERT_GT(s.port, 0) << s.first_lines;
    if (round == 0) {
      EXPECT_NE(s.first_lines.find("first start: admin token written to"), std::string::npos);
    }
    std::string token = ReadToken(dir);
    ASSERT_EQ(token.size(), 64u);
    std::string ca = dir + "/ca.crt";
    auto list = testing_util::HttpsCall(s.port, ca, http::verb::get,
                                        "/apis/gpucloud/v1/namespaces/default/jobs", token);
    ASSERT_EQ(list.result_int(), 200) << list.body();
    // Everything acknowledged before the last kill is there.
    size_t items = 0;
    for (size_t at = 0; (at = list.body().find("\"kind\": \"Job\"", at)) != std::string::npos; ++at) {
      ++items;
    }
    EXPECT_EQ(items, static_cast<size_t>(created)) << "round " << round;
    for (int i = 0; i < 20; ++i, ++created) {
      std::string body =
          "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"j" +
          std::to_string(created) +
          "\"},\"spec\":{\"tasks\":[{\"name\":\"w\",\"resources\":{\"gpu\":{\"count\":1}}}]}}";
      auto r = testing_util::HttpsCall(s.port, ca, http::verb::post,
                                       "/apis/gpucloud/v1/namespaces/default/jobs", token, body);
      ASSERT_EQ(r.result_int(), 201) << r.body();
    }
    kill(s.pid, SIGKILL);
    waitpid(s.pid, nullptr, 0);
  }
  Running last = Start(dir);
  ASSERT_GT(last.port, 0);
  kill(last.pid, SIGTERM);
  int status = 0;
  waitpid(last.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpucloud::server
