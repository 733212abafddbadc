// What one schedule op costs the simulated rank: a fixed part (compute time, or a collective's / copy's
// latency steps) followed by a flow of bytes over a route of shared links (rate set by max-min sharing).
// Pure mapping from op + cluster + rank links to work, via the cost models.
#pragma once
#include "cost_models/collective_cost.hpp"
#include "sim/engine/sim_options.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/topology/rank_links.hpp"

namespace zsim {

// Which kind of GPU kernel an op's fixed part is when it runs beside the compute stream (efficiency.beside_compute):
// a plain d2d copy run as a cudaMemcpyAsync per piece, a copy kernel (torch.cat, a cast, an add), a one-rank
// collective that moves data; none: not slowed by what runs beside it. link_collective: a collective among 2+ ranks,
// whose flow over the links (not a fixed part) runs slower beside the compute stream (efficiency.beside_compute).
enum class SideKind { none, memcpy, kernel, collective, link_collective };

struct OpWork {
  Seconds fixed_s = 0;        // runs first, on no shared link
  double flow_bytes = 0;      // then this many bytes at the rate the route's links give it
  FlowPath route;             // links and link bytes per flow byte
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;  // collectives only
  SideKind side = SideKind::none;
  // A forward, backward or recompute op's long kernels (its GEMM calls, flash attention's fused kernel), for the wait of
  // a side kernel issued beside it (efficiency.beside_compute_wait): their mean length (the kernel running when the op
  // has just started), and sum(L_i^2) / (2 fixed_s), the mean time to the end of the kernel running at a moment
  // uniform over the op (0: none).
  Seconds kernel_mean_s = 0;
  Seconds kernel_residual_s = 0;
};

// Maps one op. Collectives: latency_s (steps inside a node at NVLink latency, steps between nodes at
// InfiniBand latency) then bandwidth_bytes over the route: NVLink for groups on one node; for groups across nodes the
// NIC route carries the cross-node share (comm_volume.hpp: cross_node_bytes_per_gpu / bytes_sent_per_gpu),
// NVLink the rest, and the leaf uplink the part of the NIC traffic that leaves the leaf. Copies: PCIe
// latency then bytes over PCIe (pageable: 1/pageable_pcie_fraction link bytes per byte); NVMe reads and
// writes over the node's NVMe share; device copies (d2d) read and write their bytes in HBM (transfer_cost.hpp).
// A collective of a one-rank group: a device copy of its bytes (NCCL's one-rank path copies or averages the buffer).
// The program timed is rank 0's: a copy with a `rank` other than 0 costs nothing. Compute (GPU): forward,
// backward and recompute the GEMM time plus the memory-bound time of its hbm_bytes (separate kernels run one after
// the other), other kinds the roofline; bytes run at efficiency.hbm_for(kind): norm, softmax (eager attention's
// scores), cross_entropy (the head's loss), copy (embedding, d2d), adam, quantize, a backward op's norm, softmax,
// activation and cross_entropy bytes at their *_backward kind (which falls back to the forward kind's); plus efficiency.launch_us per
// kernel launch of the op (ComputeOp::kernel_launches) beyond the GEMM calls whose launch the GEMM model prices;
// CPU: Adam time; alloc/free: nothing.
// GPU compute with a measured GEMM model in the cluster (efficiency.gemm_model / gemm_model_fp32) runs its FLOPs
// at the model's efficiency for the GEMM shapes of its unit (cost_models/gemm_model.hpp), else at efficiency.gemm.
// A model fitted on attention's batched calls (GemmModel::attention_shapes) lists the unit's own GEMM calls too
// (ModelUnit::forward_gemms / backward_gemms: eager attention's core) and leaves the op's gemm_hbm_bytes, which its
// operand traffic counts, out of the memory-bound bytes.
// A forward, backward or recompute op's fused attention FLOPs (ComputeOp::fused_attention_flops: flash attention's
// core) run at efficiency.flash_attention.forward (forward, recompute) or .backward where the profile gives it and the
// run is 16-bit, the rest of its FLOPs at the GEMM efficiency above.
// Throws std::invalid_argument when an op needs a link or unit of zero capacity.
OpWork op_work(const Op& op, const Schedule& s, const ClusterSpec& c, const RankLinks& links, const SimOptions& o);

// The GEMMs of a GPU compute op under the schedule's model (each weight matrix of its unit, or of its layer for a
// recompute; with `core_calls` also the unit's own calls: eager attention's batched products).
std::vector<GemmShape> unit_gemms(const Op& op, const ScheduleModel& m, bool core_calls);

// The collective's input is where its output starts on rank 0 (an in-place call; no uses: false).
bool collective_in_place(const Op& op);

// A d2d copy's (input, output) use pairs: the pieces it copies (0 without uses).
int copy_use_pairs(const Op& op);

// A copy that adds into its output (an `output` use with access read_write: DeepSpeed's add_): a d2d one reads its
// destination too.
bool copy_adds(const Op& op);

// How a copy's pieces run, as zrun's executor runs them (runtime/exec/executor.cpp run_copy): a cast or an add is a
// kernel per piece; a plain d2d copy of fewer kernel launches than pieces a batched copy kernel per launch (a
// torch.cat); any other a cudaMemcpyAsync per piece (torch's copy_).
enum class CopyRun { memcpy_per_piece, batched, kernel_per_piece };
CopyRun copy_run(const Op& op);

// Fraction of a group's NIC traffic that also crosses its leaf's uplink (group on nodes 0..k-1):
// ring-like algorithms cross a leaf boundary once per leaf spanned (L/k of node-to-node hops); all_to_all
// sends uniformly to the other k-1 nodes, (k - nodes under rank 0's leaf)/(k-1) of them elsewhere.
double off_leaf_fraction(CollectiveKind kind, int nodes_spanned, int nodes_per_leaf);

}  // namespace zsim
