// zsim against DeepSpeed: a result of validate/deepspeed/harness.py is read with errors that name the file and the
// key; DeepSpeed's collectives map onto zsim's kinds and their bytes onto the schedule's convention; the comparison
// groups calls per (phase, op, group size) and lists what zsim does not model apart; a failed run is reported.
#include "validate/deepspeed_run.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/common/error.hpp"
#include "validate/validate_cli.hpp"

namespace zsim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json call(const char* phase, const char* op, int group, Bytes in, Bytes out, const char* dtype, int count) {
  return {{"phase", phase},      {"op", op},       {"group_size", group}, {"input_bytes", in},
          {"output_bytes", out}, {"dtype", dtype}, {"count", count},      {"async_count", 0}};
}

json rank_json(int rank, Bytes peak) {
  json mem = {{"peak_allocated", peak},
              {"peak_reserved", peak + 1000},
              {"steady_peak_allocated", peak},
              {"steady_peak_reserved", peak + 1000},
              {"after_forward", {{"allocated", 600}, {"reserved", 2000}}},
              {"after_backward", {{"allocated", 300}, {"reserved", 2000}}},
              {"after_step", {{"allocated", 200}, {"reserved", 2000}}},
              {"phase_peaks",
               {{"forward", {{"allocated", 700}, {"reserved", 2000}}},
                {"backward", {{"allocated", peak}, {"reserved", 2000}}},
                {"step", {{"allocated", 400}, {"reserved", 2000}}}}}};
  json calls = json::array({call("forward", "all_gather_into_tensor", 2, 100, 200, "bfloat16", 3),
                            call("forward", "_all_gather_base", 2, 50, 100, "bfloat16", 1),
                            call("backward", "reduce_scatter_tensor", 2, 1000, 500, "bfloat16", 1),
                            call("step", "all_gather_into_tensor", 2, 768, 1536, "bfloat16", 25),
                            call("step", "all_reduce", 2, 8, 8, "float64", 1)});
  return {{"rank", rank},
          {"status", "ok"},
          {"error", nullptr},
          {"failure_kind", nullptr},
          {"stage_reached", "done"},
          {"memory", mem},
          {"collectives", {{"step", 3}, {"calls", calls}, {"groups", {{"g0", {0, 1}}}}}},
          {"timing", {{"median_step_seconds", 0.25}}}};
}

// A two-rank stage-3 run as the harness writes it (the keys zsim reads, and a few it does not).
json ok_run() {
  return {
      {"format", "zsim.deepspeed_run"},
      {"version", 1},
      {"case",
       {{"name", "tiny-z3-w2"},
        {"dir", "validate/deepspeed/cases/tiny-z3-w2"},
        {"files", {{"model_config", "config.json"}, {"ds_config", "ds_config.json"}, {"scenario", "scenario.yaml"}}},
        {"world", 2},
        {"shared_gpu", true},
        {"ds_config", {{"zero_optimization", {{"stage", 3}}}}}}},
      {"versions", {{"deepspeed", "0.14.5"}, {"torch", "2.11.0"}, {"transformers", "5.17.0"}, {"gpu", "NVIDIA H200"}}},
      {"status", "ok"},
      {"error", nullptr},
      {"failure_kind", nullptr},
      {"expected_status", "ok"},
      {"as_expected", true},
      {"timed_out", false},
      {"ranks", json::array({rank_json(0, 1000), rank_json(1, 1100)})}};
}

std::string error_of(const json& j, const std::string& source = "run.json") {
  try {
    deepspeed_run_from_json(j, source);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DeepSpeedRun, ReadsTheHarnessResult) {
  const DeepSpeedRun r = deepspeed_run_from_json(ok_run(), "run.json");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.case_name, "tiny-z3-w2");
  EXPECT_EQ(r.case_dir, "validate/deepspeed/cases/tiny-z3-w2");
  EXPECT_EQ(r.scenario_file, "scenario.yaml");
  EXPECT_EQ(r.world, 2);
  EXPECT_TRUE(r.shared_gpu);
  EXPECT_EQ(r.deepspeed_version, "0.14.5");
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].steady_peak_allocated, 1100);
  EXPECT_EQ(r.ranks[0].steady_peak_reserved, 2000);
  EXPECT_EQ(r.ranks[0].points.at("after_forward").allocated, 600);
  EXPECT_EQ(r.ranks[0].phase_peaks.at("backward").allocated, 1000);
  EXPECT_EQ(r.ranks[0].collectives_step, 3);
  ASSERT_EQ(r.ranks[0].calls.size(), 5u);
  EXPECT_EQ(r.ranks[0].calls[3].count, 25);
  EXPECT_DOUBLE_EQ(r.ranks[0].median_step_s, 0.25);
  EXPECT_TRUE(is_deepspeed_run(ok_run()));
  EXPECT_FALSE(is_deepspeed_run(json{{"format", "zsim.report"}}));
}

TEST(DeepSpeedRun, AMissingOrMalformedKeyNamesTheFileAndTheKey) {
  json j = ok_run();
  j["ranks"][1]["memory"].erase("steady_peak_allocated");
  EXPECT_NE(error_of(j, "runs/x.json").find("runs/x.json"), std::string::npos);
  EXPECT_NE(error_of(j).find("key 'ranks[1].memory.steady_peak_allocated': missing"), std::string::npos) << error_of(j);

  j = ok_run();
  j["ranks"][0]["collectives"]["calls"][2]["group_size"] = "two";
  EXPECT_NE(error_of(j).find("key 'ranks[0].collectives.calls[2].group_size': must be an integer"), std::string::npos)
      << error_of(j);

  j = ok_run();
  j["ranks"][0]["memory"]["phase_peaks"].erase("step");
  EXPECT_NE(error_of(j).find("'ranks[0].memory.phase_peaks.step'"), std::string::npos) << error_of(j);

  j = ok_run();
  j["case"].erase("name");
  EXPECT_NE(error_of(j).find("'case.name'"), std::string::npos);

  j = ok_run();
  j["ranks"][0]["timing"].erase("median_step_seconds");
  EXPECT_NE(error_of(j).find("'ranks[0].timing.median_step_seconds'"), std::string::npos);

  j = ok_run();
  j["version"] = 2;
  EXPECT_NE(error_of(j).find("key 'version': 2 is not supported"), std::string::npos);

  j = ok_run();
  j["ranks"].erase(1);
  EXPECT_NE(error_of(j).find("key 'ranks': has 1 rank(s) where case.world is 2"), std::string::npos);

  j = ok_run();
  j["ranks"][1]["status"] = "failed";
  EXPECT_NE(error_of(j).find("'ranks[1].status': is \"failed\" in a run whose status is \"ok\""), std::string::npos);

  j = ok_run();
  j["ranks"][0]["memory"]["steady_peak_allocated"] = -5;
  EXPECT_NE(error_of(j).find("must be >= 0"), std::string::npos);
}

TEST(DeepSpeedRun, DeepSpeedsCollectiveNamesMapOntoZsimsKinds) {
  using K = CollectiveKind;
  const std::pair<const char*, K> names[] = {{"all_gather_into_tensor", K::all_gather},
                                             {"_all_gather_base", K::all_gather},
                                             {"all_gather", K::all_gather},
                                             {"all_gather_coalesced", K::all_gather},
                                             {"reduce_scatter_tensor", K::reduce_scatter},
                                             {"_reduce_scatter_base", K::reduce_scatter},
                                             {"reduce_scatter", K::reduce_scatter},
                                             {"all_reduce", K::all_reduce},
                                             {"all_reduce_coalesced", K::all_reduce},
                                             {"all_to_all_single", K::all_to_all},
                                             {"all_to_all", K::all_to_all},
                                             {"broadcast", K::broadcast},
                                             {"reduce", K::reduce}};
  for (const auto& [name, kind] : names) {
    ASSERT_TRUE(collective_kind_of_torch_op(name).has_value()) << name;
    EXPECT_EQ(*collective_kind_of_torch_op(name), kind) << name;
  }
  for (const char* none : {"gather", "scatter", "batch_isend_irecv", "send"})
    EXPECT_FALSE(collective_kind_of_torch_op(none).has_value()) << none;
  EXPECT_EQ(zsim_dtype_name("bfloat16"), "bf16");
  EXPECT_EQ(zsim_dtype_name("float32"), "fp32");
  EXPECT_EQ(zsim_dtype_name("float64"), "fp64");
  EXPECT_EQ(zsim_dtype_name("int8"), "int8");
}

// The harness gives a call's input (the rank's own part) and output (what it receives into); the schedule counts a
// collective as nccl-tests does (docs/schedule-format.md).
TEST(DeepSpeedRun, BytesConvertToTheSchedulesConvention) {
  using K = CollectiveKind;
  EXPECT_EQ(schedule_bytes_of_call(K::all_gather, 100, 400), 400);      // the gathered output (4 ranks)
  EXPECT_EQ(schedule_bytes_of_call(K::reduce_scatter, 400, 100), 400);  // the whole input
  EXPECT_EQ(schedule_bytes_of_call(K::all_reduce, 64, 64), 64);
  EXPECT_EQ(schedule_bytes_of_call(K::all_to_all, 256, 256), 256);  // the rank's send buffer
  EXPECT_EQ(schedule_bytes_of_call(K::broadcast, 32, 32), 32);
  EXPECT_EQ(schedule_bytes_of_call(K::reduce, 32, 32), 32);
}

DsPrediction prediction() {
  DsPrediction p;
  p.scenario = "scenario.yaml";
  p.gpu_peak = 1210;
  p.step_s = 0.1;
  p.phases.points = {{"after_forward", 660}, {"after_backward", 300}, {"after_step", 180}};
  p.phases.phase_peaks = {{"forward", 700}, {"backward", 1210}, {"step", 400}};
  // zsim: forward gathers as 2 calls of 250 bytes (DeepSpeed 4 calls: 3 x 200 + 1 x 100 = 700 bytes), the
  // reduce-scatter exact, the persistent gathers exact, no gradient-norm all_reduce.
  p.collectives = {{Phase::forward, CollectiveKind::all_gather, 2, 350, DType::bf16, 2},
                   {Phase::backward, CollectiveKind::reduce_scatter, 2, 1000, DType::bf16, 1},
                   {Phase::step, CollectiveKind::all_gather, 2, 1536, DType::bf16, 25}};
  return p;
}

TEST(DeepSpeedRun, TheComparisonGroupsCallsPerPhaseOpAndGroupAndListsWhatZsimDoesNotModel) {
  const DsValidation v = compare_deepspeed_run(deepspeed_run_from_json(ok_run(), "run.json"), prediction());
  // Peak: rank 0 measured 1000, the largest rank (1) 1100.
  EXPECT_EQ(v.peak_measured_rank0, 1000);
  EXPECT_EQ(v.peak_measured_max, 1100);
  EXPECT_EQ(v.peak_max_rank, 1);
  EXPECT_NEAR(v.peak_rel_error, 0.1, 1e-12);
  EXPECT_NEAR(v.peak_rel_error_rank0, 0.21, 1e-12);
  EXPECT_EQ(v.reserved_predicted, 0);
  EXPECT_EQ(v.reserved_measured_max, 2100);
  EXPECT_EQ(v.points.at("after_forward"), (std::pair<Bytes, Bytes>{660, 600}));
  EXPECT_EQ(v.phase_peaks.at("backward"), (std::pair<Bytes, Bytes>{1210, 1000}));
  ASSERT_EQ(v.collectives.size(), 3u);
  const DsCollectiveRow& fwd = v.collectives[0];
  EXPECT_EQ(fwd.phase, "forward");
  EXPECT_EQ(fwd.op, "all_gather");
  EXPECT_EQ(fwd.group_size, 2);
  EXPECT_EQ(fwd.predicted_calls, 2);
  EXPECT_EQ(fwd.measured_calls, 4);  // all_gather_into_tensor and _all_gather_base together
  EXPECT_EQ(fwd.predicted_bytes, 700);
  EXPECT_EQ(fwd.measured_bytes, 3 * 200 + 100);  // outputs
  EXPECT_FALSE(fwd.calls_match());
  EXPECT_TRUE(fwd.bytes_match());
  EXPECT_EQ(fwd.measured_ops, (std::vector<std::string>{"all_gather_into_tensor", "_all_gather_base"}));
  EXPECT_EQ(fwd.measured_dtypes, std::vector<std::string>{"bf16"});
  const DsCollectiveRow& bwd = v.collectives[1];
  EXPECT_EQ(bwd.phase, "backward");
  EXPECT_EQ(bwd.measured_bytes, 1000);  // the reduce-scatter's input
  EXPECT_TRUE(bwd.calls_match() && bwd.bytes_match());
  const DsCollectiveRow& step = v.collectives[2];
  EXPECT_EQ(step.phase, "step");
  EXPECT_EQ(step.measured_calls, 25);
  EXPECT_EQ(step.measured_bytes, 25 * 1536);
  EXPECT_TRUE(step.calls_match() && step.bytes_match());
  EXPECT_FALSE(v.collectives_match);  // the forward's calls differ
  // The fp64 all_reduce of 8 bytes (DeepSpeed's gradient norm): zsim has none, so it is listed apart.
  ASSERT_EQ(v.not_modelled.size(), 1u);
  EXPECT_EQ(v.not_modelled[0].call.op, "all_reduce");
  EXPECT_EQ(v.not_modelled[0].call.dtype, "float64");
  EXPECT_NE(v.not_modelled[0].why.find("bookkeeping"), std::string::npos);
  EXPECT_DOUBLE_EQ(v.step_measured_s, 0.25);

  const std::string text = format_deepspeed_validation(v);
  EXPECT_NE(text.find("not modelled"), std::string::npos) << text;
  EXPECT_NE(text.find("DIFFERS"), std::string::npos) << text;
  EXPECT_NE(text.find("2 of 3 (phase, op, group) rows match"), std::string::npos) << text;
  const auto j = deepspeed_validation_json(v);
  EXPECT_NEAR(j["peak_allocated"]["rel_error"].get<double>(), 0.1, 1e-12);
  EXPECT_FALSE(j["peak_reserved"]["modelled"].get<bool>());
  EXPECT_TRUE(j["peak_reserved"]["rel_error"].is_null());
  EXPECT_EQ(j["collectives"].size(), 3u);
  EXPECT_EQ(j["collectives"][0]["measured_calls"].get<int>(), 4);
  EXPECT_EQ(j["collectives_not_modelled"].size(), 1u);
  EXPECT_FALSE(j["collectives_match"].get<bool>());
}

// Where zsim does model a call of a few bytes at that phase, op and group, DeepSpeed's is compared with it; a torch
// function zsim has no kind for is listed apart, never dropped.
TEST(DeepSpeedRun, TinyCallsAreComparedWhereZsimModelsThemAndUnknownOnesListed) {
  json j = ok_run();
  j["ranks"][0]["collectives"]["calls"].push_back(call("backward", "batch_isend_irecv", 2, 64, 64, "bfloat16", 2));
  DsPrediction p = prediction();
  p.collectives.push_back({Phase::step, CollectiveKind::all_reduce, 2, 8, DType::fp32, 1});
  const DsValidation v = compare_deepspeed_run(deepspeed_run_from_json(j, "run.json"), p);
  bool compared = false;
  for (const DsCollectiveRow& r : v.collectives)
    if (r.phase == "step" && r.op == "all_reduce") {
      compared = true;
      EXPECT_EQ(r.measured_calls, 1);
      EXPECT_EQ(r.measured_bytes, 8);
      EXPECT_TRUE(r.calls_match() && r.bytes_match());
    }
  EXPECT_TRUE(compared);
  ASSERT_EQ(v.not_modelled.size(), 1u);
  EXPECT_EQ(v.not_modelled[0].call.op, "batch_isend_irecv");
  EXPECT_EQ(v.not_modelled[0].why, "zsim has no collective of this kind");
}

// A hand-built schedule of two steps: zsim's collectives of step 0 (init's left out, every micro-step's in), and its
// GPU memory at the phase points of the last step.
TEST(DeepSpeedRun, ZsimsStepCollectivesAndPhaseMemoryComeFromTheSchedule) {
  Schedule s;
  const int compute = s.stream("compute"), comm = s.stream("comm");
  const int world = s.group(ProcessGroup{"world", 2, 2, 1});
  auto add = [&s](OpKind k, Phase ph, int stream, int micro) -> Op& {
    Op op;
    op.kind = k;
    op.phase = ph;
    op.stream = stream;
    op.micro_step = micro;
    op.name = "op" + std::to_string(s.ops.size());
    s.add(op);
    return s.ops.back();
  };
  auto mem = [&](OpKind k, Phase ph, int micro, const std::string& buffer, Bytes bytes) {
    Op& op = add(k, ph, compute, micro);
    op.mem.buffer = buffer;
    op.mem.tier = Tier::gpu;
    op.mem.bytes = bytes;
  };
  auto coll = [&](Phase ph, int micro, CollectiveKind kind, Bytes bytes) {
    Op& op = add(OpKind::collective, ph, comm, micro);
    op.collective.what = kind;
    op.collective.group = world;
    op.collective.bytes = bytes;
  };
  mem(OpKind::alloc, Phase::init, 0, "params", 100);
  coll(Phase::init, 0, CollectiveKind::broadcast, 100);  // init: not a step's
  for (int step = 0; step < 2; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      mem(OpKind::alloc, Phase::forward, micro, "act", 50);
      coll(Phase::forward, micro, CollectiveKind::all_gather, 40);
      mem(OpKind::alloc, Phase::backward, micro, "work", 30);
      mem(OpKind::free, Phase::backward, micro, "work", 30);
      mem(OpKind::free, Phase::backward, micro, "act", 50);
      coll(Phase::backward, micro, CollectiveKind::reduce_scatter, 80);
    }
    mem(OpKind::alloc, Phase::step, 1, "tmp", 7);
    coll(Phase::step, 1, CollectiveKind::all_gather, 4);
    mem(OpKind::free, Phase::step, 1, "tmp", 7);
  }
  const std::vector<PredictedCollectives> c = step_collectives(s, 0);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].phase, Phase::forward);
  EXPECT_EQ(c[0].kind, CollectiveKind::all_gather);
  EXPECT_EQ(c[0].group_size, 2);
  EXPECT_EQ(c[0].bytes, 40);
  EXPECT_EQ(c[0].count, 2);  // both micro-steps
  EXPECT_EQ(c[1].phase, Phase::backward);
  EXPECT_EQ(c[1].count, 2);
  EXPECT_EQ(c[2].phase, Phase::step);
  EXPECT_EQ(c[2].count, 1);
  const PhaseMemory pm = phase_memory(s);
  EXPECT_EQ(pm.points.at("after_forward"), 150);
  EXPECT_EQ(pm.points.at("after_backward"), 100);
  EXPECT_EQ(pm.points.at("after_step"), 100);
  EXPECT_EQ(pm.phase_peaks.at("forward"), 150);
  EXPECT_EQ(pm.phase_peaks.at("backward"), 180);
  EXPECT_EQ(pm.phase_peaks.at("step"), 107);
}

TEST(DeepSpeedRun, TheReservedHookReadsTheReportsAllocatorModelWhereThereIsOne) {
  nlohmann::ordered_json report;
  report["memory"]["gpu"]["peak"] = 100;
  EXPECT_EQ(predicted_reserved_from_report(report), 0);  // not modelled
  report["memory"]["gpu"]["reserved"] = 4096;
  EXPECT_EQ(predicted_reserved_from_report(report), 4096);
  DsPrediction p = prediction();
  p.gpu_reserved = 2520;
  const DsValidation v = compare_deepspeed_run(deepspeed_run_from_json(ok_run(), "run.json"), p);
  const auto js = deepspeed_validation_json(v);
  EXPECT_TRUE(js["peak_reserved"]["modelled"].get<bool>());
  EXPECT_NEAR(js["peak_reserved"]["rel_error"].get<double>(), 0.2, 1e-12);  // against the largest rank's 2100
}

json failed_run() {
  json j = ok_run();
  j["status"] = "failed";
  j["error"] = "rank 0: timeout after 90.0 s (reached: initialized)";
  j["failure_kind"] = "timeout";
  j["as_expected"] = false;
  j["timed_out"] = true;
  for (int r = 0; r < 2; ++r) {
    json& rank = j["ranks"][r];
    rank["status"] = "failed";
    rank["failure_kind"] = "timeout";
    rank["error"] = "timeout after 90.0 s (reached: initialized)";
    rank["stage_reached"] = "initialized";
    rank["memory"] = {{"after_initialize", {{"allocated", 10}, {"reserved", 20}}}};  // no step's peaks
    if (r == 0)
      rank["collectives"] = {{"init", nullptr}};  // stopped before the collectives step
    else
      rank.erase("collectives");
    rank["timing"] = nullptr;
  }
  return j;
}

TEST(DeepSpeedRun, AFailedRunIsReadAsFarAsItGoesAndReported) {
  const DeepSpeedRun r = deepspeed_run_from_json(failed_run(), "failed.json");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failure_kind, "timeout");
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_FALSE(r.ranks[0].has_peaks);
  EXPECT_FALSE(r.ranks[0].has_collectives);
  EXPECT_EQ(r.ranks[1].stage_reached, "initialized");
  EXPECT_THROW(compare_deepspeed_run(r, prediction()), std::logic_error);
  const std::string text = format_deepspeed_failure(r);
  EXPECT_NE(text.find("FAILED (timeout, timed out): rank 0: timeout after 90.0 s"), std::string::npos) << text;
  EXPECT_NE(text.find("NOT as expected"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1: failed, reached initialized"), std::string::npos) << text;
  const auto j = deepspeed_failure_json(r);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["failure_kind"], "timeout");
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("zsim-ds-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(DeepSpeedRun, ZsimValidateOfAFailedRunPrintsItsFailureAndExitsNonZero) {
  const fs::path d = temp_dir("failed");
  write(d / "failed.json", failed_run().dump());
  ValidateRequest r;
  r.run_file = (d / "failed.json").string();
  r.json_file = (d / "v.json").string();
  std::ostringstream out, err;
  EXPECT_EQ(run_validate(r, out, err), kExitRunFailed);
  EXPECT_NE(err.str().find("FAILED (timeout"), std::string::npos) << err.str();
  std::ifstream in(r.json_file);
  const json v = json::parse(in);
  EXPECT_EQ(v["status"], "failed");
  fs::remove_all(d);
}

TEST(DeepSpeedRun, TheScenarioIsFoundFromTheCaseDirAboveTheRunFile) {
  DeepSpeedRun run = deepspeed_run_from_json(ok_run(), "x.json");
  const std::vector<std::string> c =
      deepspeed_scenario_candidates(run, "/repo/validate/results/h200-deepspeed/runs", "/elsewhere");
  auto index = [&c](const std::string& s) { return std::find(c.begin(), c.end(), s) - c.begin(); };
  EXPECT_LT(index("/repo/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"), static_cast<long>(c.size()));
  EXPECT_LT(index("/elsewhere/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"), static_cast<long>(c.size()));
  // The run file's own folders come first (nearest first), then the working directory's.
  EXPECT_LT(index("/repo/validate/results/h200-deepspeed/runs/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"),
            index("/repo/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"));
  EXPECT_LT(index("/repo/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"),
            index("/elsewhere/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"));
  // An absolute case.dir of another machine: the case's name under validate/deepspeed/cases/ still finds it.
  run.case_dir = "/home/someone/zsim/validate/deepspeed/cases/tiny-z3-w2";
  const std::vector<std::string> a = deepspeed_scenario_candidates(run, "/repo/runs", "/repo");
  EXPECT_EQ(a.front(), "/home/someone/zsim/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml");
  EXPECT_NE(std::find(a.begin(), a.end(), "/repo/validate/deepspeed/cases/tiny-z3-w2/scenario.yaml"), a.end());
}

// End to end on a hand-written run of a committed case (--scenario given, the case.dir leading nowhere): the cluster
// shape comes from the run's ranks, the figures from zsim's prediction of the scenario.
TEST(DeepSpeedRun, ZsimValidateComparesARunWithItsScenario) {
  const fs::path d = temp_dir("ok");
  json j = ok_run();
  j["case"]["dir"] = "nowhere/tiny-z3-w2";
  j["case"].erase("ds_config");
  write(d / "run.json", j.dump());
  ValidateRequest r;
  r.run_file = (d / "run.json").string();
  r.scenario_file = ZSIM_SOURCE_DIR "/validate/deepspeed/cases/l150m-z3-w2-mb4-s2048-sdpa/scenario.yaml";
  r.json_file = (d / "v.json").string();
  std::ostringstream out, err;
  ASSERT_EQ(run_validate(r, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("zsim against DeepSpeed"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("GPU peak reserved"), std::string::npos) << out.str();  // the caching allocator's
  std::ifstream in(r.json_file);
  const json v = json::parse(in);
  EXPECT_EQ(v["status"], "ok");
  EXPECT_GT(v["peak_allocated"]["predicted_bytes"].get<Bytes>(), Bytes{1} << 30);  // a 150M model at stage 3
  EXPECT_EQ(v["peak_allocated"]["measured_bytes"].get<Bytes>(), 1100);
  EXPECT_TRUE(v["peak_reserved"]["modelled"].get<bool>());
  EXPECT_GE(v["peak_reserved"]["predicted_bytes"].get<Bytes>(), v["peak_allocated"]["predicted_bytes"].get<Bytes>());
  EXPECT_GT(v["step_time"]["predicted_s"].get<double>(), 0);
  bool forward_gathers = false;
  for (const auto& row : v["collectives"])
    forward_gathers |= row["phase"] == "forward" && row["op"] == "all_gather" && row["group_size"] == 2 &&
                       row["predicted_calls"].get<int>() > 0;
  EXPECT_TRUE(forward_gathers) << v["collectives"].dump(1);

  // Without the scenario and with nowhere to find it: an error naming the key and the way out.
  r.scenario_file.clear();
  try {
    run_validate(r, out, err);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'case.dir': cannot find the scenario of case 'tiny-z3-w2'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--scenario FILE"), std::string::npos);
  }
  fs::remove_all(d);
}

TEST(DeepSpeedRun, TheHostsSpeedIsTheMedianLoopOfTheTimedStepsOnly) {
  json j = ok_run();
  j["ranks"][0]["timing"]["step_kinds"] = {"warmup", "timed", "timed", "phase", "timed"};
  j["ranks"][0]["timing"]["host_per_step"] = json::array({{{"reference_work_seconds", 0.009}},
                                                          {{"reference_work_seconds", 0.0016}},
                                                          {{"reference_work_seconds", 0.0032}},
                                                          {{"reference_work_seconds", 0.008}},
                                                          {{"reference_work_seconds", 0.0018}}});
  const DeepSpeedRun r = deepspeed_run_from_json(j, "run.json");
  EXPECT_DOUBLE_EQ(r.ranks[0].reference_loop_s, 0.0018);
  EXPECT_EQ(host_speed_overrides(r), std::vector<std::string>{"cluster.efficiency.deepspeed_host.loop_us=1800.000"});
}

TEST(DeepSpeedRun, APooledRunsHostSpeedIsItsRecordedLoop) {
  json j = ok_run();
  j["ranks"][0]["timing"]["step_kinds"] = {"timed"};
  j["ranks"][0]["timing"]["host_per_step"] = json::array({{{"reference_work_seconds", 0.009}}});
  j["ranks"][0]["timing"]["reference_loop_seconds"] = 0.0025;  // pool_repeats.py: the median of its runs'
  EXPECT_DOUBLE_EQ(deepspeed_run_from_json(j, "run.json").ranks[0].reference_loop_s, 0.0025);
  j["ranks"][0]["timing"]["reference_loop_seconds"] = 0;
  EXPECT_NE(error_of(j).find("'ranks[0].timing.reference_loop_seconds'"), std::string::npos);
}

TEST(DeepSpeedRun, AutogradsLoopIsTheMedianOfTheTimedSteps) {
  json j = ok_run();
  j["ranks"][0]["timing"]["step_kinds"] = {"warmup", "timed", "timed", "timed"};
  j["ranks"][0]["timing"]["host_per_step"] = json::array(
      {{{"reference_work_seconds", 0.003}, {"autograd_reference_work_seconds", 0.009}},
       {{"reference_work_seconds", 0.003}, {"autograd_reference_work_seconds", 0.001}},
       {{"reference_work_seconds", 0.003}, {"autograd_reference_work_seconds", 0.002}},
       {{"reference_work_seconds", 0.003}, {"autograd_reference_work_seconds", 0.004}}});
  const DeepSpeedRun r = deepspeed_run_from_json(j, "run.json");
  EXPECT_DOUBLE_EQ(r.ranks[0].autograd_reference_loop_s, 0.002);  // the warm-up step's 9 ms not counted
  EXPECT_EQ(host_speed_overrides(r), (std::vector<std::string>{"cluster.efficiency.deepspeed_host.loop_us=3000.000",
                                                               "cluster.efficiency.deepspeed_host.autograd_loop_us=2000.000"}));
  j["ranks"][0]["timing"]["autograd_reference_loop_seconds"] = 0.0025;  // pool_repeats.py's
  EXPECT_DOUBLE_EQ(deepspeed_run_from_json(j, "run.json").ranks[0].autograd_reference_loop_s, 0.0025);
}

TEST(DeepSpeedRun, ARunWithoutAutogradsLoopTellsZsimOnlyTheMainThreads) {
  json j = ok_run();
  j["ranks"][0]["timing"]["step_kinds"] = {"timed"};
  j["ranks"][0]["timing"]["host_per_step"] = json::array({{{"reference_work_seconds", 0.003}}});
  const DeepSpeedRun r = deepspeed_run_from_json(j, "run.json");
  EXPECT_EQ(r.ranks[0].autograd_reference_loop_s, 0);
  EXPECT_EQ(host_speed_overrides(r),
            (std::vector<std::string>{"cluster.efficiency.deepspeed_host.loop_us=3000.000"}));
}

TEST(DeepSpeedRun, ARunThatDidNotTimeTheLoopIsPredictedAtTheProfilesSpeed) {
  const DeepSpeedRun r = deepspeed_run_from_json(ok_run(), "run.json");
  EXPECT_EQ(r.ranks[0].reference_loop_s, 0);
  EXPECT_TRUE(host_speed_overrides(r).empty());
}

TEST(DeepSpeedRun, ZsimValidatePredictsAtTheRunsHostSpeed) {
  const fs::path d = temp_dir("speed");
  const std::string scenario = ZSIM_SOURCE_DIR "/validate/deepspeed/cases/l150m-z1-w1-mb4-s2048-sdpa/scenario.yaml";
  auto predicted_at = [&](double loop_s) {
    json j = ok_run();
    j["case"]["world"] = 1, j["case"]["shared_gpu"] = false;
    j["case"].erase("ds_config");
    j["ranks"] = json::array({rank_json(0, 1000)});
    j["ranks"][0]["timing"]["step_kinds"] = {"timed"};
    j["ranks"][0]["timing"]["host_per_step"] = json::array({{{"reference_work_seconds", loop_s}}});
    write(d / "run.json", j.dump());
    ValidateRequest r;
    r.run_file = (d / "run.json").string();
    r.scenario_file = scenario;
    r.json_file = (d / "v.json").string();
    std::ostringstream out, err;
    EXPECT_EQ(run_validate(r, out, err), 0) << err.str();
    std::ifstream in(r.json_file);
    return json::parse(in)["step_time"];
  };
  const json fast = predicted_at(0.0015), slow = predicted_at(0.0035);
  EXPECT_LT(fast["host_speed_scale"].get<double>(), 1.0);  // the committed profile's reference loop is ~3 ms
  EXPECT_GT(slow["host_speed_scale"].get<double>(), 1.0);
  EXPECT_LT(fast["predicted_s"].get<double>(), slow["predicted_s"].get<double>());  // this case's host binds
  fs::remove_all(d);
}


// Issue 59: a run's versions against the stack the scenario's figures were fitted under.
TEST(DeepSpeedRun, VersionsAgreeWhereTheirReleasesDoUpToTheShorterOne) {
  EXPECT_TRUE(versions_agree("2.11.0+cu130", "2.11"));
  EXPECT_TRUE(versions_agree("2.11.0+cu130", "2.11.0"));
  EXPECT_TRUE(versions_agree("0.14.5", "0.14.5"));
  EXPECT_FALSE(versions_agree("2.11.1", "2.11.0"));
  EXPECT_FALSE(versions_agree("0.15.0", "0.14"));
  EXPECT_FALSE(versions_agree("2.1", "2.11"));  // a release is a prefix only at a dot
  EXPECT_TRUE(versions_agree("NVIDIA H200", "NVIDIA H200"));
  EXPECT_FALSE(versions_agree("NVIDIA H100 80GB HBM3", "NVIDIA H200"));
  EXPECT_TRUE(versions_agree("", "2.11"));  // not recorded on one side: nothing to compare
  EXPECT_TRUE(versions_agree("2.11", ""));
}

TEST(DeepSpeedRun, TheStackDifferencesNameEachFieldThatDiffers) {
  const DeepSpeedRun r = deepspeed_run_from_json(ok_run(), "run.json");  // 0.14.5, 2.11.0, 5.17.0, NVIDIA H200
  FittedUnder f{"0.14.5", "2.11.0+cu130", "5.17.0", "3.12.3", "13.0", "NVIDIA H200", "2026-12-03"};
  EXPECT_TRUE(stack_differences(f, r).empty());  // the run records no python nor CUDA: nothing to compare there
  f.torch = "2.12.0";
  f.gpu = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(stack_differences(f, r), (std::vector<std::string>{"torch 2.11.0 (the profile's figures: 2.12.0)",
                                                               "GPU NVIDIA H200 (the profile's figures: NVIDIA H100 80GB HBM3)"}));
  EXPECT_TRUE(stack_differences(FittedUnder{}, r).empty());  // a profile that records none
}

TEST(DeepSpeedRun, ZsimValidateWarnsWhenTheRunsStackDiffersFromTheProfiles) {
  const fs::path d = temp_dir("stack");
  json j = ok_run();
  j["case"]["world"] = 1, j["case"]["shared_gpu"] = false;
  j["case"].erase("ds_config");
  j["ranks"] = json::array({rank_json(0, 1000)});
  write(d / "run.json", j.dump());
  ValidateRequest r;
  r.run_file = (d / "run.json").string();
  r.scenario_file = ZSIM_SOURCE_DIR "/validate/deepspeed/cases/l150m-z1-w1-mb4-s2048-sdpa/scenario.yaml";
  r.json_file = (d / "v.json").string();
  r.overrides = {"cluster.fitted_under.deepspeed=0.16.0", "cluster.fitted_under.transformers=5.17"};
  std::ostringstream out, err;
  ASSERT_EQ(run_validate(r, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("warning: " + r.run_file + " ran under another stack"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("DeepSpeed 0.14.5 (the profile's figures: 0.16.0)"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("transformers"), std::string::npos) << err.str();  // 5.17.0 agrees with 5.17
  EXPECT_NE(out.str().find("the run's stack differs"), std::string::npos) << out.str();
  std::ifstream in(r.json_file);
  EXPECT_EQ(json::parse(in)["stack_differences"],
            json::array({"DeepSpeed 0.14.5 (the profile's figures: 0.16.0)"}));
  fs::remove_all(d);
}

}  // namespace
}  // namespace zsim
