// qgZ's reduced gradients against an fp32 reduction of the same gradients (issue 14: how far quantization moves the
// gradient, and how much LoCo's error feedback takes back). For every qgZ tensor, at its quantize the meter reduce-
// scatters the bucket's 16-bit gradient in fp32 on the world communicator (the reference partition, averaged as qgZ
// averages); at the final dequant-reduce it compares qgZ's partition with it: the squared error and the squared
// reference of each step, and, over the run, the sum of the errors and the sum of the references per element, whose
// norms' ratio is the accumulated error (error feedback telescopes the per-step errors, so this is where LoCo shows).
// Device kernels and buffers beyond the schedule; only with ZRUN_QGZ_ERROR=1 (its collectives cost time).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/exec/elementwise.hpp"

namespace zrun {

class QgzErrorMeter {
 public:
  // `alloc` gives device memory that lives as long as the meter (the executor's arena).
  QgzErrorMeter(ElemType train, std::function<void*(std::size_t)> alloc);
  // Before a step: the step's sums start at zero.
  void begin_step(cudaStream_t s);
  // Tensor `id` (unit, tensor) of n elements, its 16-bit gradient at `grad`: its fp32 average over the world's ranks,
  // this rank's partition of n / world elements kept as the reference.
  void reference(std::pair<int, int> id, const void* grad, std::int64_t n, ncclComm_t world, int world_size,
                 cudaStream_t s);
  // qgZ's partition of tensor `id` (16-bit) against its reference.
  void compare(std::pair<int, int> id, const void* reduced, std::int64_t partition, cudaStream_t s);
  // After the step (synchronised): sqrt(sum of squared errors / sum of squared references) over every rank, for the
  // step; and over the run, of the summed errors against the summed references. -1 when no tensor was compared.
  double step_error(ncclComm_t world, cudaStream_t s);
  double accumulated_error(ncclComm_t world, cudaStream_t s);

 private:
  struct Tensor {
    float* ref = nullptr;       // this step's reference partition
    float* err_sum = nullptr;   // sum over steps of (qgZ - reference)
    float* ref_sum = nullptr;   // sum over steps of the reference
    std::int64_t partition = 0;
  };
  Tensor& tensor(std::pair<int, int> id, std::int64_t partition);
  double ratio(double* sums, ncclComm_t world, cudaStream_t s);

  ElemType train_;
  std::function<void*(std::size_t)> alloc_;
  std::map<std::pair<int, int>, Tensor> tensors_;
  float* scratch_ = nullptr;    // the fp32 gradient before the reference reduce-scatter
  std::int64_t scratch_n_ = 0;
  double* sums_ = nullptr;      // [step err^2, step ref^2, run err^2, run ref^2]
  bool compared_ = false;
};

}  // namespace zrun
