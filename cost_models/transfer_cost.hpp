// Host transfer cost models: PCIe copies between GPU and host memory (pinned versus pageable) and NVMe
// reads/writes, each latency + bytes over bandwidth.
#pragma once
#include "sim/common/units.hpp"

namespace zsim {

// Achieved PCIe bandwidth in bytes/s: pinned host memory gets pcie_GBps; pageable memory is staged
// through a pinned bounce buffer by the driver and gets pcie_GBps * pageable_fraction.
double pcie_bytes_per_s(double pcie_GBps, bool pinned, double pageable_fraction);

// latency + bytes / pcie_bytes_per_s(...).
Seconds pcie_copy_s(Bytes bytes, double pcie_GBps, Seconds latency_s, bool pinned, double pageable_fraction);

// bytes / (GBps * 1e9): one NVMe read or write at the device's sequential bandwidth.
Seconds nvme_s(Bytes bytes, double GBps);

// A device-local copy (cudaMemcpyAsync device to device, or a torch.cat kernel): it reads and writes
// every byte once in HBM, so 2 x bytes / (hbm_GBps * 1e9 * hbm_efficiency).
Seconds device_copy_s(Bytes bytes, double hbm_GBps, double hbm_efficiency);

}  // namespace zsim
