// The cross-stream waits a CUDA executor issues for a schedule: for each op, the deps on other streams that
// are not already implied (by program order within the dep's stream, or by an earlier wait of the op's own
// stream), and which ops must therefore record an event. Pure; computed once per schedule.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zsim {

struct StreamWaits {
  std::vector<std::vector<OpId>> waits;  // by op id: ops (on other streams) to wait for before launching
  std::vector<char> records_event;             // by op id: some later op waits for it
  std::size_t total_waits() const;
};

StreamWaits stream_waits(const Schedule& s);

}  // namespace zsim
