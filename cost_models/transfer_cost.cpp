#include "cost_models/transfer_cost.hpp"

#include <stdexcept>

namespace zsim {

double pcie_bytes_per_s(double pcie_GBps, bool pinned, double pageable_fraction) {
  const double r = GBps_to_bytes_per_s(pcie_GBps) * (pinned ? 1.0 : pageable_fraction);
  if (!(r > 0)) throw std::invalid_argument("non-positive PCIe bandwidth");
  return r;
}

Seconds pcie_copy_s(Bytes bytes, double pcie_GBps, Seconds latency_s, bool pinned, double pageable_fraction) {
  if (bytes <= 0) return 0;
  return latency_s + static_cast<double>(bytes) / pcie_bytes_per_s(pcie_GBps, pinned, pageable_fraction);
}

Seconds nvme_s(Bytes bytes, double GBps) {
  if (bytes <= 0) return 0;
  if (!(GBps > 0)) throw std::invalid_argument("non-positive NVMe bandwidth");
  return static_cast<double>(bytes) / GBps_to_bytes_per_s(GBps);
}

Seconds device_copy_s(Bytes bytes, double hbm_GBps, double hbm_efficiency) {
  if (bytes <= 0) return 0;
  const double rate = GBps_to_bytes_per_s(hbm_GBps) * hbm_efficiency;
  if (!(rate > 0)) throw std::invalid_argument("non-positive HBM bandwidth for a device copy");
  return 2.0 * static_cast<double>(bytes) / rate;
}

}  // namespace zsim
