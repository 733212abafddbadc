#include "sim/schedule/stream_waits.hpp"

#include <algorithm>

namespace zsim {

std::size_t StreamWaits::total_waits() const {
  std::size_t n = 0;
  for (const auto& w : waits) n += w.size();
  return n;
}

StreamWaits stream_waits(const Schedule& s) {
  const std::size_t n_ops = s.ops.size(), n_streams = s.streams.size();
  StreamWaits out;
  out.waits.resize(n_ops);
  out.records_event.assign(n_ops, 0);
  // known[st][t]: the latest op of stream t that stream st is already ordered after (-1: none).
  // at[op]: what the op's stream knew when the op was launched (an op inherits its stream's knowledge).
  std::vector<std::vector<OpId>> known(n_streams, std::vector<OpId>(n_streams, -1));
  std::vector<std::vector<OpId>> at(n_ops);
  for (const zsim::Op& op : s.ops) {
    auto& mine = known[op.stream];
    std::vector<OpId> deps = op.deps;
    // Latest deps first: a wait for a later op of a stream implies its earlier ones.
    std::sort(deps.begin(), deps.end(), std::greater<>());
    for (OpId d : deps) {
      const int t = s.ops[d].stream;
      if (t == op.stream || d <= mine[t]) continue;
      out.waits[op.id].push_back(d);
      out.records_event[d] = 1;
      mine[t] = d;
      for (std::size_t u = 0; u < n_streams; ++u) mine[u] = std::max(mine[u], at[d][u]);
    }
    mine[op.stream] = op.id;
    at[op.id] = mine;
  }
  return out;
}

}  // namespace zsim
