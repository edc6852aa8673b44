#pragma once
// Servers on 127.0.0.1 that a benchmark or a test starts and stops itself: nginx serving a
// directory (range requests included), and an HTTP proxy in front of a server that adds latency
// or injects faults (503s, resets mid-body, stalls, ignored ranges). Header-only; Linux.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
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

/// A TCP port on 127.0.0.1 that was free a moment ago. Another process may be given it before a
/// server binds it (a server this process starts takes a reserved_port instead).
inline int free_port() {
  int port = 0;
  ::close(bind_loopback(port));
  return port;
}

/// A TCP port on 127.0.0.1 kept for a server this process is starting, until the object goes: a
/// socket bound to it with SO_REUSEADDR and not listening (nor inherited by children). While it is
/// held no socket of any process is given the port by bind(0) or connect(), and the server, binding
/// it with SO_REUSEADDR itself (nginx does), listens on it. A port closed as soon as found (free_port())
/// can go to another test's server or connection before this one's server binds it: the server
/// then fails to bind, and a wait that connects to the port reaches the other listener.
class reserved_port {
 public:
  reserved_port() : fd_(bind_loopback(port_)) { (void)::fcntl(fd_, F_SETFD, FD_CLOEXEC); }
  ~reserved_port() { ::close(fd_); }
  reserved_port(const reserved_port&) = delete;
  reserved_port& operator=(const reserved_port&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  int port_ = 0;
  int fd_;
};

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

/// An HTTP/1.1 proxy on 127.0.0.1 in front of `upstream_port` (keep-alive on both sides, each
/// client connection forwarded on an upstream connection of its own; the upstream's answers need
/// a Content-Length, as nginx's static files have), injecting the faults of its plan; a fault
/// closes its connection. One thread serves every connection (epoll, and a timer queue for the
/// latency and the stalls), so that a busy proxy handles several events a wake-up rather than
/// waking a thread of its own for each. Stops in its destructor, ending every connection.
class fault_proxy {
 public:
  fault_proxy(int upstream_port, fault_plan plan) : upstream_(upstream_port), plan_(plan) {
    listen_ = bind_loopback(port_);
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (::listen(listen_, 512) != 0 || epoll_ < 0 || wake_ < 0 || !nonblocking(listen_)) {
      close_all_fds();
      require(false, "proxy setup");
    }
    watch(listen_, EPOLL_CTL_ADD, EPOLLIN, kListen);
    watch(wake_, EPOLL_CTL_ADD, EPOLLIN, kWake);
    thread_ = std::thread([this] { run(); });
  }
  ~fault_proxy() {
    stop_ = true;
    const std::uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
    thread_.join();
    close_all_fds();
  }
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int requests() const noexcept { return count_.load(); }
  [[nodiscard]] int faults() const noexcept { return faults_.load(); }
  /// The most client connections open at once so far (a client opens one per request it runs).
  [[nodiscard]] int peak_connections() const noexcept { return peak_.load(); }

 private:
  using clock = std::chrono::steady_clock;
  // epoll keys: (connection id << 2) | what.
  static constexpr std::uint64_t kListen = 0, kWake = 1, kClient = 2, kUpstream = 3;
  /// Room for one answer, kept across a connection's requests. Its bytes are not kept when it
  /// grows, nor zeroed: each answer overwrites all of them.
  struct byte_buffer {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0, capacity = 0;
    void reset(std::size_t n) {
      if (n > capacity) {
        bytes = std::make_unique_for_overwrite<char[]>(n);
        capacity = n;
      }
      size = n;
    }
  };
  static std::string lowercase(std::string text) {
    for (auto& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return text;
  }
  enum class phase { request, latency, response, writing, stalling };
  enum class then { keep_alive, close, reset, stall };
  struct conn {
    std::uint64_t id = 0;
    int client = -1, up = -1;
    phase at = phase::request;
    int n = 0;                  ///< the request being served, counting from 1 over all connections
    std::string in, up_head;    ///< read from the client and not yet served; the answer's head so far
    byte_buffer answer;         ///< the upstream's answer: head, then body from body_at
    std::size_t body_at = 0, filled = 0;  ///< body_at 0: the head is still arriving
    std::string reply;          ///< an answer of the proxy's own (405, 503)
    const char* out = nullptr;  ///< what is left to write to the client
    std::size_t out_left = 0;
    then after = then::keep_alive;
    clock::time_point due{};
  };

  static bool nonblocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
  }
  void watch(int fd, int op, std::uint32_t events, std::uint64_t key) {
    epoll_event e{};
    e.events = events;
    e.data.u64 = key;
    (void)::epoll_ctl(epoll_, op, fd, &e);
  }
  void close_all_fds() noexcept {
    for (int* fd : {&epoll_, &wake_, &listen_})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  }

  void run() {
    if (plan_.batch_threads) batch_this_thread();
    epoll_event ready[64];
    while (!stop_) {
      int wait_ms = -1;
      if (!timers_.empty()) {
        const auto until = timers_.begin()->first - clock::now();
        wait_ms = static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::ceil<std::chrono::milliseconds>(until).count()));
      }
      const int k = ::epoll_wait(epoll_, ready, 64, wait_ms);
      for (int i = 0; i < k && !stop_; ++i) dispatch(ready[i]);
      const auto now = clock::now();
      while (!stop_ && !timers_.empty() && timers_.begin()->first <= now) {
        const auto [due, id] = *timers_.begin();
        timers_.erase(timers_.begin());
        const auto it = conns_.find(id);
        if (it == conns_.end() || it->second->due != due) continue;
        conn& c = *it->second;
        if (c.at == phase::latency) begin_response(c);
        else if (c.at == phase::stalling) end(c);
      }
    }
    while (!conns_.empty()) end(*conns_.begin()->second);  // idle keep-alive clients and stalls end now
  }

  void dispatch(const epoll_event& e) {
    const std::uint64_t what = e.data.u64 & 3, id = e.data.u64 >> 2;
    if (what == kWake) {
      std::uint64_t count = 0;
      (void)!::read(wake_, &count, sizeof count);
      return;
    }
    if (what == kListen) {
      for (;;) {
        const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        auto c = std::make_unique<conn>();
        c->id = next_id_++;
        c->client = fd;
        watch(fd, EPOLL_CTL_ADD, EPOLLIN, c->id << 2 | kClient);
        conns_.emplace(c->id, std::move(c));
        peak_.store(std::max(peak_.load(), static_cast<int>(conns_.size())));  // (this thread's alone to write)
      }
    }
    const auto it = conns_.find(id);
    if (it == conns_.end()) return;
    conn& c = *it->second;
    if (what == kUpstream) {
      if (c.at == phase::response) read_response(c);
      else if (e.events & (EPOLLHUP | EPOLLERR | EPOLLIN)) {  // an idle upstream closed: the next request reconnects
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.up, nullptr);
        ::close(c.up);
        c.up = -1;
      }
      return;
    }
    if (e.events & EPOLLERR) return end(c);
    if (c.at == phase::request && (e.events & (EPOLLIN | EPOLLHUP))) read_request(c);
    else if (c.at == phase::writing && (e.events & EPOLLOUT)) write_out(c);
    else if (e.events & EPOLLHUP) end(c);
  }

  /// Ends a connection: both sockets closed (a reset when its fault says so).
  void end(conn& c) {
    if (c.after == then::reset && c.at == phase::writing) {
      const linger hard{1, 0};  // close with a reset, not a clean end
      ::setsockopt(c.client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    }
    for (const int fd : {c.client, c.up})
      if (fd >= 0) {
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        ::close(fd);
      }
    conns_.erase(c.id);  // c is gone from here on
  }

  void read_request(conn& c) {
    char chunk[16384];
    for (;;) {
      const ssize_t r = ::recv(c.client, chunk, sizeof chunk, 0);
      if (r > 0) {
        c.in.append(chunk, static_cast<std::size_t>(r));
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return end(c);  // the client closed or broke the connection
    }
    serve_next(c);
  }

  /// Serves the next request `c.in` holds whole, if any.
  void serve_next(conn& c) {
    const auto blank = c.in.find("\r\n\r\n");
    if (blank == std::string::npos) {
      c.at = phase::request;
      watch(c.client, EPOLL_CTL_MOD, EPOLLIN, c.id << 2 | kClient);
      return;
    }
    const std::string head = c.in.substr(0, blank + 4);
    c.in.erase(0, blank + 4);
    c.n = ++count_;
    if (plan_.refuse_head && head.rfind("HEAD ", 0) == 0) {
      c.reply = "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n";
      return start_write(c, c.reply.data(), c.reply.size(), then::keep_alive);
    }
    std::string forward;
    std::size_t line_start = 0;
    while (line_start < head.size()) {
      const auto eol = head.find("\r\n", line_start);
      std::string line = head.substr(line_start, eol - line_start);
      line_start = eol + 2;
      if (line.empty()) break;
      const std::string lower = lowercase(line);
      if (lower.rfind("connection:", 0) == 0) continue;
      if (plan_.strip_range && lower.rfind("range:", 0) == 0) continue;
      forward += line + "\r\n";
    }
    forward += "Connection: keep-alive\r\n\r\n";
    if (c.up < 0) {
      c.up = connect_loopback(upstream_);
      if (c.up < 0 || !nonblocking(c.up)) return end(c);
      watch(c.up, EPOLL_CTL_ADD, 0, c.id << 2 | kUpstream);
    }
    // A request head fits an idle socket's buffer whole; anything less ends the connection.
    if (::send(c.up, forward.data(), forward.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(forward.size())) return end(c);
    watch(c.client, EPOLL_CTL_MOD, 0, c.id << 2 | kClient);  // nothing from the client until answered
    if (plan_.latency_ms > 0) {
      // The latency before the answer is read: it is there by then, so one wake-up serves both.
      c.at = phase::latency;
      c.due = clock::now() + std::chrono::milliseconds(plan_.latency_ms);
      timers_.emplace(c.due, c.id);
      return;
    }
    begin_response(c);
  }

  void begin_response(conn& c) {
    c.at = phase::response;
    c.body_at = c.filled = 0;
    c.up_head.clear();
    watch(c.up, EPOLL_CTL_MOD, EPOLLIN, c.id << 2 | kUpstream);
    read_response(c);
  }

  /// Reads what the upstream has sent of its answer; once whole, answers the client.
  void read_response(conn& c) {
    for (;;) {
      if (c.body_at == 0) {  // the head, a chunk at a time
        char chunk[16384];
        const ssize_t r = ::recv(c.up, chunk, sizeof chunk, 0);
        if (r <= 0) {
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
          return end(c);
        }
        c.up_head.append(chunk, static_cast<std::size_t>(r));
        const auto blank = c.up_head.find("\r\n\r\n");
        if (blank == std::string::npos) continue;
        const std::string lower = lowercase(c.up_head.substr(0, blank + 4));
        const auto at = lower.find("\r\ncontent-length:");
        if (at == std::string::npos) return end(c);
        const std::size_t length = std::strtoull(lower.c_str() + at + 17, nullptr, 10);
        c.body_at = blank + 4;
        c.answer.reset(c.body_at + length);
        // The head, and the body bytes that came with it (never more: one answer at a time).
        c.filled = std::min(c.up_head.size(), c.answer.size);
        std::memcpy(c.answer.bytes.get(), c.up_head.data(), c.filled);
      } else if (c.filled < c.answer.size) {  // the body, in place
        const ssize_t r = ::recv(c.up, c.answer.bytes.get() + c.filled, c.answer.size - c.filled, 0);
        if (r <= 0) {
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
          return end(c);
        }
        c.filled += static_cast<std::size_t>(r);
      }
      if (c.body_at != 0 && c.filled == c.answer.size) break;
    }
    watch(c.up, EPOLL_CTL_MOD, 0, c.id << 2 | kUpstream);
    const std::size_t half = c.body_at + (c.answer.size - c.body_at) / 2;
    const int n = c.n;
    auto every = [n](int k) { return k > 0 && n % k == 0; };
    if (every(plan_.unavailable_every)) {
      ++faults_;
      const std::string page(static_cast<std::size_t>(plan_.error_page_bytes), '<');
      c.reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: " + std::to_string(page.size()) +
                "\r\nConnection: close\r\n\r\n" + page;
      return start_write(c, c.reply.data(), c.reply.size(), then::close);
    }
    if (every(plan_.reset_every)) {
      ++faults_;
      return start_write(c, c.answer.bytes.get(), half, then::reset);
    }
    if (every(plan_.stall_every)) {
      ++faults_;
      return start_write(c, c.answer.bytes.get(), half, then::stall);
    }
    start_write(c, c.answer.bytes.get(), c.answer.size, then::keep_alive);
  }

  void start_write(conn& c, const char* p, std::size_t n, then after) {
    c.at = phase::writing;
    c.out = p;
    c.out_left = n;
    c.after = after;
    write_out(c);
  }

  void write_out(conn& c) {
    while (c.out_left > 0) {
      const ssize_t w = ::send(c.client, c.out, c.out_left, MSG_NOSIGNAL);
      if (w > 0) {
        c.out += w;
        c.out_left -= static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c.client, EPOLL_CTL_MOD, EPOLLOUT, c.id << 2 | kClient);
        return;
      }
      c.after = then::close;
      return end(c);
    }
    switch (c.after) {
      case then::keep_alive: return serve_next(c);
      case then::stall:
        c.at = phase::stalling;  // the half answer stays unfinished until the stall is over
        watch(c.client, EPOLL_CTL_MOD, 0, c.id << 2 | kClient);
        c.due = clock::now() + std::chrono::milliseconds(plan_.stall_ms);
        timers_.emplace(c.due, c.id);
        return;
      case then::close:
      case then::reset: return end(c);
    }
  }

  int upstream_;
  fault_plan plan_;
  int listen_ = -1, epoll_ = -1, wake_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0}, faults_{0}, peak_{0};
  // The loop thread's own.
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<conn>> conns_;
  std::multimap<clock::time_point, std::uint64_t> timers_;  ///< latencies and stalls ending, by connection
  std::thread thread_;  ///< last: it starts once the members above exist
};

}  // namespace pinfeed::loopback
