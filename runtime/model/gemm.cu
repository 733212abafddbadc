#include "runtime/model/gemm.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"

#define ZR_LT_CHECK(call)                                                                                  \
  do {                                                                                                     \
    const cublasStatus_t st_ = (call);                                                                     \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                      \
      throw std::runtime_error(std::string("cuBLASLt error ") + std::to_string(static_cast<int>(st_)) +   \
                               " in " #call " at " __FILE__ ":" + std::to_string(__LINE__));               \
  } while (0)

namespace zrun::model {

namespace {
cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::fp32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp16: return CUDA_R_16F;
    default: throw std::invalid_argument("gemm: dtype must be fp32, bf16 or fp16");
  }
}
int alignment(const void* p) {  // largest power of two (<= 256) dividing the address
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int al = 256;
  while (al > 1 && a % al != 0) al >>= 1;
  return al;
}

// RAII holders for the descriptors of one call.
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, std::int64_t rows, std::int64_t cols, std::int64_t ld, int batch, std::int64_t stride) {
    ZR_LT_CHECK(cublasLtMatrixLayoutCreate(&h, t, rows, cols, ld));
    if (batch > 1) {
      ZR_LT_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      ZR_LT_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof(stride)));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
};
}  // namespace

Gemm::Gemm(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  ZR_LT_CHECK(cublasLtCreate(&handle_));
  ZK_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

void Gemm::run(const GemmCall& g, DType dt, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0) return;
  const cudaDataType_t t = cuda_type(dt);
  const void* c = g.c ? g.c : g.d;
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;

  cublasLtMatmulDesc_t desc = nullptr;
  ZR_LT_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  struct DescGuard { cublasLtMatmulDesc_t d; ~DescGuard() { cublasLtMatmulDescDestroy(d); } } guard{desc};
  ZR_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ZR_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (g.bias) {
    if (g.batch != 1) throw std::invalid_argument("gemm: bias epilogue needs batch 1");
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    ZR_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    ZR_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
    const cudaDataType_t bt = t;
    ZR_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  const Layout la(t, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a);
  const Layout lb(t, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b);
  const Layout lc(t, g.m, g.n, g.ldd, g.batch, g.stride_d);

  const int al_a = alignment(g.a), al_b = alignment(g.b), al_c = alignment(c), al_d = alignment(g.d);
  const int al = std::min(std::min(al_a, al_b), std::min(al_c, al_d));
  const Key key{static_cast<int>(dt), g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd, g.batch,
                g.bias != nullptr, c != g.d, al};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    cublasLtMatmulPreference_t pref = nullptr;
    ZR_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    struct PrefGuard { cublasLtMatmulPreference_t p; ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); } } pg{pref};
    ZR_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes_, sizeof(workspace_bytes_)));
    const uint32_t a32 = al_a, b32 = al_b, c32 = al_c, d32 = al_d;
    ZR_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, 4));
    ZR_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, 4));
    ZR_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c32, 4));
    ZR_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d32, 4));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    ZR_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc, la.h, lb.h, lc.h, lc.h, pref, 1, &res, &found));
    if (found == 0)
      throw std::runtime_error("gemm: cuBLASLt has no algorithm for m=" + std::to_string(g.m) + " n=" +
                               std::to_string(g.n) + " k=" + std::to_string(g.k));
    it = algos_.emplace(key, res.algo).first;
  }
  ZR_LT_CHECK(cublasLtMatmul(handle_, desc, &g.alpha, g.a, la.h, g.b, lb.h, &g.beta, c, lc.h, g.d, lc.h, &it->second,
                             workspace_, workspace_bytes_, stream));
}

// Row-major X [rows, in] is column-major X^T (in x rows, ld in); W [in, out] is W^T (out x in, ld out).
void linear_forward(Gemm& g, DType dt, const void* x, const void* w, const void* bias, const void* residual,
                    void* y, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t s) {
  GemmCall c;  // Y^T (out x rows) = W^T (out x in) X^T (in x rows)
  c.m = out, c.n = rows, c.k = in;
  c.a = w, c.lda = out;
  c.b = x, c.ldb = in;
  c.d = y, c.ldd = out;
  c.bias = bias;
  if (residual) c.c = residual, c.beta = 1.0f;
  g.run(c, dt, s);
}

void linear_backward_input(Gemm& g, DType dt, const void* dy, const void* w, void* dx, float beta,
                           std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t s) {
  GemmCall c;  // dX^T (in x rows) = W (in x out) dY^T (out x rows)
  c.trans_a = true;
  c.m = in, c.n = rows, c.k = out;
  c.a = w, c.lda = out;
  c.b = dy, c.ldb = out;
  c.d = dx, c.ldd = in;
  c.beta = beta;
  g.run(c, dt, s);
}

void linear_backward_weight(Gemm& g, DType dt, const void* x, const void* dy, void* dw, std::int64_t rows,
                            std::int64_t in, std::int64_t out, cudaStream_t s) {
  GemmCall c;  // dW^T (out x in) += dY^T (out x rows) X (rows x in)
  c.trans_b = true;
  c.m = out, c.n = in, c.k = rows;
  c.a = dy, c.lda = out;
  c.b = x, c.ldb = in;
  c.d = dw, c.ldd = out;
  c.beta = 1.0f;
  g.run(c, dt, s);
}

}  // namespace zrun::model
