// DeepSpeed's leniency: keys its config accepts at any stage but only stage 3 reads. Below stage 3 DeepSpeed
// runs as if they were absent, so zsim does the same and warns, instead of refusing the scenario (a sweep
// over stages with a ZeRO++ ds_config keeps all its points). Sources: docs/scenario.md ("Keys DeepSpeed
// ignores below stage 3").
#pragma once
#include <string>
#include <vector>

#include "sim/scenario/scenario.hpp"
#include "sim/scenario/scenario_validate.hpp"

namespace zsim {

// Below stage 3: resets hpZ, qwZ, qgZ (and LoCo), stage3_allgather_sequential and
// stage3_use_all_reduce_for_fetch_params to DeepSpeed's defaults, one warning per key that was set
// ("file:line:col: warning: key '...': ...", located by `locate`).
void ignore_what_deepspeed_ignores(Scenario& s, const LocateKey& locate, std::vector<std::string>& warnings);

}  // namespace zsim
