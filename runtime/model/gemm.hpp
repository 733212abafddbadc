// The model's GEMMs on cuBLASLt with fp32 accumulation (and fp32 scale): a column-major general matmul
// with optional strided batch, bias epilogue and separate C input, plus the three row-major products of a
// linear layer (forward, input gradient, weight gradient). Algorithms are chosen once per shape and cached.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "runtime/model/dtype.hpp"

namespace zrun::model {

// Column-major, cuBLAS conventions: D[m x n] = alpha * op(A)[m x k] op(B)[k x n] + beta * C (+ bias[m]).
struct GemmCall {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr; std::int64_t lda = 0, stride_a = 0;
  const void* b = nullptr; std::int64_t ldb = 0, stride_b = 0;
  const void* c = nullptr;   // nullptr: C = D (only read when beta != 0)
  void* d = nullptr; std::int64_t ldd = 0, stride_d = 0;
  int batch = 1;
  const void* bias = nullptr;  // [m], added to every column of D (batch 1 only)
};

class Gemm {
 public:
  explicit Gemm(std::size_t workspace_bytes = 32u << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // All operands in dtype dt (fp32, bf16 or fp16); accumulation in fp32.
  void run(const GemmCall& g, DType dt, cudaStream_t stream);

  std::size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  // (dtype, trans_a, trans_b, m, n, k, lda, ldb, ldd, batch, bias, c != d, min alignment of a/b/c/d)
  using Key = std::tuple<int, int, int, long long, long long, long long, long long, long long, long long, int, int,
                         int, int>;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;
};

// Row-major linear layer: X [rows, in], W [in, out] (zsim's TensorShape rows x cols), Y [rows, out].
// Y = X W (+ bias) (+ residual, which may be Y itself).
void linear_forward(Gemm& g, DType dt, const void* x, const void* w, const void* bias, const void* residual,
                    void* y, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t s);
// dX = dY W^T (+ beta * dX: beta 1 accumulates into dX).
void linear_backward_input(Gemm& g, DType dt, const void* dy, const void* w, void* dx, float beta,
                           std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t s);
// dW += X^T dY.
void linear_backward_weight(Gemm& g, DType dt, const void* x, const void* dy, void* dw, std::int64_t rows,
                            std::int64_t in, std::int64_t out, cudaStream_t s);

}  // namespace zrun::model
