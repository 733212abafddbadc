// Specification of the schedule's JSON form: every field round-trips, bad files are rejected with the
// JSON path of the offending value.
#include "sim/schedule/schedule_json.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/common/error.hpp"

using namespace zsim;
using nlohmann::json;

namespace {

// Every op kind and sub-kind, every field set to a non-default value, so a field that is not written or
// not read back makes the round trip differ.
Schedule every_kind() {
  Schedule s;
  s.meta = {"scenarios/x.yaml", 16, 2, 8, 7'000'000'000, 4'194'304, 2};
  const int compute = s.stream("compute"), comm = s.stream("comm"), h2d = s.stream("h2d"), cpu = s.stream("cpu");
  s.stream("d2h");
  s.stream("nvme");
  const int world = s.group({"world", 16, 8, 1});
  const int hpz = s.group({"hpz", 8, 8, 1});
  s.group({"inter_node", 2, 1, 8});
  int n = 0;
  auto base = [&](OpKind k, int stream) {
    Op op;
    op.kind = k;
    op.name = "op" + std::to_string(n++);
    op.phase = static_cast<Phase>(n % 4);
    op.stream = stream;
    op.layer = n % 3 == 0 ? -1 : n;
    op.micro_step = n % 2;
    if (n > 2) op.deps = {static_cast<OpId>(n - 2), static_cast<OpId>(n - 3)};
    return op;
  };
  for (ComputeKind ck : {ComputeKind::forward, ComputeKind::backward, ComputeKind::recompute, ComputeKind::optimizer,
                         ComputeKind::quantize, ComputeKind::dequantize, ComputeKind::dequant_reduce}) {
    Op op = base(OpKind::compute, ck == ComputeKind::optimizer ? cpu : compute);
    op.compute = {ck, ck == ComputeKind::optimizer ? Device::cpu : Device::gpu, 1.2345678901234567e15 + n,
                  1000 + n, 7'000'000'001 + n};
    if (ck == ComputeKind::dequant_reduce || ck == ComputeKind::dequantize) op.compute.dtype = DType::int4;  // not the default
    if (ck == ComputeKind::forward || ck == ComputeKind::backward || ck == ComputeKind::recompute)
      op.compute.kernel_launches = 10 + n;
    if (ck == ComputeKind::forward) op.compute.gemm_hbm_bytes = 600 + n;  // of its hbm_bytes, the GEMM calls' share
    if (ck == ComputeKind::backward) op.compute.fused_attention_flops = 3.0000000000000004e14;  // of its flops, flash's
    s.add(op);
  }
  for (CollectiveKind ck : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce,
                            CollectiveKind::all_to_all, CollectiveKind::broadcast}) {
    Op op = base(OpKind::collective, comm);
    op.collective = {ck, ck == CollectiveKind::all_gather ? hpz : world, 3'000'000'000LL + n, 4096 + n,
                     ck == CollectiveKind::all_to_all ? DType::int4 : DType::int8};
    s.add(op);
  }
  for (CopyKind ck : {CopyKind::h2d, CopyKind::d2h, CopyKind::nvme_read, CopyKind::nvme_write, CopyKind::d2d}) {
    Op op = base(OpKind::copy, h2d);
    op.copy = {ck, 123'456'789'012LL + n, false};
    s.add(op);
  }
  const Tier tiers[] = {Tier::gpu, Tier::cpu, Tier::nvme};
  const MemCategory cats[] = {MemCategory::params, MemCategory::grads, MemCategory::optimizer,
                              MemCategory::activations, MemCategory::buffers};
  for (int i = 0; i < 5; ++i) {
    Op a = base(OpKind::alloc, compute);
    a.mem = {"buf" + std::to_string(i), tiers[i % 3], cats[i], i == 4 ? "loco_error" : "", 10'000'000'000LL + i};
    s.add(a);
    Op f = base(OpKind::free, compute);
    f.mem = a.mem;
    s.add(f);
  }
  const DType dtypes[] = {DType::fp32, DType::bf16, DType::fp16};
  for (DType d : dtypes) {
    Op op = base(OpKind::collective, comm);
    op.collective = {CollectiveKind::all_gather, world, 64, 0, d};
    s.add(op);
  }
  Op red = base(OpKind::collective, comm);  // a reduce to rank 3 of the world
  red.collective = {CollectiveKind::reduce, world, 1'000'000 + n, 0, DType::bf16, 3};
  s.add(red);
  Op d2d = base(OpKind::copy, comm);  // a device copy that only rank 5 runs, converting bf16 to fp32
  d2d.copy = {CopyKind::d2d, 500'000 + n, true, true, 5, DType::bf16, DType::fp32};
  s.add(d2d);
  Op sec = base(OpKind::copy, comm);  // hpZ's copy into the secondary partition: ranks counted in the hpz group
  sec.copy = {CopyKind::d2d, 4096, true, false, -1, DType::fp32, DType::fp32, hpz};
  s.add(sec);
  // Version 2: the model, and compute ops that name a unit and use a live buffer with every role and access.
  s.model = {"tiny", 1, 64, 176, 4, 2, 128, 32, true, false, true, 2, 16, 3, DType::fp16, true,
             {{"embedding", -1, {{"embedding", 128, 64}, {"positions", 32, 64}}},
              {"L0.attn.norm", 0, {{"attn.norm", 64, 0}, {"attn.norm.bias", 64, 0}}, "norm"},
              {"L0.attn.o", 0, {{"attn.o", 64, 64}}, "softmax", {{32, 32, 16, 2, 6}, {16, 32, 32, 2, 6}},
               {{32, 32, 16, 2, 6}, {16, 32, 32, 2, 18}}}}};
  Op a = base(OpKind::alloc, compute);
  a.mem = {"live", Tier::gpu, MemCategory::activations, "", 4096};
  const OpId live = s.add(a);
  const Role roles[] = {Role::param, Role::grad, Role::activation, Role::input, Role::output, Role::state};
  const Access accesses[] = {Access::read, Access::write, Access::read_write};
  for (int i = 0; i < 6; ++i) {
    Op op = base(OpKind::compute, compute);
    op.compute = {ComputeKind::forward, Device::gpu, 1.0 + i, 0, 0};
    op.unit = i % 2;
    op.uses = {{live, 64 * i, 64, roles[i], accesses[i % 3], i % 2, 1, 0},
               {live, 0, 256, Role::input, Access::read, -1, -1, 256},   // 16 ranks x 256 bytes
               {live, 0, 64, Role::output, Access::write, -1, -1, 0, 4, 1024}};  // 4 blocks of 64 bytes, 1 KiB apart
    s.add(op);
  }
  return s;
}

json every_kind_json() { return schedule_to_json(every_kind()); }

// Parses `j` and returns the InputError's message (fails the test if none is thrown).
std::string error_of(const json& j) {
  try {
    schedule_from_json(j, "step.json");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << j.dump().substr(0, 200);
  return "";
}

}  // namespace

TEST(ScheduleJson, EveryOpKindRoundTripsIdentically) {
  const Schedule s = every_kind();
  check_schedule(s);
  EXPECT_EQ(schedule_from_json(schedule_to_json(s)), s);
}

TEST(ScheduleJson, TextFormRoundTripsIdentically) {
  const Schedule s = every_kind();
  EXPECT_EQ(schedule_from_json_text(schedule_to_json_text(s)), s);
}

TEST(ScheduleJson, FileRoundTripsIdenticallyAndLeavesNoTemporary) {
  const std::string path = ::testing::TempDir() + "schedule_json_test_step.json";
  write_schedule_json(every_kind(), path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_schedule_json(path), every_kind());
  std::remove(path.c_str());
}

TEST(ScheduleJson, CarriesFormatVersionAndEnumsAsStrings) {
  const json j = every_kind_json();
  EXPECT_EQ(j["format"], "zsim.schedule");
  EXPECT_EQ(j["version"], 2);
  const json& ag = j["ops"][7];  // first collective
  EXPECT_EQ(ag["kind"], "collective");
  EXPECT_EQ(ag["collective"], "all_gather");
  EXPECT_EQ(ag["group"], "hpz");
  EXPECT_EQ(ag["dtype"], "int8");
  EXPECT_EQ(ag["stream"], "comm");
}

TEST(ScheduleJson, CarriesTheModelAndBufferUsesByName) {
  const json j = every_kind_json();
  EXPECT_EQ(j["model"]["units"][1]["name"], "L0.attn.norm");
  EXPECT_EQ(j["model"]["mlp"], "plain");
  const json& last = j["ops"].back();
  EXPECT_EQ(last["unit"], 1);
  EXPECT_EQ(last["uses"][0]["buffer"], "live");
  EXPECT_EQ(last["uses"][0]["role"], "state");
  EXPECT_EQ(last["uses"][0]["access"], "read_write");
}

TEST(ScheduleJson, AUnitsMemoryBoundKernelKindIsOptionalAndOneOfTheKnownKinds) {
  json j = every_kind_json();
  EXPECT_EQ(j["model"]["units"][1]["hbm_kind"], "norm");
  EXPECT_EQ(j["model"]["units"][0].count("hbm_kind"), 0u);
  EXPECT_EQ(schedule_from_json(j).model.units[1].hbm_kind, "norm");
  j["model"]["units"][1]["hbm_kind"] = "adam";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("key 'model.units[1].hbm_kind'"), std::string::npos) << e;
}

TEST(ScheduleJson, AQuantizationOpCarriesItsQuantizedDtypeAndNoOtherComputeOpHasOne) {
  json j = every_kind_json();
  EXPECT_EQ(j["ops"][0].count("dtype"), 0u);  // forward
  EXPECT_EQ(j["ops"][4]["dtype"], "int8");    // quantize
  EXPECT_EQ(j["ops"][6]["dtype"], "int4");    // dequant_reduce
  json missing = j;
  missing["ops"][4].erase("dtype");
  EXPECT_NE(error_of(missing).find("ops[4].dtype"), std::string::npos);
  json wrong = j;
  wrong["ops"][4]["dtype"] = "bf16";
  EXPECT_NE(error_of(wrong).find("int8 (qwZ) or int4 (qgZ)"), std::string::npos);
  json extra = j;
  extra["ops"][0]["dtype"] = "int8";
  EXPECT_NE(error_of(extra).find("ops[0].dtype"), std::string::npos);
}

TEST(ScheduleJson, AComputeOpsKernelLaunchesAreOptionalAndWrittenOnlyWhenGiven) {
  json j = every_kind_json();
  EXPECT_EQ(j["ops"][0]["kernel_launches"], 11);  // forward
  EXPECT_EQ(j["ops"][3].count("kernel_launches"), 0u);  // the optimizer: none given
  json absent = j;
  absent["ops"][0].erase("kernel_launches");
  EXPECT_EQ(schedule_from_json(absent).ops[0].compute.kernel_launches, 0);
  json negative = j;
  negative["ops"][0]["kernel_launches"] = -1;
  EXPECT_NE(error_of(negative).find("key 'ops[0].kernel_launches': must be >= 0"), std::string::npos);
  json on_a_copy = j;
  on_a_copy["ops"][12]["kernel_launches"] = 2;
  EXPECT_NE(error_of(on_a_copy).find("ops[12].kernel_launches"), std::string::npos);
}

TEST(ScheduleJson, AUnitsOwnGemmCallsAreOptionalListsOfMNKBatchCalls) {
  json j = every_kind_json();
  EXPECT_EQ(j["model"]["units"][2]["gemm_calls"]["forward"], json::parse("[[32, 32, 16, 2, 6], [16, 32, 32, 2, 6]]"));
  EXPECT_EQ(j["model"]["units"][2]["gemm_calls"]["backward"][1], json::parse("[16, 32, 32, 2, 18]"));
  EXPECT_EQ(j["model"]["units"][1].count("gemm_calls"), 0u);
  json short_entry = j;
  short_entry["model"]["units"][2]["gemm_calls"]["forward"][0] = json::parse("[32, 32, 16, 2]");
  EXPECT_NE(error_of(short_entry).find("[m, n, k, batch, calls]"), std::string::npos);
  json zero = j;
  zero["model"]["units"][2]["gemm_calls"]["backward"][0][4] = 0;
  EXPECT_NE(error_of(zero).find("model.units[2].gemm_calls.backward[0][4]"), std::string::npos) << error_of(zero);
}

TEST(ScheduleJson, AComputeOpsGemmHbmBytesArePartOfItsHbmBytes) {
  json j = every_kind_json();
  EXPECT_EQ(j["ops"][0]["gemm_hbm_bytes"], 601);
  EXPECT_EQ(j["ops"][1].count("gemm_hbm_bytes"), 0u);  // 0: not written
  json absent = j;
  absent["ops"][0].erase("gemm_hbm_bytes");
  EXPECT_EQ(schedule_from_json(absent).ops[0].compute.gemm_hbm_bytes, 0);
  json more = j;
  more["ops"][0]["gemm_hbm_bytes"] = 1002;  // hbm_bytes 1001
  EXPECT_NE(error_of(more).find("is part of hbm_bytes"), std::string::npos);
}

TEST(ScheduleJson, AComputeOpsFusedAttentionFlopsArePartOfItsFlops) {
  json j = every_kind_json();
  EXPECT_EQ(j["ops"][1]["fused_attention_flops"], 3.0000000000000004e14);  // the backward op
  EXPECT_EQ(j["ops"][0].count("fused_attention_flops"), 0u);                // 0: not written
  EXPECT_EQ(schedule_from_json(j).ops[1].compute.fused_attention_flops, 3.0000000000000004e14);
  json absent = j;
  absent["ops"][1].erase("fused_attention_flops");
  EXPECT_EQ(schedule_from_json(absent).ops[1].compute.fused_attention_flops, 0);
  json more = j;
  more["ops"][1]["fused_attention_flops"] = 2e15;  // flops 1.2345678901234567e15 + 2
  EXPECT_NE(error_of(more).find("key 'ops[1].fused_attention_flops': is part of flops"), std::string::npos) << error_of(more);
  json negative = j;
  negative["ops"][1]["fused_attention_flops"] = -1.0;
  EXPECT_NE(error_of(negative).find("ops[1].fused_attention_flops"), std::string::npos);
}

TEST(ScheduleJson, RejectsAUseWhoseBufferNameIsNotItsAllocs) {
  json j = every_kind_json();
  j["ops"].back()["uses"][0]["buffer"] = "buf0";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("uses[0].buffer"), std::string::npos) << e;
}

TEST(ScheduleJson, RejectsAUseOfABufferThatIsNoLongerLive) {
  json j = every_kind_json();
  // buf0 is allocated and freed again early on: a use of it by the last op names a freed buffer.
  size_t buf0 = 0;
  while (buf0 < j["ops"].size() && j["ops"][buf0].value("buffer", "") != "buf0") ++buf0;
  ASSERT_LT(buf0, j["ops"].size());
  ASSERT_EQ(j["ops"][buf0 + 1]["kind"], "free");
  j["ops"].back()["uses"][0]["alloc"] = buf0;
  j["ops"].back()["uses"][0]["buffer"] = "buf0";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("not live"), std::string::npos) << e;
}

TEST(ScheduleJson, RejectsARankStrideThatTakesTheLastRankPastTheBuffer) {
  json j = every_kind_json();
  ASSERT_EQ(j["ops"].back()["uses"][1]["rank_stride"], 256);  // 16 ranks x 256 bytes fill the 4096-byte buffer
  j["ops"].back()["uses"][1]["rank_stride"] = 257;
  EXPECT_NE(error_of(j).find("which holds 4096"), std::string::npos);
}

TEST(ScheduleJson, RejectsAUseThatNamesATensorTheModelLacks) {
  json j = every_kind_json();
  j["ops"].back()["uses"][0]["tensor"] = 5;
  EXPECT_NE(error_of(j).find("bad tensor index"), std::string::npos);
}

TEST(ScheduleJson, RejectsWrongFormat) {
  json j = every_kind_json();
  j["format"] = "zsim.report";
  EXPECT_NE(error_of(j).find("key 'format'"), std::string::npos);
}

TEST(ScheduleJson, RejectsOtherVersions) {
  json j = every_kind_json();
  j["version"] = 1;
  const std::string e = error_of(j);
  EXPECT_NE(e.find("step.json"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'version'"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported version 1"), std::string::npos) << e;
}

TEST(ScheduleJson, RejectsUnknownEnumNamingThePathAndTheChoices) {
  json j = every_kind_json();
  j["ops"][8]["collective"] = "allgather";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("key 'ops[8].collective'"), std::string::npos) << e;
  EXPECT_NE(e.find("all_gather"), std::string::npos) << e;
}

TEST(ScheduleJson, RejectsMissingRequiredField) {
  json j = every_kind_json();
  j["ops"][3].erase("phase");
  EXPECT_NE(error_of(j).find("key 'ops[3].phase': missing"), std::string::npos);
}

TEST(ScheduleJson, RejectsWrongType) {
  json j = every_kind_json();
  j["ops"][9]["bytes"] = "lots";
  EXPECT_NE(error_of(j).find("key 'ops[9].bytes': expected an integer"), std::string::npos);
}

TEST(ScheduleJson, RejectsNegativeBytes) {
  json j = every_kind_json();
  j["ops"][12]["bytes"] = -5;
  EXPECT_NE(error_of(j).find("key 'ops[12].bytes': must be >= 0"), std::string::npos);
}

TEST(ScheduleJson, RejectsUnknownKeyInAnOp) {
  json j = every_kind_json();
  j["ops"][0]["byts"] = 5;
  EXPECT_NE(error_of(j).find("key 'ops[0].byts': unknown key"), std::string::npos);
}

TEST(ScheduleJson, RejectsUnknownStreamOrGroupName) {
  json j = every_kind_json();
  j["ops"][1]["stream"] = "nccl";
  EXPECT_NE(error_of(j).find("key 'ops[1].stream': no stream named 'nccl'"), std::string::npos);
  j = every_kind_json();
  j["ops"][8]["group"] = "node";
  EXPECT_NE(error_of(j).find("key 'ops[8].group': no group named 'node'"), std::string::npos);
}

TEST(ScheduleJson, RejectsIdThatIsNotItsPosition) {
  json j = every_kind_json();
  j["ops"][4]["id"] = 40;
  EXPECT_NE(error_of(j).find("key 'ops[4].id'"), std::string::npos);
}

TEST(ScheduleJson, RejectsDependencyOnALaterOp) {
  json j = every_kind_json();
  j["ops"][5]["deps"] = {2, 6};
  EXPECT_NE(error_of(j).find("key 'ops[5].deps[1]': dependency 6 is not an earlier op"), std::string::npos);
}

TEST(ScheduleJson, RejectsARootOutsideAReduceAndAReduceRootOutsideItsGroup) {
  json j = every_kind_json();
  size_t reduce = 0;
  while (reduce < j["ops"].size() && j["ops"][reduce].value("collective", "") != "reduce") ++reduce;
  ASSERT_LT(reduce, j["ops"].size());
  j["ops"][reduce - 1]["root"] = 0;  // an all_gather
  EXPECT_NE(error_of(j).find("only a reduce has a root"), std::string::npos);
  j = every_kind_json();
  j["ops"][reduce]["root"] = 16;  // world has ranks 0-15
  EXPECT_NE(error_of(j).find("reduce root 16 is not a rank of its group"), std::string::npos);
  j = every_kind_json();
  j["ops"][reduce].erase("root");
  EXPECT_NE(error_of(j).find("root': missing"), std::string::npos);
}

TEST(ScheduleJson, RejectsACopyRankOutsideTheWorld) {
  json j = every_kind_json();
  size_t copy = 0;
  while (copy < j["ops"].size() && !j["ops"][copy].contains("rank")) ++copy;
  ASSERT_LT(copy, j["ops"].size());
  ASSERT_EQ(j["ops"][copy]["rank"], 5);
  j["ops"][copy]["rank"] = 16;
  EXPECT_NE(error_of(j).find("copy rank 16 is not a rank of the world"), std::string::npos);
}

TEST(ScheduleJson, RejectsACastOnAnythingButADeviceCopyAndAHalfGivenCast) {
  json j = every_kind_json();
  size_t copy = 0;
  while (copy < j["ops"].size() && !j["ops"][copy].contains("cast_from")) ++copy;
  ASSERT_LT(copy, j["ops"].size());
  EXPECT_EQ(j["ops"][copy]["cast_to"], "fp32");
  json bad = j;
  bad["ops"][copy]["copy"] = "h2d";
  EXPECT_NE(error_of(bad).find("only a d2d copy converts element types"), std::string::npos);
  bad = j;
  bad["ops"][copy].erase("cast_to");
  EXPECT_NE(error_of(bad).find("cast_to': missing"), std::string::npos);
}

TEST(ScheduleJson, ACopysKernelLaunchesRoundTripAndOnlyADeviceCopyHasThem) {
  json j = every_kind_json();
  size_t copy = 0;
  while (copy < j["ops"].size() && !j["ops"][copy].contains("cast_from")) ++copy;  // a d2d copy
  ASSERT_LT(copy, j["ops"].size());
  j["ops"][copy]["kernel_launches"] = 75;
  EXPECT_EQ(schedule_from_json(j).ops[copy].copy.kernel_launches, 75);
  EXPECT_EQ(schedule_to_json(schedule_from_json(j))["ops"][copy]["kernel_launches"], 75);
  json bad = j;
  bad["ops"][copy]["kernel_launches"] = 0;
  EXPECT_NE(error_of(bad).find("kernel_launches"), std::string::npos);
  bad = j;
  bad["ops"][copy].erase("cast_from");
  bad["ops"][copy].erase("cast_to");
  bad["ops"][copy]["copy"] = "h2d";
  EXPECT_NE(error_of(bad).find("only a d2d copy runs kernels"), std::string::npos);
  EXPECT_EQ(schedule_to_json(schedule_from_json(every_kind_json()))["ops"][copy].count("kernel_launches"), 0u);
}

TEST(ScheduleJson, RejectsFreeWithoutAlloc) {
  json j = every_kind_json();
  j["ops"][17]["kind"] = "free";  // the first alloc becomes a free of an unallocated buffer
  EXPECT_NE(error_of(j).find("key 'ops[17].buffer': frees buffer"), std::string::npos);
}

TEST(ScheduleJson, RejectsWorldSizeThatIsNotNodesTimesGpusPerNode) {
  json j = every_kind_json();
  j["meta"]["world_size"] = 12;
  EXPECT_NE(error_of(j).find("key 'meta.world_size'"), std::string::npos);
}

TEST(ScheduleJson, SyntaxErrorNamesLineAndColumn) {
  try {
    schedule_from_json_text("{\n  \"format\": \"zsim.schedule\",\n  \"version\": 1,,\n}", "bad.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "bad.json");
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.where().column, 16);
    EXPECT_NE(std::string(e.what()).find("bad.json:3:16: invalid JSON"), std::string::npos) << e.what();
  }
}

TEST(ScheduleJson, MissingFileIsAnInputError) {
  EXPECT_THROW(read_schedule_json("/nonexistent/step.json"), InputError);
}

TEST(ScheduleJson, WritingRefusesDuplicateGroupNamesSinceOpsReferToGroupsByName) {
  Schedule s = every_kind();
  s.groups.push_back(s.groups[0]);
  EXPECT_THROW(schedule_to_json(s), std::logic_error);
}

namespace {

// Every (path, value) slot of a JSON document, as JSON pointers.
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) pointers(it.value(), at / it.key(), out);
  if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) pointers(j[i], at / i, out);
}

}  // namespace

TEST(ScheduleJson, AnySingleValueReplacedOrRemovedGivesAScheduleOrAnInputErrorNeverAnotherFailure) {
  const json good = every_kind_json();
  std::vector<json::json_pointer> slots;
  pointers(good, json::json_pointer(), slots);
  const json replacements[] = {nullptr, -1, 0, 1, 1u << 31, "x", "all_gather", 2.5, json::array(), json::object(),
                               true, json(std::numeric_limits<std::uint64_t>::max())};
  int rejected = 0, accepted = 0;
  for (const auto& slot : slots) {
    for (const json& r : replacements) {
      json j = good;
      j[slot] = r;
      try {
        schedule_from_json(j, "m.json");
        ++accepted;
      } catch (const InputError&) {
        ++rejected;
      }
    }
    if (slot.empty()) continue;
    json j = good;
    j[slot.parent_pointer()].is_object() ? (void)j[slot.parent_pointer()].erase(slot.back())
                                         : (void)j[slot.parent_pointer()].erase(std::stoul(slot.back()));
    try {
      schedule_from_json(j, "m.json");
      ++accepted;
    } catch (const InputError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);  // most mutations are errors...
  EXPECT_GT(accepted, 10);    // ...but e.g. another valid name or size is fine
}

TEST(ScheduleJson, EmptyScheduleRoundTrips) {
  Schedule s;
  s.stream("compute");
  const std::string text = schedule_to_json_text(s);
  EXPECT_NE(text.find("\"ops\": []"), std::string::npos) << text;
  EXPECT_EQ(schedule_from_json_text(text), s);
}

TEST(ScheduleJson, TextFormIsTheSameDocumentAsTheJsonForm) {
  const Schedule s = every_kind();
  EXPECT_EQ(json::parse(schedule_to_json_text(s)), json(schedule_to_json(s)));
}
