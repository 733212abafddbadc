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

// A TCP port on 127.0.0.1 that was free a moment ago (zrun's own launcher gives it to its workers).
int pick_free_local_port();

}  // namespace zrun
