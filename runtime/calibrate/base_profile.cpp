#include "runtime/calibrate/measurements.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zrun::calibrate {

zsim::ClusterSpec load_profile_cluster(const std::string& name, const std::string& extra_dir) {
  // A scenario that names the profile, read as zsim reads any: the profile's own checks apply.
  zsim::LoadOptions o;
  if (!extra_dir.empty()) o.profile_dirs.push_back(extra_dir);
  const std::string text = "model: {preset: llama2-7b}\ntraining: {micro_batch: 1, seq_len: 128}\ncluster: {profile: " +
                           name + ", nodes: 1}\n";
  return zsim::parse_scenario(text, "<zrun calibrate: profile " + name + ">", o).cluster;
}

}  // namespace zrun::calibrate
