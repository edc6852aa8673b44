#pragma once
// Servers on 127.0.0.1 that a benchmark or a test starts and stops itself: nginx serving a
// directory (range requests included), and an HTTP proxy in front of a server that adds latency
// or injects faults (503s, resets mid-body, stalls, ignored ranges; loopback_proxy.hpp).
// Header-only; Linux.

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loopback_proxy.hpp"
#include "loopback_sockets.hpp"

extern char** environ;

namespace pinfeed::loopback {

/// Starts argv[0] with `env` (environ when empty), its output appended to `log` when given,
/// SCHED_BATCH when `batch`. The child is killed when the test process dies (a process killed
/// while it runs one leaves no server).
inline pid_t spawn_server(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& log,
                          bool batch = false) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char** const environment = env.empty() ? environ : envp.data();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  require(pid >= 0, "fork");
  if (pid == 0) {  // only async-signal-safe calls from here on
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (batch) batch_this_thread();
    if (!log.empty()) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
    }
    ::execve(argv[0], argv.data(), environment);
    ::_exit(127);
  }
  return pid;
}

/// Waits up to `tries` x `step_ms` for a server to listen on `port`; false if the child exited
/// first (it has been reaped then) or the time ran out.
inline bool wait_listening(pid_t pid, int port, int tries, int step_ms, bool& reaped) {
  reaped = false;
  for (int i = 0; i < tries; ++i) {
    if (const int fd = connect_loopback(port); fd >= 0) {
      ::close(fd);
      return true;
    }
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      reaped = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  return false;
}

inline void stop_server(pid_t pid, bool reaped) {
  if (pid <= 0 || reaped) return;
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
}

/// Whether nginx can be started here (Debian: nginx-light).
inline bool have_nginx() { return std::filesystem::exists("/usr/sbin/nginx"); }

/// How a benchmark's nginx runs (a test's keeps the defaults: it sees every change to its files).
struct nginx_options {
  bool batch = false;             ///< SCHED_BATCH (batch_this_thread())
  bool cache_open_files = false;  ///< open_file_cache, as a production server has: no open() per
                                  ///< request, but a changed file may be served as it was for a minute
};

/// nginx serving `root` on 127.0.0.1 (range requests included), stopped by the destructor.
class nginx_server {
 public:
  explicit nginx_server(const std::filesystem::path& root, const std::filesystem::path& work, nginx_options options = {}) {
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      const reserved_port reserved;  // until nginx listens on it, or this attempt gives up
      port_ = reserved.port();
      const auto conf = work / "nginx.conf";
      std::ofstream(conf) << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << (work / "nginx.pid").string()
                          << ";\nerror_log " << (work / "error.log").string()
                          << " error;\nevents { worker_connections 1024; }\nhttp {\n  access_log off;\n  sendfile on;\n"
                          << (options.cache_open_files ? "  open_file_cache max=1000 inactive=60s;\n" : "")
                          << "  client_body_temp_path "
                          << (work / "body").string() << ";\n  proxy_temp_path " << (work / "proxy").string()
                          << ";\n  fastcgi_temp_path " << (work / "fastcgi").string() << ";\n  uwsgi_temp_path "
                          << (work / "uwsgi").string() << ";\n  scgi_temp_path " << (work / "scgi").string()
                          << ";\n  keepalive_requests 100000;\n  server {\n    listen 127.0.0.1:" << port_
                          << ";\n    root " << root.string() << ";\n  }\n}\n";
      const pid_t pid = spawn_server({"/usr/sbin/nginx", "-c", conf.string(), "-p", work.string()}, {}, "", options.batch);
      bool reaped = false;
      if (wait_listening(pid, port_, 200, 10, reaped)) pid_ = pid;  // up to 2 s
      else stop_server(pid, reaped);  // exited (the port was taken) or stuck: try another port
    }
    if (pid_ <= 0) throw std::runtime_error("nginx did not start; see " + (work / "error.log").string());
  }
  ~nginx_server() { stop_server(pid_, false); }
  nginx_server(const nginx_server&) = delete;
  nginx_server& operator=(const nginx_server&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace pinfeed::loopback
