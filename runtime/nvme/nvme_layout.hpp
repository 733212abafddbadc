// The NVMe files a schedule needs on one rank: for every alloc of tier `nvme`, the ranges its ops' uses read and
// write (an offloaded optimizer's sub-groups), which become the file's aligned extents (nvme_store.hpp).
#pragma once
#include <map>
#include <vector>

#include "runtime/nvme/nvme_store.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

std::map<zsim::OpId, std::vector<NvmeRange>> nvme_ranges(const zsim::Schedule& s);
// What the files of one rank take on disk.
zsim::Bytes nvme_bytes_per_rank(const zsim::Schedule& s);

}  // namespace zrun
