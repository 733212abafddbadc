// The exit codes of `zrun` (docs/runtime.md). A worker's code reaches the user through the launcher.
#pragma once

namespace zrun {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;         // a bug, or a CUDA/NCCL failure
inline constexpr int kExitBadInput = 2;         // bad arguments or scenario, cluster mismatch, does not fit
// 5: the watchdog ended the rank (runtime/comm/watchdog.hpp: kExitWatchdog)
// 6: an injected fault (runtime/comm/fault_injection.hpp: kExitInjectedFault)

}  // namespace zrun
