#include "runtime/exec/host_ops.hpp"

#include <exception>
#include <memory>

#include "runtime/comm/check.hpp"

namespace zrun {

struct HostOps::Task {
  HostOps* self;
  std::string op;
  std::function<void()> fn;
};

void HostOps::enqueue(cudaStream_t s, const std::string& op_name, std::function<void()> fn) {
  auto t = std::make_unique<Task>(Task{this, op_name, std::move(fn)});
  ZRUN_CUDA_CHECK(cudaLaunchHostFunc(s, &HostOps::run, t.get()));
  t.release();  // run() deletes it
}

void CUDART_CB HostOps::run(void* p) {
  std::unique_ptr<Task> t(static_cast<Task*>(p));
  if (t->self->error()) return;  // an earlier host op failed: the step's results are void, skip the work
  try {
    t->fn();
  } catch (const std::exception& e) {
    const std::string what = e.what();  // NVMe errors name the op themselves
    std::lock_guard<std::mutex> l(t->self->mu_);
    if (!t->self->error_)
      t->self->error_ = what.find("'" + t->op + "'") != std::string::npos ? what : "op '" + t->op + "': " + what;
  } catch (...) {
    std::lock_guard<std::mutex> l(t->self->mu_);
    if (!t->self->error_) t->self->error_ = "op '" + t->op + "': unknown error";
  }
}

std::optional<std::string> HostOps::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

}  // namespace zrun
