#include "runtime/memory/memory_accounting.hpp"

#include "sim/report/human_units.hpp"

namespace zrun {
namespace {

template <class Map, class Key>
LivePeak find_or_zero(const Map& m, const Key& k) {
  const auto it = m.find(k);
  return it == m.end() ? LivePeak{} : it->second;
}

constexpr zsim::MemCategory kCategories[] = {zsim::MemCategory::params, zsim::MemCategory::grads,
                                             zsim::MemCategory::optimizer, zsim::MemCategory::activations,
                                             zsim::MemCategory::buffers};

}  // namespace

void MemoryAccounting::on_alloc(zsim::Tier t, zsim::MemCategory c, const std::string& d, Bytes bytes) {
  tiers_[t].add(bytes);
  categories_[{t, c}].add(bytes);
  details_[{t, c, d}].add(bytes);
}

void MemoryAccounting::on_free(zsim::Tier t, zsim::MemCategory c, const std::string& d, Bytes bytes) {
  tiers_[t].remove(bytes);
  categories_[{t, c}].remove(bytes);
  details_[{t, c, d}].remove(bytes);
}

LivePeak MemoryAccounting::tier(zsim::Tier t) const { return find_or_zero(tiers_, t); }

LivePeak MemoryAccounting::category(zsim::Tier t, zsim::MemCategory c) const {
  return find_or_zero(categories_, std::pair{t, c});
}

LivePeak MemoryAccounting::detail(zsim::Tier t, zsim::MemCategory c, const std::string& d) const {
  return find_or_zero(details_, std::tuple{t, c, d});
}

std::string MemoryAccounting::live_by_category(zsim::Tier t) const {
  std::string out;
  for (zsim::MemCategory c : kCategories) {
    if (!out.empty()) out += ", ";
    out += std::string(zsim::to_string(c)) + " " + zsim::human_bytes(category(t, c).live);
  }
  return out;
}

}  // namespace zrun
