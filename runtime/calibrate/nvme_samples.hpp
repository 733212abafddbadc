// The NVMe tier's transfers as calibrate times them at each moment it samples the disk, and the figures the profile
// fits from them: each size's median over every moment's rounds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/calibrate/measurements.hpp"

namespace zrun::calibrate {

// Per size, every round's seconds at every moment. The GPU machine's virtual disk moves by a third between moments a
// minute apart (offload_bench disk-orders), so calibrate samples it before the GPU benchmarks and again after them.
struct NvmeSamples {
  std::vector<std::int64_t> sizes;                    // ascending; at most kNvmeRequestBytes: one request each
  std::vector<std::vector<double>> write_s, read_s;  // [size][round], every moment's rounds
  std::vector<double> at_s;                           // when each moment began (steady clock, seconds)
  std::string path;                                   // the files' directory
  bool direct = false;                                // O_DIRECT was used
  std::string error;                                  // why a moment failed ("" = none): no figures then
};

// Each size's median over all its rounds into m.nvme_read / nvme_write (1 MiB and up: many requests) and
// m.nvme_read_one / nvme_write_one (up to 1 MiB: one request), with the path, O_DIRECT, the number of moments and the
// seconds from the first to the last. Nothing where s holds no moment or a moment failed.
void add_nvme_figures(const NvmeSamples& s, Measurements& m);

}  // namespace zrun::calibrate
