// zrun's executor: runs the schedule's ops on this rank's GPU, the schedule being the only plan it follows.
// One CUDA stream per schedule stream, in program order; cross-stream deps become event waits (stream_waits);
// alloc / free go to the arenas (device_buffers); forward / backward / recompute go to the model with the
// weights, gradients and activations the op's `uses` name; collectives are one NCCL call each on the
// communicator of their group; the GPU optimizer is kernels/' fused Adam. ZeRO-Offload: CPU ops (kernels/' CPU
// Adam, the fp32 conversion of gradients copied down, NVMe transfers) run as host functions in the order of their
// stream (host_ops), the optimizer state on the NVMe tier lives in swap files (runtime/nvme). Every op runs under
// the watchdog and the fault injector. ZeRO++'s quantization ops run kernels/' qwZ / qgZ kernels (zeropp_ops); what is not built yet stops
// with an error naming the op.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/comm/communicators.hpp"
#include "runtime/comm/fault_injection.hpp"
#include "runtime/comm/watchdog.hpp"
#include "runtime/exec/device_buffers.hpp"
#include "runtime/exec/host_ops.hpp"
#include "runtime/exec/qgz_error.hpp"
#include "sim/schedule/stream_waits.hpp"
#include "runtime/memory/arena.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/synthetic_data.hpp"
#include "runtime/nvme/nvme_store.hpp"
#include "sim/plan/plan.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

struct ExecOptions {
  float lr = 2e-3f;
  float weight_decay = 0.0f;
  bool time_ops = false;        // per-op CUDA events (for --json / --trace / --csv)
  double op_timeout_s = 300;    // a step that does not finish in this time ends the job, naming the op
  std::string nvme_dir;         // NVMe offload: the directory of this rank's swap files
  std::string nvme_tag;         // makes the swap files' names unique ("r0.12345": rank and process id)
  bool qgz_error = false;       // measure qgZ's reduced gradients against an fp32 reduction (qgz_error.hpp)
  int cpu_adam_threads = 0;     // OpenMP threads of each CPU Adam op (cpu_threads.hpp); 0 = OpenMP's default
};

struct OpTime {
  double start_s = 0, end_s = 0;  // from the step's start
};

struct StepResult {
  double seconds = 0;             // GPU time of the step (first op start to last op end)
  double loss = 0;                // mean cross-entropy over the step's micro-steps and all ranks
  std::vector<OpTime> ops;        // by op id (only with time_ops; init ops 0)
  double qgz_error = -1;          // with ExecOptions::qgz_error: the step's relative error of qgZ's gradients
  double host_issue_s = 0;        // the issuing thread's wall time from the step's first op to its last, waits included
  std::vector<double> op_issue_s; // the issuing thread's wall time in each op, in step_ops() order (untimed steps)
};

class Executor {
 public:
  Executor(const zsim::Schedule& s, const zsim::Plan& plan, int rank, Communicators& comms, Arena& gpu, Arena& cpu,
           model::Model& model, Watchdog& dog, const FaultInjector& faults, ExecOptions o);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // The init phase: persistent buffers, then the weights (deterministic, by tensor) and the fp32 master copy.
  void run_init();
  // Every op of the step once: `step` numbers the samples (global sample index) and Adam's bias correction. With
  // `time_ops` (and ExecOptions::time_ops) every op is timed with CUDA events, which slow the step by 2-8% on the
  // suite's models (runtime/scripts/timing_events_overhead.sh); without, the step's two events only.
  StepResult run_step(std::int64_t step, bool time_ops = true);

  const std::vector<BufferMismatch>& buffer_mismatches() const { return buffers_.mismatches(); }
  const std::vector<zsim::OpId>& step_ops() const { return step_ops_; }  // the first step's ops, which run_step repeats
  zsim::Bytes executor_bytes() const { return own_bytes_; }  // tokens, loss slots (+ activations a schedule lacks)
  // This rank's fp32 master weights, sub-group after sub-group (what the optimizer holds, on whichever tier).
  std::vector<float> master_weights();
  const NvmeStore* nvme() const { return nvme_.get(); }
  // The swap files' bytes on disk by the category of the buffer each holds (NvmeStore::file_bytes: its pieces'
  // aligned extents). Every NVMe buffer is allocated at init and held for the run, so this is also the tier's peak.
  const std::map<zsim::MemCategory, zsim::Bytes>& nvme_file_bytes() const { return nvme_file_bytes_; }
  // With ExecOptions::qgz_error, after the last step: the relative error of qgZ's gradients summed over the steps
  // (-1 when there was no qgZ tensor). Every rank calls it (an all-reduce).
  double qgz_accumulated_error();

 private:
  void launch(const zsim::Op& op, cudaStream_t s);
  void run_compute(const zsim::Op& op, cudaStream_t s);
  void run_zeropp(const zsim::Op& op, cudaStream_t s);
  void run_model(const zsim::Op& op, cudaStream_t s);
  void run_optimizer(const zsim::Op& op, cudaStream_t s);
  void run_cpu_optimizer(const zsim::Op& op, cudaStream_t s);
  void run_nvme_copy(const zsim::Op& op, cudaStream_t s);
  void put_state(zsim::OpId alloc, const void* data, std::size_t bytes);  // init data into a buffer of any tier
  void run_collective(const zsim::Op& op, cudaStream_t s);
  void run_all_to_all(const zsim::Op& op, ncclComm_t comm, int n, cudaStream_t s);
  void run_copy(const zsim::Op& op, cudaStream_t s);
  bool batches_pieces(const zsim::Op& op) const;  // a torch.cat-like copy: fewer kernels than pieces
  void run_batched_copy(const zsim::Op& op, cudaStream_t s);
  void initialise_states();
  void wait_for_step_end(cudaEvent_t end);
  int rank_index(const zsim::Op& op) const;  // this rank's index in the op's group (a collective's, a copy's; else world)
  static bool timed(const zsim::Op& op);     // gets CUDA timing events (not alloc / free, which run on the host)

  const zsim::Schedule& s_;
  const zsim::Plan& plan_;
  const int rank_;
  Communicators& comms_;
  Arena& gpu_;
  Arena& cpu_;
  model::Model& model_;
  Watchdog& dog_;
  const FaultInjector& faults_;
  const ExecOptions o_;
  DeviceBuffers buffers_;
  zsim::StreamWaits waits_;
  std::vector<int> group_index_;               // by schedule group: this rank's index in it
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> dep_events_;        // by op id, for ops others wait for
  std::vector<cudaEvent_t> start_events_, end_events_;  // by op id, with time_ops
  bool timing_ = false;                                 // this step records them
  std::vector<zsim::OpId> step_ops_, init_ops_;
  model::SyntheticData data_;
  std::int32_t* tokens_ = nullptr;             // device [grad_accum][T]: this step's tokens, then targets
  std::int32_t* targets_ = nullptr;
  float* losses_ = nullptr;                    // device [grad_accum]
  void* act_grads_ = nullptr;                  // the backward's activation gradients, if the schedule has no buffer
  void* forward_work_ = nullptr;               // checkpointing: a forward working set, if the schedule has no buffer
  zsim::Bytes own_bytes_ = 0;
  std::int64_t step_ = 0;
  // Backward segments of one unit: the model computes the unit's whole backward at the first segment; gradients
  // of tensors that belong to later segments wait in temporaries, added in by those segments.
  std::vector<std::vector<void*>> pending_grads_;   // by unit: per tensor, a temporary or nullptr
  std::vector<char> unit_done_;                     // by unit: its backward ran in this micro-step
  std::vector<char> zero_on_alloc_;                 // by op id: an alloc whose buffer starts at zero
  std::map<void*, std::string> tmp_names_;          // temporary -> its arena name
  int micro_ = -1;
  int tmp_count_ = 0;
  HostOps host_;                                    // CPU ops queued on the streams
  std::unique_ptr<NvmeStore> nvme_;                 // the NVMe tier's swap files (NVMe offload only)
  std::map<zsim::OpId, int> nvme_file_;             // alloc op of tier nvme -> its file in nvme_
  std::map<zsim::MemCategory, zsim::Bytes> nvme_file_bytes_;  // the swap files' bytes by category
  std::unique_ptr<QgzErrorMeter> qgz_meter_;        // ExecOptions::qgz_error
  int world_group_ = -1;                            // the schedule's group of every rank
};

}  // namespace zrun
