#include "runtime/memory/arena.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/report/human_units.hpp"

namespace zrun {

using zsim::human_bytes;

Arena::Arena(zsim::Tier tier, Bytes capacity_bytes, MemoryBackend& backend, int rank, MemoryAccounting& accounting,
             Bytes alignment_bytes)
    : tier_(tier), backend_(backend), rank_(rank), accounting_(accounting), ranges_(capacity_bytes, alignment_bytes) {
  base_ = ranges_.capacity_bytes() > 0 ? backend_.reserve(ranges_.capacity_bytes()) : nullptr;
  if (ranges_.capacity_bytes() > 0 && base_ == nullptr)
    throw ArenaOutOfMemory(fmt::format("zrun: rank {}: cannot reserve the {} arena of {}", rank,
                                       zsim::to_string(tier), human_bytes(capacity_bytes)));
}

Arena::~Arena() {
  if (base_ == nullptr) return;
  reclaim(true);
  backend_.release(base_);
}

void Arena::reclaim(bool wait) {
  // Fences on one stream complete in the order they were recorded: once a stream's oldest pending free is still in
  // use, its later ones are too, and are not queried (a step's host runs far ahead of its GPU, so hundreds of frees
  // can be pending, and querying each at every allocation made an allocation's cost grow with them).
  std::vector<PendingFree> still;
  std::vector<StreamHandle> busy;  // streams whose oldest pending free is not done
  for (const PendingFree& p : pending_) {
    if (p.fence != 0) {
      const bool stream_busy = std::find(busy.begin(), busy.end(), p.stream) != busy.end();
      if (stream_busy || !backend_.fence_done(p.fence)) {
        if (!wait) {
          if (!stream_busy) busy.push_back(p.stream);
          still.push_back(p);
          continue;
        }
        backend_.wait_fence(p.fence);
      }
    }
    ranges_.release(p.offset);
  }
  pending_ = std::move(still);
}

std::byte* Arena::alloc(const std::string& name, zsim::MemCategory category, const std::string& detail, Bytes bytes,
                        const std::string& op_name, Bytes beyond_bytes) {
  if (live_.count(name))
    throw std::logic_error(fmt::format("zrun: rank {}: op '{}' allocates buffer '{}', which is already live", rank_,
                                       op_name, name));
  reclaim(false);
  const Bytes total = bytes + beyond_bytes;
  std::optional<Bytes> offset = ranges_.allocate(total);
  if (!offset && !pending_.empty()) {  // memory freed on a stream but maybe still in use: wait for it
    reclaim(true);
    offset = ranges_.allocate(total);
  }
  if (!offset)
    throw ArenaOutOfMemory(fmt::format(
        "zrun: rank {}: out of {} memory at op '{}': buffer '{}' ({}{}) needs {}; arena {} of which {} in use, "
        "largest free range {}; live by category: {}",
        rank_, zsim::to_string(tier_), op_name, name, zsim::to_string(category), detail.empty() ? "" : "/" + detail,
        human_bytes(total), human_bytes(ranges_.capacity_bytes()), human_bytes(ranges_.used_bytes()),
        human_bytes(ranges_.largest_free_bytes()), accounting_.live_by_category(tier_)));
  live_[name] = {*offset, bytes, beyond_bytes, category, detail};
  accounting_.on_alloc(tier_, category, detail, bytes);
  if (beyond_bytes > 0) accounting_.on_alloc(tier_, category, kBeyondSchedule, beyond_bytes);
  return base_ + *offset;
}

void Arena::free(const std::string& name, StreamHandle stream) {
  const auto it = live_.find(name);
  if (it == live_.end())
    throw std::logic_error(fmt::format("zrun: rank {}: free of buffer '{}', which is not live", rank_, name));
  const Buffer b = it->second;
  live_.erase(it);
  accounting_.on_free(tier_, b.category, b.detail, b.bytes);
  if (b.beyond_bytes > 0) accounting_.on_free(tier_, b.category, kBeyondSchedule, b.beyond_bytes);
  pending_.push_back({b.offset, backend_.record_fence(stream), stream});
}

std::byte* Arena::get(const std::string& name) const {
  const auto it = live_.find(name);
  if (it == live_.end()) throw std::logic_error(fmt::format("zrun: rank {}: buffer '{}' is not live", rank_, name));
  return base_ + it->second.offset;
}

}  // namespace zrun
