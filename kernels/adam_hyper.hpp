// Hyper-parameters of one Adam/AdamW step, shared by the fused GPU Adam and the CPU Adam.
#pragma once
#include <cstdint>

namespace zk {

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool adamw = true;        // true: decoupled decay p -= lr*wd*p; false: L2, g += wd*p (torch.optim.Adam)
  float grad_scale = 1.0f;  // multiplies the incoming gradient first (e.g. 1/loss_scale)
  int64_t step = 1;         // 1-based step number, used for bias correction
};

}  // namespace zk
