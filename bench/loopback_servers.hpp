#pragma once
// Servers on 127.0.0.1 that a benchmark or a test starts and stops itself: nginx serving a
// directory (range requests included), and an HTTP proxy in front of a server that adds latency
// or injects faults (503s, resets mid-body, stalls, ignored ranges). Header-only; Linux.

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace pinfeed::loopback {

inline void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("loopback server: ") + what + ": " + std::strerror(errno));
}

/// A TCP socket bound to 127.0.0.1 on a port the system picks; sets `port`. Not listening: a
/// connection to it is refused until listen().
inline int bind_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  require(fd >= 0, "socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    require(false, "bind");
  }
  port = ntohs(a.sin_port);
  return fd;
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  int port = 0;
  ::close(bind_loopback(port));
  return port;
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

/// Makes the calling thread SCHED_BATCH (0: the caller; a hint, a refusal is ignored). A server so
/// scheduled still gets its fair share of CPU, but a request that wakes it does not preempt the
/// thread running on that core: a benchmark's server, sharing the cores of the loader it serves,
/// then costs that loader its CPU time and no more, as a server on another host would (it would
/// cost nothing at all).
inline void batch_this_thread() noexcept {
  sched_param none{};
  none.sched_priority = 0;
  (void)::sched_setscheduler(0, SCHED_BATCH, &none);
}

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
      port_ = free_port();
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

/// Faults a proxy injects; request n (counting from 1) gets the first fault whose period divides n.
struct fault_plan {
  int unavailable_every = 0;  ///< answer 503
  int reset_every = 0;        ///< send the headers and half the body, then reset the connection
  int stall_every = 0;        ///< send the headers and half the body, then stall for stall_ms
  int stall_ms = 0;
  int latency_ms = 0;         ///< added before every answer
  bool strip_range = false;   ///< forward requests without their Range header (a server without ranges)
  int error_page_bytes = 0;   ///< the 503 answers carry a body (an error page) of this many bytes
  bool refuse_head = false;   ///< answer HEAD requests 405 (a server, or a signed URL, for GET alone)
  bool batch_threads = false; ///< the proxy's threads are SCHED_BATCH (batch_this_thread())
};

/// An HTTP/1.1 proxy on 127.0.0.1 in front of `upstream_port` (keep-alive on both sides; the
/// upstream's answers need a Content-Length, as nginx's static files have), injecting the faults
/// of its plan; a fault closes its connection. Stops in its destructor.
class fault_proxy {
 public:
  fault_proxy(int upstream_port, fault_plan plan) : upstream_(upstream_port), plan_(plan) {
    listen_ = bind_loopback(port_);
    require(::listen(listen_, 512) == 0, "listen");
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~fault_proxy() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_);
    std::vector<std::thread> handlers;
    {
      std::lock_guard lock(m_);  // (not held while joining: a handler takes it as it ends)
      for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);  // idle keep-alive clients end now
      handlers.swap(handlers_);
    }
    for (auto& t : handlers) t.join();
  }
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int requests() const noexcept { return count_.load(); }
  [[nodiscard]] int faults() const noexcept { return faults_.load(); }

 private:
  void accept_loop() {
    if (plan_.batch_threads) batch_this_thread();
    while (!stop_) {
      const int c = ::accept(listen_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      std::lock_guard lock(m_);
      open_.push_back(c);
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
  /// Takes the next request head (up to its blank line) out of `in`, reading from `fd` as
  /// needed; false when the peer closed or broke the connection.
  static bool next_head(int fd, std::string& in, std::string& head) {
    char chunk[8192];
    while (in.find("\r\n\r\n") == std::string::npos) {
      const ssize_t r = ::recv(fd, chunk, sizeof chunk, 0);
      if (r <= 0) return false;
      in.append(chunk, static_cast<std::size_t>(r));
    }
    const auto end = in.find("\r\n\r\n") + 4;
    head = in.substr(0, end);
    in.erase(0, end);
    return true;
  }
  /// Bytes received in place: grown without being zeroed first, as what grows is overwritten at
  /// once, and kept across a connection's requests.
  struct byte_buffer {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0, capacity = 0;
    void resize(std::size_t n) {
      if (n > capacity) {
        auto bigger = std::make_unique_for_overwrite<char[]>(n);
        if (size > 0) std::memcpy(bigger.get(), bytes.get(), size);
        bytes = std::move(bigger);
        capacity = n;
      }
      size = n;
    }
  };
  /// Takes one whole response (head and a Content-Length body) out of `in`, reading from `fd` as
  /// needed, into `answer`, its body from `body_at` on; false on a broken connection or a body of
  /// unknown length.
  static bool next_response(int fd, std::string& in, byte_buffer& answer, std::size_t& body_at) {
    std::string head;
    if (!next_head(fd, in, head)) return false;
    std::string lower = head;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto at = lower.find("\r\ncontent-length:");
    if (at == std::string::npos) return false;
    const std::size_t length = std::strtoull(lower.c_str() + at + 17, nullptr, 10);
    // The body is received in place, behind the head (what `in` holds of it first).
    body_at = head.size();
    answer.resize(body_at + length);
    std::memcpy(answer.bytes.get(), head.data(), body_at);
    const std::size_t buffered = std::min(in.size(), length);
    std::memcpy(answer.bytes.get() + body_at, in.data(), buffered);
    in.erase(0, buffered);
    std::size_t filled = body_at + buffered;
    while (filled < answer.size) {
      const ssize_t r = ::recv(fd, answer.bytes.get() + filled, answer.size - filled, 0);
      if (r <= 0) return false;
      filled += static_cast<std::size_t>(r);
    }
    return true;
  }
  /// A peer that keeps a socket open without a word does not hold a handler (or the destructor).
  static void limit_waits(int fd) {
    const timeval five{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  }
  /// Serves one client connection, request after request (keep-alive), each forwarded on one
  /// upstream connection of its own; a fault ends the connection.
  void handle(int client) {
    if (plan_.batch_threads) batch_this_thread();
    limit_waits(client);
    int up = -1;
    std::string in, up_in;
    byte_buffer answer;
    for (;;) {
      std::string head;
      if (stop_ || !next_head(client, in, head)) break;
      const int n = ++count_;
      if (plan_.refuse_head && head.rfind("HEAD ", 0) == 0) {
        const char* refused = "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n";
        if (!send_all(client, refused, std::strlen(refused))) break;
        continue;
      }
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
      forward += "Connection: keep-alive\r\n\r\n";
      if (up < 0) {
        up = connect_loopback(upstream_);
        if (up < 0) break;
        limit_waits(up);
        up_in.clear();
      }
      if (!send_all(up, forward.data(), forward.size())) break;
      // The latency before the answer is read: it is there by then, so one wake-up serves both.
      if (plan_.latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(plan_.latency_ms));
      std::size_t body_at = 0;
      if (!next_response(up, up_in, answer, body_at)) break;
      const std::size_t half = body_at + (answer.size - body_at) / 2;
      auto every = [n](int k) { return k > 0 && n % k == 0; };
      if (every(plan_.unavailable_every)) {
        ++faults_;
        const std::string page(static_cast<std::size_t>(plan_.error_page_bytes), '<');
        const std::string busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: " + std::to_string(page.size()) +
                                 "\r\nConnection: close\r\n\r\n" + page;
        send_all(client, busy.data(), busy.size());
        break;
      }
      if (every(plan_.reset_every)) {
        ++faults_;
        send_all(client, answer.bytes.get(), half);
        const linger hard{1, 0};  // close with a reset, not a clean end
        ::setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        break;
      }
      if (every(plan_.stall_every)) {
        ++faults_;
        send_all(client, answer.bytes.get(), half);
        for (int waited = 0; waited < plan_.stall_ms && !stop_; waited += 10)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        break;
      }
      if (!send_all(client, answer.bytes.get(), answer.size)) break;
    }
    if (up >= 0) ::close(up);
    {
      std::lock_guard lock(m_);
      open_.erase(std::find(open_.begin(), open_.end(), client));
      ::close(client);
    }
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
  std::vector<int> open_;  ///< client sockets being served
};

}  // namespace pinfeed::loopback
