// Collective cost models: alpha-beta (latency + bandwidth) times of NCCL-style algorithms, and the
// nccl-tests bus-bandwidth factors that relate a collective's "size" to the bytes its busiest link carries.
#pragma once
#include <utility>
#include <vector>

#include "sim/common/collective_kind.hpp"
#include "sim/common/units.hpp"

namespace zsim {

// One link class seen by a collective: per-message latency and per-GPU bus bandwidth (one direction).
struct AlphaBeta {
  Seconds latency_s = 0;
  double bytes_per_s = 0;
};

enum class CollectiveAlgorithm { ring, tree, pairwise };

// A group spread over nodes: per-step latency on a step inside a node (NVLink) and on a step that crosses
// nodes (network), and the per-GPU bus bandwidth the collective gets.
struct CollectiveLink {
  Seconds intra_latency_s = 0;
  Seconds inter_latency_s = 0;
  double bytes_per_s = 0;
};

// Latency-bound steps of an algorithm on n ranks spread over k nodes (n/k per node), split into steps that
// stay inside a node and steps that cross nodes, as NCCL's tuning model counts them
// (src/graph/tuning.cc: a ring pass has n-1 steps of which k-1 cross nodes; a tree all_reduce climbs the
// node-local chain and then log2 k network levels, up and down):
//   ring all_gather / reduce_scatter / broadcast / reduce: intra n-k, inter k-1;  ring all_reduce: twice that;
//   tree all_reduce: intra 2(n/k - 1), inter 2 ceil(log2 k);  pairwise all_to_all: intra n/k - 1, inter n - n/k.
struct LatencySteps {
  int intra = 0;
  int inter = 0;
  int total() const { return intra + inter; }
};
LatencySteps latency_steps(CollectiveKind kind, CollectiveAlgorithm algo, int n, int k);

// nccl-tests (doc/PERFORMANCE.md) busbw = algbw * factor, algbw = size / time:
//   all_gather, reduce_scatter, all_to_all: (n-1)/n; all_reduce: 2(n-1)/n; broadcast, reduce: 1.
double busbw_factor(CollectiveKind kind, int n);

// Bytes each GPU's busiest link carries for one collective of nccl-tests "size" S on n ranks:
// S * busbw_factor (so time = bus_bytes / busbw). Not rounded.
double bus_bytes(CollectiveKind kind, double size_bytes, int n);

// Number of latency-bound steps of the algorithm on a flat group (every rank its own node; the alpha
// multiplier): ring all_gather / reduce_scatter / broadcast / reduce (pipelined): n-1; ring all_reduce: 2(n-1);
// tree all_reduce: 2 ceil(log2 n); pairwise all_to_all: n-1. A group of one rank: 0.
int latency_steps(CollectiveKind kind, CollectiveAlgorithm algo, int n);

// intra x intra_latency + inter x inter_latency for latency_steps(kind, algo, n, k).
Seconds latency_s(CollectiveKind kind, CollectiveAlgorithm algo, int n, int k, const CollectiveLink& link);

// Bandwidth term in bytes (to be divided by the bus bandwidth): ring / pairwise forms = bus_bytes;
// tree all_reduce = 2 S (reduce up the tree, then broadcast down, pipelined; each rank sends S each way).
double bandwidth_bytes(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n);

// The algorithm NCCL-like selection uses: all_reduce picks the faster of ring and tree for this size
// (tree wins only in the small-message, latency-bound regime); all_to_all is pairwise; the rest ring.
CollectiveAlgorithm choose_algorithm(CollectiveKind kind, double size_bytes, int n, AlphaBeta link);

// Time of one collective with a given algorithm: latency_steps * alpha + bandwidth_bytes / B.
// E.g. ring all_gather of S over n: (n-1)(alpha + S/(n B)).
Seconds collective_s(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n, AlphaBeta link);

// Time with the algorithm choose_algorithm picks.
Seconds collective_s(CollectiveKind kind, double size_bytes, int n, AlphaBeta link);

// The same on a group of n ranks over k nodes: latency_s(...) + bandwidth_bytes / link.bytes_per_s, and the
// algorithm choice made with it. With k = n and equal latencies these are the flat forms above.
Seconds collective_s(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n, int k,
                     const CollectiveLink& link);
CollectiveAlgorithm choose_algorithm(CollectiveKind kind, double size_bytes, int n, int k, const CollectiveLink& link);

// Hierarchical forms (ZeRO++): an intra-node step on r ranks over NVLink followed by an inter-node step on
// k ranks (one per node) over InfiniBand.
// all_to_all (qgZ): intra all_to_all of S over r, then inter all_to_all of S over k (the reduced data is
// re-quantized to the same size in DeepSpeed's all_to_all_quant_reduce; the caller passes sizes).
Seconds hierarchical_all_to_all_s(double intra_size_bytes, int r, AlphaBeta nvlink, double inter_size_bytes,
                                  int k, AlphaBeta ib);
// all_gather: inter-node all_gather of S/r over k ranks, then intra-node all_gather of S over r ranks.
Seconds hierarchical_all_gather_s(double size_bytes, int r, AlphaBeta nvlink, int k, AlphaBeta ib);

// The bus bandwidth, bytes/s, of a collective of `size_bytes` from a kind's measured (bytes, bus GB/s) points, sorted
// by size (a profile's efficiency.nvlink_busbw): interpolated linearly in log size and log rate between the two measured
// sizes around it, the nearest measured figure beyond them. Throws std::invalid_argument on no points or a rate that is
// not positive.
double interpolated_busbw(const std::vector<std::pair<double, double>>& bytes_GBps, double size_bytes);

const char* to_string(CollectiveAlgorithm);

}  // namespace zsim
