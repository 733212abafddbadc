// Live and peak bytes of the buffers a rank holds, by tier, by category and by (category, detail), as
// zsim's memory walk counts them (sim/report/memory_walk), so measured and predicted peaks line up.
// Counts the schedule's sizes (not the arena's rounding); the arena reports its own overhead.
#pragma once
#include <map>
#include <tuple>
#include <string>
#include <utility>

#include "sim/schedule/schedule.hpp"

namespace zrun {

using zsim::Bytes;

struct LivePeak {
  Bytes live = 0;
  Bytes peak = 0;
  void add(Bytes b) {
    live += b;
    if (live > peak) peak = live;
  }
  void remove(Bytes b) { live -= b; }
};

class MemoryAccounting {
 public:
  void on_alloc(zsim::Tier tier, zsim::MemCategory category, const std::string& detail, Bytes bytes);
  void on_free(zsim::Tier tier, zsim::MemCategory category, const std::string& detail, Bytes bytes);

  LivePeak tier(zsim::Tier t) const;
  LivePeak category(zsim::Tier t, zsim::MemCategory c) const;
  LivePeak detail(zsim::Tier t, zsim::MemCategory c, const std::string& detail) const;

  // "params 1.2 GiB, grads 0 B, ..." : the live bytes of every category of the tier.
  std::string live_by_category(zsim::Tier t) const;

 private:
  std::map<zsim::Tier, LivePeak> tiers_;
  std::map<std::pair<zsim::Tier, zsim::MemCategory>, LivePeak> categories_;
  std::map<std::tuple<zsim::Tier, zsim::MemCategory, std::string>, LivePeak> details_;
};

}  // namespace zrun
