#pragma once
// Servers the remote-shard tests start and stop themselves, on loopback only: nginx and the fault
// proxy (bench/loopback_servers.hpp, shared with `pinfeed bench remote`), and moto's S3 server.

#include <doctest/doctest.h>

#include "loopback_servers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace pinfeed::test {

using loopback::connect_loopback;
using loopback::fault_plan;
using loopback::fault_proxy;
using loopback::free_port;
using loopback::have_nginx;
using loopback::nginx_server;
using loopback::spawn_server;
using loopback::stop_server;
using loopback::wait_listening;

/// moto's standalone S3 server from the test virtualenv (scripts/install-test-env.sh), with IAM
/// authentication on, so that every request must carry a valid SigV4 signature. Stopped by the
/// destructor.
class moto_s3 {
 public:
  static std::filesystem::path binary() { return std::filesystem::path(PINFEED_TEST_VENV) / "bin" / "moto_server"; }
  static bool available() { return std::filesystem::exists(binary()); }

  explicit moto_s3(const std::filesystem::path& work) : work_(work) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.emplace_back("INITIAL_NO_AUTH_ACTION_COUNT=3");  // the setup script's IAM calls
    for (int attempt = 0; attempt < 3 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      const pid_t pid = spawn_server({binary().string(), "-H", "127.0.0.1", "-p", std::to_string(port_)}, env,
                                     (work / "moto.log").string());
      bool reaped = false;
      if (wait_listening(pid, port_, 600, 50, reaped)) pid_ = pid;  // moto takes seconds to import
      else stop_server(pid, reaped);
    }
    REQUIRE_MESSAGE(pid_ > 0, "moto_server did not start; see " << (work / "moto.log").string());
  }
  ~moto_s3() { stop_server(pid_, false); }
  moto_s3(const moto_s3&) = delete;
  moto_s3& operator=(const moto_s3&) = delete;
  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Creates the test user, `bucket` and the objects prefix + file name; returns {key id, secret}.
  std::pair<std::string, std::string> setup(const std::string& bucket, const std::string& prefix,
                                            const std::vector<std::string>& files) {
    std::string cmd = (binary().parent_path() / "python").string() + " " + PINFEED_TEST_DIR "/loaders/s3_setup.py " +
                      endpoint() + " " + bucket + " '" + prefix + "'";
    for (const auto& f : files) cmd += " '" + f + "'";
    cmd += " 2>>" + (work_ / "setup.log").string();
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    REQUIRE_MESSAGE(::pclose(p) == 0, "s3_setup.py failed; see " << (work_ / "setup.log").string());
    const auto space = out.find(' ');
    REQUIRE(space != std::string::npos);
    std::string secret = out.substr(space + 1);
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    return {out.substr(0, space), secret};
  }

 private:
  std::filesystem::path work_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace pinfeed::test
