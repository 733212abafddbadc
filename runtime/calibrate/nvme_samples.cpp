#include "runtime/calibrate/nvme_samples.hpp"

#include "runtime/calibrate/fit.hpp"
#include "sim/scenario/scenario.hpp"

namespace zrun::calibrate {

void add_nvme_figures(const NvmeSamples& s, Measurements& m) {
  if (!s.error.empty() || s.at_s.empty()) return;
  m.nvme_path = s.path;
  m.nvme_direct = s.direct;
  m.nvme_moments = static_cast<int>(s.at_s.size());
  m.nvme_moments_apart_s = s.at_s.back() - s.at_s.front();
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    if (s.write_s[i].empty() || s.read_s[i].empty()) continue;
    const double bytes = static_cast<double>(s.sizes[i]);
    const SizeSample w{bytes, median(s.write_s[i])}, r{bytes, median(s.read_s[i])};
    if (s.sizes[i] <= zsim::kNvmeRequestBytes) m.nvme_write_one.push_back(w), m.nvme_read_one.push_back(r);
    if (s.sizes[i] >= zsim::kNvmeRequestBytes) m.nvme_write.push_back(w), m.nvme_read.push_back(r);
  }
}

}  // namespace zrun::calibrate
