#include "runtime/comm/communicators.hpp"

#include <cstring>

#include <fmt/format.h>

#include "runtime/comm/check.hpp"
#include "runtime/comm/group_split.hpp"

namespace zrun {

Communicators::Communicators(int rank, int world_size, int gpus_per_node, const ncclUniqueId& id,
                             const std::vector<zsim::ProcessGroup>& groups)
    : rank_(rank), shapes_(groups) {
  ZRUN_NCCL_CHECK(ncclCommInitRank(&world_, world_size, id, rank));
  for (const zsim::ProcessGroup& g : groups) {
    const SplitColorKey ck = split_color_key(rank, g, world_size, gpus_per_node);
    ncclComm_t comm = nullptr;
    ZRUN_NCCL_CHECK(ncclCommSplit(world_, ck.color, ck.key, &comm, nullptr));
    int size = 0;
    ZRUN_NCCL_CHECK(ncclCommCount(comm, &size));
    if (size != g.size)
      throw DeviceError(fmt::format("zrun: rank {}: communicator of group '{}' has {} ranks, the schedule says {}", rank,
                                    g.name, size, g.size));
    groups_.push_back(comm);
  }
}

Communicators::~Communicators() {
  if (aborted_) return;
  for (ncclComm_t c : groups_) ncclCommDestroy(c);
  if (world_) ncclCommDestroy(world_);
}

std::optional<std::string> Communicators::poll_async_error() const {
  const auto check = [](ncclComm_t c, const std::string& name) -> std::optional<std::string> {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &async);
    if (r != ncclSuccess) return fmt::format("ncclCommGetAsyncError on '{}' failed: {}", name, ncclGetErrorString(r));
    if (async != ncclSuccess && async != ncclInProgress)
      return fmt::format("NCCL async error on communicator '{}': {}", name, ncclGetErrorString(async));
    return std::nullopt;
  };
  if (auto e = check(world_, "world")) return e;
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (auto e = check(groups_[i], shapes_[i].name)) return e;
  return std::nullopt;
}

void Communicators::abort_all() {
  aborted_ = true;
  for (ncclComm_t c : groups_) ncclCommAbort(c);
  if (world_) ncclCommAbort(world_);
}

WatchdogHooks Communicators::watchdog_hooks() {
  WatchdogHooks h;
  h.poll_error = [this] { return poll_async_error(); };
  h.abort = [this] { abort_all(); };
  return h;
}

void Communicators::all_reduce_sum(float* data, std::size_t count, int index, cudaStream_t stream) const {
  ZRUN_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, group(index), stream));
}

std::vector<std::uint8_t> new_unique_id_bytes() {
  ncclUniqueId id;
  ZRUN_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<std::uint8_t> bytes(sizeof id);
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

ncclUniqueId unique_id_from_bytes(const std::vector<std::uint8_t>& bytes) {
  ncclUniqueId id;
  if (bytes.size() != sizeof id)
    throw DeviceError(fmt::format("zrun: the rendezvous carried {} bytes, an ncclUniqueId has {}", bytes.size(),
                                  sizeof id));
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

}  // namespace zrun
