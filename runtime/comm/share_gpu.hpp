// --share-gpu (zrun and zrun calibrate): every rank on GPU 0, for checks, not timings. NCCL refuses two ranks of one
// host on one GPU ("Duplicate GPU detected"), so each rank is a host of its own and they talk over the loopback.
#pragma once

namespace zrun {

// Sets NCCL_HOSTID to one of this rank's own, and NCCL's socket transport on the loopback (a variable the user set is
// kept, but for NCCL_HOSTID). Call before the first NCCL call.
void share_gpu_environment(int rank);

}  // namespace zrun
