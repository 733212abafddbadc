// The NCCL communicators of one rank: the world (ncclCommInitRank from the rendezvous' ncclUniqueId) and
// one per schedule ProcessGroup (ncclCommSplit of the world, color/key from group_split.hpp), plus the
// watchdog hooks over them (async-error polling, abort) and a checked all-reduce wrapper.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/watchdog.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

class Communicators {
 public:
  // Collective over the world: every rank calls it with the same unique id and groups.
  Communicators(int rank, int world_size, int gpus_per_node, const ncclUniqueId& id,
                const std::vector<zsim::ProcessGroup>& groups);
  ~Communicators();  // ncclCommDestroy, unless aborted
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  ncclComm_t world() const { return world_; }
  ncclComm_t group(int index) const { return groups_.at(index); }  // index into Schedule::groups
  const zsim::ProcessGroup& shape(int index) const { return shapes_.at(index); }
  std::size_t group_count() const { return groups_.size(); }
  int rank() const { return rank_; }

  // The first communicator with an asynchronous error, described; nullopt when all are fine.
  std::optional<std::string> poll_async_error() const;
  void abort_all();  // ncclCommAbort on every communicator (the watchdog's last resort)
  WatchdogHooks watchdog_hooks();

  // Sum all-reduce of `count` floats in place over group `index`, on `stream`.
  void all_reduce_sum(float* data, std::size_t count, int index, cudaStream_t stream) const;

 private:
  int rank_;
  ncclComm_t world_ = nullptr;
  std::vector<ncclComm_t> groups_;
  std::vector<zsim::ProcessGroup> shapes_;
  bool aborted_ = false;
};

// Rank 0 creates the id; the rendezvous carries it to the others as bytes.
std::vector<std::uint8_t> new_unique_id_bytes();
ncclUniqueId unique_id_from_bytes(const std::vector<std::uint8_t>& bytes);  // throws DeviceError on a bad size

}  // namespace zrun
