#include "runtime/launch/rendezvous.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "runtime/launch/worker_identity.hpp"

namespace zrun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMagic = 0x5a52554e;  // "ZRUN"

// Closes the socket when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f = -1) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Reads or writes exactly n bytes before the deadline; false on timeout, EOF or error.
bool transfer(int fd, void* data, std::size_t n, bool write, Clock::time_point deadline) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

std::string where(const RendezvousOptions& o) { return fmt::format("{}:{}", o.master_addr, o.master_port); }

// A TCP socket listening on every address of this host at `port` (0: a free port the kernel picks): IPv6
// that also accepts IPv4 clients where the host has IPv6, else IPv4; close-on-exec. fd -1 (errno set) when
// it cannot.
Socket listen_on_any_address(int port) {
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const bool v6 = s.fd >= 0;
  if (!v6) s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return s;
  const int one = 1, zero = 0;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // also IPv4 clients
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(s.fd, 1024) != 0) {
    const int why = errno;
    s = Socket();  // closes the half-made socket
    errno = why;
  }
  return s;
}

// The local port a socket is bound to; -1 (errno set) when it has none.
int local_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  errno = EAFNOSUPPORT;
  return -1;
}

int int_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  return ::getsockopt(fd, level, name, &value, &len) == 0 ? value : -1;
}

// Rank 0 under zrun's launcher: checks that the inherited descriptor is what the launcher opened (a TCP socket
// listening on the rendezvous port) and takes it over, close-on-exec again so that nothing rank 0 starts keeps
// the port.
Socket take_inherited_listener(const RendezvousOptions& o) {
  const int fd = o.listener_fd;
  const auto error = [&](const std::string& what) {
    return RendezvousError(fmt::format("rank 0: rendezvous: {}={}, the socket zrun's launcher listens on for rank 0, {}",
                                       kEnvRendezvousFd, fd, what));
  };
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw error(fmt::format("is not an open file descriptor: {}", std::strerror(errno)));
  if (!S_ISSOCK(st.st_mode)) throw error("is not a socket");
  const int domain = int_option(fd, SOL_SOCKET, SO_DOMAIN);
  if (int_option(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6) ||
      int_option(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP)
    throw error("is not a TCP socket");
  if (int_option(fd, SOL_SOCKET, SO_ACCEPTCONN) != 1) throw error("is not listening");
  const int port = local_port(fd);
  if (port != o.master_port)
    throw error(fmt::format("listens on port {}, not on the rendezvous port {} (is ZRUN_RENDEZVOUS_PORT set?)", port,
                            o.master_port));
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
    throw error(fmt::format("cannot be made close-on-exec: {}", std::strerror(errno)));
  return Socket(fd);
}

// Rank 0's listener: the one zrun's launcher handed down, else a new one on master_port.
Socket rank0_listener(const RendezvousOptions& o) {
  if (o.listener_fd >= 0) return take_inherited_listener(o);
  Socket listener = listen_on_any_address(o.master_port);
  if (listener.fd < 0)
    throw RendezvousError(fmt::format("rank 0: rendezvous: cannot listen on port {}: {} (is another job using "
                                      "MASTER_PORT={}?)",
                                      o.master_port, std::strerror(errno), o.master_port));
  return listener;
}

// Rank 0: accept world-1 connections, check each hello, then send the blob to all.
std::vector<std::uint8_t> serve(int world, const std::vector<std::uint8_t>& blob, const RendezvousOptions& o,
                                Clock::time_point deadline) {
  const Socket listener = rank0_listener(o);
  std::vector<Socket> peers;
  std::set<int> arrived;
  while (static_cast<int>(arrived.size()) < world - 1) {
    pollfd pfd{listener.fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::string missing;
      for (int k = 1; k < world && missing.size() < 200; ++k)
        if (!arrived.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      throw RendezvousError(fmt::format("rank 0: rendezvous on port {}: only {} of {} ranks arrived within {} s "
                                        "(missing ranks: {})",
                                        o.master_port, arrived.size() + 1, world, o.timeout_s, missing));
    }
    Socket peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0) continue;
    std::uint32_t hello[3];
    if (!transfer(peer.fd, hello, sizeof hello, false, deadline)) continue;  // not a zrun rank, or too slow
    const int rank = static_cast<int>(ntohl(hello[1])), their_world = static_cast<int>(ntohl(hello[2]));
    if (ntohl(hello[0]) != kMagic) continue;
    if (their_world != world)
      throw RendezvousError(fmt::format("rank 0: rendezvous: rank {} says the world has {} ranks, rank 0 says {}",
                                        rank, their_world, world));
    if (rank < 1 || rank >= world || arrived.count(rank))
      throw RendezvousError(fmt::format("rank 0: rendezvous: a process claims rank {}, which is {}", rank,
                                        arrived.count(rank) ? "already taken" : "outside the world"));
    arrived.insert(rank);
    peers.push_back(std::move(peer));
  }
  const std::uint32_t size = htonl(static_cast<std::uint32_t>(blob.size()));
  for (Socket& p : peers) {
    if (!transfer(p.fd, const_cast<std::uint32_t*>(&size), sizeof size, true, deadline) ||
        !transfer(p.fd, const_cast<std::uint8_t*>(blob.data()), blob.size(), true, deadline))
      throw RendezvousError("rank 0: rendezvous: a rank left before receiving the unique id");
  }
  return blob;
}

// Other ranks: connect (retrying while rank 0 is not up yet), say hello, receive the blob.
std::vector<std::uint8_t> join(int rank, int world, const RendezvousOptions& o, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt";
  const std::string port = std::to_string(o.master_port);
  while (true) {
    addrinfo* found = nullptr;
    const int g = ::getaddrinfo(o.master_addr.c_str(), port.c_str(), &hints, &found);
    if (g != 0) {
      last_error = std::string("cannot resolve host: ") + ::gai_strerror(g);
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
        if (s.fd < 0) continue;
        if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
          last_error = std::strerror(errno);
          continue;
        }
        ::freeaddrinfo(found);
        found = nullptr;
        const std::uint32_t hello[3] = {htonl(kMagic), htonl(static_cast<std::uint32_t>(rank)),
                                        htonl(static_cast<std::uint32_t>(world))};
        std::uint32_t size = 0;
        if (!transfer(s.fd, const_cast<std::uint32_t*>(hello), sizeof hello, true, deadline) ||
            !transfer(s.fd, &size, sizeof size, false, deadline))
          throw RendezvousError(fmt::format("rank {}: rendezvous at {}: connected, but rank 0 did not answer within "
                                            "{} s (are all {} ranks started?)",
                                            rank, where(o), o.timeout_s, world));
        std::vector<std::uint8_t> blob(ntohl(size));
        if (!transfer(s.fd, blob.data(), blob.size(), false, deadline))
          throw RendezvousError(fmt::format("rank {}: rendezvous at {}: the unique id was cut off", rank, where(o)));
        return blob;
      }
      if (found) ::freeaddrinfo(found);
    }
    if (ms_left(deadline) == 0)
      throw RendezvousError(fmt::format("rank {}: could not reach rank 0's rendezvous at {} within {} s (last error: "
                                        "{}); is rank 0 running and MASTER_ADDR/MASTER_PORT right?",
                                        rank, where(o), o.timeout_s, last_error));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
  }
}

}  // namespace

std::vector<std::uint8_t> rendezvous(int rank, int world_size, const std::vector<std::uint8_t>& blob,
                                     const RendezvousOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw RendezvousError(fmt::format("rendezvous: rank {} is outside a world of {}", rank, world_size));
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(options.timeout_s * 1000));
  if (world_size == 1) return blob;
  return rank == 0 ? serve(world_size, blob, options, deadline) : join(rank, world_size, options, deadline);
}

int pick_free_local_port() {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (s.fd < 0 || ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw RendezvousError(std::string("cannot find a free local TCP port: ") + std::strerror(errno));
  return ntohs(a.sin_port);
}

RendezvousListener open_rendezvous_listener() {
  Socket s = listen_on_any_address(0);
  if (s.fd < 0)
    throw RendezvousError(fmt::format("cannot listen on a free TCP port for the rendezvous: {}", std::strerror(errno)));
  const int port = local_port(s.fd);
  if (port <= 0)
    throw RendezvousError(fmt::format("cannot read the rendezvous listener's port: {}", std::strerror(errno)));
  RendezvousListener listener{s.fd, port};
  s.fd = -1;  // the caller's now
  return listener;
}

}  // namespace zrun
