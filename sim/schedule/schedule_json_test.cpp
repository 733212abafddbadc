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
  EXPECT_EQ(j["version"], 1);
  const json& ag = j["ops"][7];  // first collective
  EXPECT_EQ(ag["kind"], "collective");
  EXPECT_EQ(ag["collective"], "all_gather");
  EXPECT_EQ(ag["group"], "hpz");
  EXPECT_EQ(ag["dtype"], "int8");
  EXPECT_EQ(ag["stream"], "comm");
}

TEST(ScheduleJson, RejectsWrongFormat) {
  json j = every_kind_json();
  j["format"] = "zsim.report";
  EXPECT_NE(error_of(j).find("key 'format'"), std::string::npos);
}

TEST(ScheduleJson, RejectsOtherVersions) {
  json j = every_kind_json();
  j["version"] = 2;
  const std::string e = error_of(j);
  EXPECT_NE(e.find("step.json"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'version'"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported version 2"), std::string::npos) << e;
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
