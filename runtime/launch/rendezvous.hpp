// The TCP rendezvous that starts a zrun job: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other
// rank connects (retrying until a timeout), and once all have arrived rank 0 sends each of them the
// same byte blob (the ncclUniqueId). Returning from it is therefore also a barrier: every rank of the
// world has reached it. No MPI needed.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace zrun {

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";  // rank 0's host, as the other ranks reach it
  int master_port = 29500;
  double timeout_s = 120;                 // the whole rendezvous, on every rank
  int listener_fd = -1;  // rank 0 of a world > 1: a socket already listening on master_port, handed down by
                         // zrun's launcher (ZRUN_RENDEZVOUS_FD), served on and closed; -1: listen on master_port
};

// Why a rendezvous failed: names the rank, the address and what was missing.
struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Rank 0 passes the blob and gets it back; the other ranks pass nothing and get rank 0's blob.
// Throws RendezvousError when rank 0 cannot listen, when a rank cannot reach rank 0 within the timeout,
// when rank 0 does not see every rank within the timeout, or on a protocol mismatch (different world
// sizes, two processes claiming one rank).
std::vector<std::uint8_t> rendezvous(int rank, int world_size, const std::vector<std::uint8_t>& blob,
                                     const RendezvousOptions& options);

// A TCP port on 127.0.0.1 that was free a moment ago. Nothing holds it: another process may take it before
// it is used (zrun's launcher hands its rank 0 an open listener instead: open_rendezvous_listener).
int pick_free_local_port();

// A socket listening where rank 0's rendezvous would (every address of this host) on a free port the kernel
// picks, close-on-exec. zrun's launcher opens it before starting the workers and hands it to rank 0, so that
// the port its workers are told cannot be taken by another process in between. Throws RendezvousError.
struct RendezvousListener {
  int fd = -1;
  int port = 0;
};
RendezvousListener open_rendezvous_listener();

}  // namespace zrun
