// The kinds of collective, shared by the schedule (sim/schedule) and the cost models (cost_models/), which sit
// below it and know nothing else of sim/.
#pragma once

namespace zsim {

enum class CollectiveKind { all_gather, reduce_scatter, all_reduce, all_to_all, broadcast, reduce };

}  // namespace zsim
