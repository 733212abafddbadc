#include "sim/scenario/deepspeed_leniency.hpp"

namespace zsim {

void ignore_what_deepspeed_ignores(Scenario& s, const LocateKey& locate, std::vector<std::string>& warnings) {
  ZeroConfig& z = s.zero;
  if (z.stage == 3) return;
  const ZeroConfig defaults;
  const std::string why = "a ZeRO stage 3 option: DeepSpeed accepts it at stage " + std::to_string(z.stage) +
                          " and ignores it (engine._configure_zero_optimizer gives it to the stage-3 optimizer "
                          "only), so zsim ignores it too";
  auto drop = [&](bool set, const char* key, auto& field, auto value) {
    if (!set) return;
    const std::string path = "deepspeed.zero_optimization." + std::string(key);
    const SourceLocation w = locate(path);
    const std::string at = w.file + (w.line > 0 ? ":" + std::to_string(w.line) + ":" + std::to_string(w.column) : "");
    warnings.push_back(at + ": warning: key '" + path + "' is " + why);
    field = value;
  };
  drop(z.zero_hpz_partition_size != defaults.zero_hpz_partition_size, "zero_hpz_partition_size",
       z.zero_hpz_partition_size, defaults.zero_hpz_partition_size);
  drop(z.zero_quantized_weights, "zero_quantized_weights", z.zero_quantized_weights, false);
  drop(z.zero_quantized_gradients, "zero_quantized_gradients", z.zero_quantized_gradients, false);
  drop(z.zeropp_loco_param.enabled, "zeropp_loco_param", z.zeropp_loco_param, defaults.zeropp_loco_param);
  drop(z.stage3_allgather_sequential, "stage3_allgather_sequential", z.stage3_allgather_sequential, false);
  drop(z.stage3_use_all_reduce_for_fetch_params, "stage3_use_all_reduce_for_fetch_params",
       z.stage3_use_all_reduce_for_fetch_params, false);
}

}  // namespace zsim
