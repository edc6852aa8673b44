#pragma once
// An HTTP proxy on 127.0.0.1 in front of a server that adds latency or injects faults (503s, resets
// mid-body, stalls, ignored ranges). Header-only; Linux.

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "loopback_sockets.hpp"

namespace pinfeed::loopback {

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
  void serve_next(conn& c);

  void begin_response(conn& c) {
    c.at = phase::response;
    c.body_at = c.filled = 0;
    c.up_head.clear();
    watch(c.up, EPOLL_CTL_MOD, EPOLLIN, c.id << 2 | kUpstream);
    read_response(c);
  }

  /// Reads what the upstream has sent of its answer; once whole, answers the client.
  void read_response(conn& c);

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

/// Serves the next request `c.in` holds whole, if any.
inline void fault_proxy::serve_next(conn& c) {
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

/// Reads what the upstream has sent of its answer; once whole, answers the client.
inline void fault_proxy::read_response(conn& c) {
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

}  // namespace pinfeed::loopback
