#include "runtime/exec/qgz_error.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "runtime/comm/check.hpp"

namespace zrun {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 1024));
}

__device__ double block_sum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  return part[0];
}

// d = got - ref; err_sum += d, ref_sum += ref; sums[0] += d^2, sums[1] += ref^2.
template <class T>
__global__ void compare_kernel(const T* got, const float* ref, float* err_sum, float* ref_sum, std::int64_t n,
                               double* sums) {
  double e2 = 0, r2 = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float r = ref[i], d = static_cast<float>(got[i]) - r;
    err_sum[i] += d;
    ref_sum[i] += r;
    e2 += static_cast<double>(d) * d;
    r2 += static_cast<double>(r) * r;
  }
  e2 = block_sum(e2);
  r2 = block_sum(r2);
  if (threadIdx.x == 0) {
    atomicAdd(&sums[0], e2);
    atomicAdd(&sums[1], r2);
  }
}

// sums[2] += sum err_sum^2, sums[3] += sum ref_sum^2.
__global__ void norms_kernel(const float* err_sum, const float* ref_sum, std::int64_t n, double* sums) {
  double e2 = 0, r2 = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    e2 += static_cast<double>(err_sum[i]) * err_sum[i];
    r2 += static_cast<double>(ref_sum[i]) * ref_sum[i];
  }
  e2 = block_sum(e2);
  r2 = block_sum(r2);
  if (threadIdx.x == 0) {
    atomicAdd(&sums[2], e2);
    atomicAdd(&sums[3], r2);
  }
}

}  // namespace

QgzErrorMeter::QgzErrorMeter(ElemType train, std::function<void*(std::size_t)> alloc)
    : train_(train), alloc_(std::move(alloc)) {
  sums_ = static_cast<double*>(alloc_(4 * sizeof(double)));
  ZRUN_CUDA_CHECK(cudaMemset(sums_, 0, 4 * sizeof(double)));
}

QgzErrorMeter::Tensor& QgzErrorMeter::tensor(std::pair<int, int> id, std::int64_t partition) {
  Tensor& t = tensors_[id];
  if (!t.ref) {
    t.partition = partition;
    t.ref = static_cast<float*>(alloc_(3 * partition * sizeof(float)));
    t.err_sum = t.ref + partition;
    t.ref_sum = t.err_sum + partition;
    ZRUN_CUDA_CHECK(cudaMemset(t.ref, 0, 3 * partition * sizeof(float)));
  }
  return t;
}

void QgzErrorMeter::begin_step(cudaStream_t s) {
  ZRUN_CUDA_CHECK(cudaMemsetAsync(sums_, 0, 2 * sizeof(double), s));
  compared_ = false;
}

void QgzErrorMeter::reference(std::pair<int, int> id, const void* grad, std::int64_t n, ncclComm_t world,
                              int world_size, cudaStream_t s) {
  if (n > scratch_n_) {  // grows to the largest qgZ tensor once (the arena keeps the smaller one)
    scratch_ = static_cast<float*>(alloc_(n * sizeof(float)));
    scratch_n_ = n;
  }
  Tensor& t = tensor(id, n / world_size);
  convert(train_, ElemType::fp32, scratch_, grad, n, s);
  ZRUN_NCCL_CHECK(ncclReduceScatter(scratch_, t.ref, t.partition, ncclFloat32, ncclAvg, world, s));
}

void QgzErrorMeter::compare(std::pair<int, int> id, const void* reduced, std::int64_t partition, cudaStream_t s) {
  Tensor& t = tensor(id, partition);
  if (train_ == ElemType::bf16)
    compare_kernel<<<blocks_for(partition), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(reduced), t.ref,
                                                              t.err_sum, t.ref_sum, partition, sums_);
  else
    compare_kernel<<<blocks_for(partition), kThreads, 0, s>>>(static_cast<const __half*>(reduced), t.ref, t.err_sum,
                                                              t.ref_sum, partition, sums_);
  ZRUN_CUDA_CHECK(cudaGetLastError());
  compared_ = true;
}

double QgzErrorMeter::ratio(double* sums, ncclComm_t world, cudaStream_t s) {
  ZRUN_NCCL_CHECK(ncclAllReduce(sums, sums, 2, ncclFloat64, ncclSum, world, s));
  double h[2];
  ZRUN_CUDA_CHECK(cudaMemcpyAsync(h, sums, sizeof h, cudaMemcpyDeviceToHost, s));
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  return h[1] > 0 ? std::sqrt(h[0] / h[1]) : -1;
}

double QgzErrorMeter::step_error(ncclComm_t world, cudaStream_t s) {
  if (!compared_) return -1;
  return ratio(sums_, world, s);
}

double QgzErrorMeter::accumulated_error(ncclComm_t world, cudaStream_t s) {
  if (tensors_.empty()) return -1;
  ZRUN_CUDA_CHECK(cudaMemsetAsync(sums_ + 2, 0, 2 * sizeof(double), s));
  for (const auto& [id, t] : tensors_)
    norms_kernel<<<blocks_for(t.partition), kThreads, 0, s>>>(t.err_sum, t.ref_sum, t.partition, sums_);
  ZRUN_CUDA_CHECK(cudaGetLastError());
  return ratio(sums_ + 2, world, s);
}

}  // namespace zrun
