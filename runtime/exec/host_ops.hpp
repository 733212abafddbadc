// The schedule's CPU work (CPU Adam, the fp32 conversion of gradients copied down, NVMe transfers) run in stream
// order: each piece is a host function queued on the CUDA stream of its schedule stream (cudaLaunchHostFunc), so
// cross-stream deps stay CUDA events both ways and the executor launches CPU ops like any other. A host function
// that throws records the first error (naming the op); the ones after it are skipped, the step runs to its end and
// the executor then throws that error.
#pragma once
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>

namespace zrun {

class HostOps {
 public:
  // Runs `fn` on a host thread after the work queued on `s` so far, before the work queued after it.
  void enqueue(cudaStream_t s, const std::string& op_name, std::function<void()> fn);
  // The first failure, "op 'NAME': what", if any.
  std::optional<std::string> error() const;

 private:
  struct Task;
  static void CUDART_CB run(void* task);
  mutable std::mutex mu_;
  std::optional<std::string> error_;
};

}  // namespace zrun
