// Which allocations a runtime fills with zeros as it makes them: on the GPU, the buffers that backward accumulates
// into (gradients and reduction buckets), the reduce-scatter interleave buffer (its padding) and the stage-3
// all-reduce fetch buffer (torch.zeros: each rank fills only its slots of the sum). zrun's executor issues a
// cudaMemsetAsync for each; zsim's host model prices that call. Pure.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zsim {

// By op id: 1 where the op is an alloc whose buffer starts at zero.
std::vector<char> zeroed_allocs(const Schedule& s);

}  // namespace zsim
