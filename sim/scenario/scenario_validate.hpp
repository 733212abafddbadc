// Range and consistency checks of a resolved Scenario (0 GPUs, stage outside 0-3, hpZ not dividing the
// node, ZeRO++ without stage 3, ...). Pure: where a key was written comes from the caller's lookup.
#pragma once
#include <functional>
#include <string>

#include "sim/common/error.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

using LocateKey = std::function<SourceLocation(const std::string& dotted_path)>;

// Sanity limits, far above real setups, that keep downstream byte and element counts (parameters x 16
// bytes, micro batch x tokens x hidden x layers) inside 64 bits.
inline constexpr std::int64_t kMaxLayers = 16'384;
inline constexpr std::int64_t kMaxHidden = 1 << 20;
inline constexpr std::int64_t kMaxVocab = 1 << 24;
inline constexpr std::int64_t kMaxSeqLen = 1 << 24;
inline constexpr std::int64_t kMaxMicroBatch = 1 << 16;
inline constexpr std::int64_t kMaxGradAccum = 1 << 16;
inline constexpr std::int64_t kMaxTokensPerMicroBatch = 1 << 27;  // micro_batch x seq_len
inline constexpr int kMaxNodes = 1 << 16;
inline constexpr int kMaxGpusPerNode = 1024;

// Each throws InputError (located by `locate`) at the first violated rule of its part.
void validate_model(const ModelSpec& m, const LocateKey& locate);
void validate_cluster(const ClusterSpec& c, const LocateKey& locate);
void validate_training(const TrainingSpec& t, const ClusterSpec& c, const LocateKey& locate);
// All parts, then the ZeRO block and the rules that span parts.
void validate_scenario(const Scenario& s, const LocateKey& locate);

// Without locations (scenarios built in code): messages carry the key path only.
void validate_scenario(const Scenario& s);

}  // namespace zsim
