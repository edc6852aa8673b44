#pragma once
// Sockets on 127.0.0.1 for the loopback servers (loopback_servers.hpp, loopback_proxy.hpp): ports
// bound, reserved and connected to, and the SCHED_BATCH hint for a server's threads. Linux.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

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

}  // namespace pinfeed::loopback
