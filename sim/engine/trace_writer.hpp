// Per-op timing outputs: Chrome trace JSON (opens in Perfetto / chrome://tracing: a process per rank,
// a thread per stream, one "X" event per op named as in the schedule, bytes and FLOPs in args) and CSV
// (one row per op). Ranks are symmetric, so rank 0 is written with a note saying so.
#pragma once
#include <ostream>

#include "sim/engine/simulate.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

void write_chrome_trace(std::ostream& out, const Schedule& s, const TimingResult& t);

// Header: id,name,kind,phase,stream,start_s,end_s,bytes,flops. Names are quoted when they need it.
void write_op_csv(std::ostream& out, const Schedule& s, const TimingResult& t);

// The byte count shown for an op: collective size, copy bytes, alloc/free bytes, compute HBM bytes.
Bytes op_bytes(const Op& op);

}  // namespace zsim
