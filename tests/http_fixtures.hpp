#pragma once
// Servers the remote-shard tests start and stop themselves, on loopback only: nginx serving a
// directory, and a proxy that injects faults (503s, resets mid-body, stalls, latency).

#include <doctest/doctest.h>

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

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A connected socket to 127.0.0.1:port, or -1.
inline int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Starts argv[0] with `env` (environ when empty), its output appended to `log` when given. The
/// child is killed when the test process dies (a hung test killed by CTest leaves no server).
inline pid_t spawn_server(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& log) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char** const environment = env.empty() ? environ : envp.data();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // only async-signal-safe calls from here on
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
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

/// nginx serving `root` on 127.0.0.1 (range requests included), stopped by the destructor.
class nginx_server {
 public:
  explicit nginx_server(const std::filesystem::path& root, const std::filesystem::path& work) {
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      const auto conf = work / "nginx.conf";
      std::ofstream(conf) << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << (work / "nginx.pid").string()
                          << ";\nerror_log " << (work / "error.log").string()
                          << " error;\nevents { worker_connections 256; }\nhttp {\n  access_log off;\n  client_body_temp_path "
                          << (work / "body").string() << ";\n  proxy_temp_path " << (work / "proxy").string()
                          << ";\n  fastcgi_temp_path " << (work / "fastcgi").string() << ";\n  uwsgi_temp_path "
                          << (work / "uwsgi").string() << ";\n  scgi_temp_path " << (work / "scgi").string()
                          << ";\n  keepalive_requests 100000;\n  server {\n    listen 127.0.0.1:" << port_
                          << ";\n    root " << root.string() << ";\n  }\n}\n";
      const pid_t pid = spawn_server({"/usr/sbin/nginx", "-c", conf.string(), "-p", work.string()}, {}, "");
      bool reaped = false;
      if (wait_listening(pid, port_, 200, 10, reaped)) pid_ = pid;  // up to 2 s
      else stop_server(pid, reaped);  // exited (the port was taken) or stuck: try another port
    }
    REQUIRE_MESSAGE(pid_ > 0, "nginx did not start; see " << (work / "error.log").string());
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

/// Faults a proxy injects; request n (counting from 1) gets the first fault whose period divides n.
struct fault_plan {
  int unavailable_every = 0;  ///< answer 503
  int reset_every = 0;        ///< send the headers and half the body, then reset the connection
  int stall_every = 0;        ///< send the headers and half the body, then stall for stall_ms
  int stall_ms = 0;
  int latency_ms = 0;         ///< added before every answer
  bool strip_range = false;   ///< forward requests without their Range header (a server without ranges)
};

/// An HTTP/1.1 proxy on 127.0.0.1 in front of `upstream_port`, one connection per request
/// (answers carry Connection: close), injecting the faults of its plan. Stops in its destructor.
class fault_proxy {
 public:
  fault_proxy(int upstream_port, fault_plan plan) : upstream_(upstream_port), plan_(plan) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listen_ >= 0);
    const int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    REQUIRE(::listen(listen_, 128) == 0);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~fault_proxy() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_);
    std::lock_guard lock(m_);
    for (auto& t : handlers_) t.join();
  }
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int requests() const noexcept { return count_.load(); }
  [[nodiscard]] int faults() const noexcept { return faults_.load(); }

 private:
  void accept_loop() {
    while (!stop_) {
      const int c = ::accept(listen_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      std::lock_guard lock(m_);
      handlers_.emplace_back([this, c] { handle(c); });
    }
  }
  static bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  /// Reads up to the end of the headers; returns them (and leaves any body bytes in `rest`).
  static bool read_head(int fd, std::string& head, std::string& rest) {
    std::string buf;
    char chunk[8192];
    while (buf.find("\r\n\r\n") == std::string::npos) {
      const ssize_t r = ::recv(fd, chunk, sizeof chunk, 0);
      if (r <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(r));
    }
    const auto end = buf.find("\r\n\r\n") + 4;
    head = buf.substr(0, end);
    rest = buf.substr(end);
    return true;
  }
  /// A peer that keeps a socket open without a word does not hold a handler (or the destructor).
  static void limit_waits(int fd) {
    const timeval five{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  }
  void handle(int client) {
    limit_waits(client);
    std::string head, rest;
    if (!read_head(client, head, rest)) {
      ::close(client);
      return;
    }
    const int n = ++count_;
    // Ask upstream for one answer on its own connection.
    std::string forward;
    std::size_t line_start = 0;
    while (line_start < head.size()) {
      const auto eol = head.find("\r\n", line_start);
      std::string line = head.substr(line_start, eol - line_start);
      line_start = eol + 2;
      if (line.empty()) break;
      std::string lower = line;
      for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (lower.rfind("connection:", 0) == 0) continue;
      if (plan_.strip_range && lower.rfind("range:", 0) == 0) continue;
      forward += line + "\r\n";
    }
    forward += "Connection: close\r\n\r\n";
    const int up = connect_loopback(upstream_);
    std::string answer;
    if (up >= 0) {
      limit_waits(up);
      send_all(up, forward.data(), forward.size());
      char chunk[65536];
      for (ssize_t r; (r = ::recv(up, chunk, sizeof chunk, 0)) > 0;) answer.append(chunk, static_cast<std::size_t>(r));
      ::close(up);
    }
    if (plan_.latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(plan_.latency_ms));
    const auto body_at = answer.find("\r\n\r\n");
    const std::size_t half = body_at == std::string::npos ? answer.size() : body_at + 4 + (answer.size() - body_at - 4) / 2;
    auto every = [n](int k) { return k > 0 && n % k == 0; };
    if (every(plan_.unavailable_every)) {
      ++faults_;
      const char* busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      send_all(client, busy, std::strlen(busy));
    } else if (every(plan_.reset_every)) {
      ++faults_;
      send_all(client, answer.data(), half);
      const linger hard{1, 0};  // close with a reset, not a clean end
      ::setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    } else if (every(plan_.stall_every)) {
      ++faults_;
      send_all(client, answer.data(), half);
      for (int waited = 0; waited < plan_.stall_ms && !stop_; waited += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      send_all(client, answer.data(), answer.size());
    }
    ::close(client);
  }

  int upstream_;
  fault_plan plan_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0}, faults_{0};
  std::thread acceptor_;
  std::mutex m_;
  std::vector<std::thread> handlers_;
};

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
