// The resolved Scenario as JSON (every field, the names of the scenario keys), for `zsim --json` until
// the report is wired in, and for the report to embed what it was computed from.
#pragma once
#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.hpp"

namespace zsim {

// {"model": {...}, "training": {...}, "cluster": {...}, "zero_optimization": {...}, "warnings": [...]}
nlohmann::ordered_json scenario_to_json(const Scenario& s);

const char* to_string(Precision p);
const char* to_string(Checkpointing c);
const char* to_string(MlpKind m);
const char* to_string(OffloadDevice d);

}  // namespace zsim
