// Specification of the report JSON: versioned, every documented field present (docs/report-schema.md,
// read by the test) and nothing undocumented, values equal to the walks'.
#include "sim/report/report_json.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/report/report_test_fixture.hpp"

using namespace zsim;
using namespace zsim::testing;
using nlohmann::ordered_json;
using S = SmallStep;

namespace {

// A report that uses every part of the schema: all three tiers, a misfit, collectives, copies.
Report full_report() {
  Scenario sc = small_scenario(S::kGpuPeak - 1, OffloadDevice::nvme);
  sc.runtime = RuntimeKind::zrun;  // the GPU verdict on the peak (runtime deepspeed's: report_test.cpp)
  return make_report(sc, small_step(Tier::nvme));
}

struct DocField {
  std::string type;
  bool optional = false;
  bool map = false;  // keys are data ("map") or documented elsewhere ("opaque"): not descended into
};

// Field rows of docs/report-schema.md ("| `path` | type | meaning |"), placeholders expanded.
std::map<std::string, DocField> documented_fields() {
  std::ifstream in("docs/report-schema.md");
  EXPECT_TRUE(in.good()) << "docs/report-schema.md not found (tests run from the repository root)";
  const std::map<std::string, std::vector<std::string>> placeholders = {
      {"<tier>", {"gpu", "cpu", "nvme"}},
      {"<phase>", {"forward", "backward", "step", "total", "init"}},
      {"<copy>", {"h2d", "d2h", "nvme_read", "nvme_write", "d2d"}}};
  const std::regex row(R"(^\| `([a-z_.<>\[\]]+)` \| ([^|]+) \|)");
  std::map<std::string, DocField> fields;
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string type = m[2];
    const DocField f{type, type.find("optional") != std::string::npos,
                     type.rfind("map", 0) == 0 || type.find("opaque") != std::string::npos};
    std::vector<std::string> paths = {m[1]};
    for (const auto& [ph, values] : placeholders) {
      std::vector<std::string> next;
      for (const std::string& p : paths) {
        const size_t at = p.find(ph);
        if (at == std::string::npos) {
          next.push_back(p);
          continue;
        }
        for (const std::string& v : values) next.push_back(std::string(p).replace(at, ph.size(), v));
      }
      paths = next;
    }
    for (const std::string& p : paths) {
      EXPECT_EQ(p.find('<'), std::string::npos) << "unexpanded placeholder in " << p;
      fields[p] = f;
    }
  }
  return fields;
}

// Every path to a value in `j` ("a.b", "a[].c"), not descending into documented maps.
void flatten(const ordered_json& j, const std::string& path, const std::map<std::string, DocField>& doc,
             std::set<std::string>& out) {
  if (!path.empty() && !path.ends_with("[]")) out.insert(path);  // an element is its array's
  auto it = doc.find(path);
  if (it != doc.end() && it->second.map) return;
  if (j.is_object())
    for (auto e = j.begin(); e != j.end(); ++e) flatten(e.value(), path.empty() ? e.key() : path + "." + e.key(), doc, out);
  if (j.is_array())
    for (const ordered_json& e : j)
      if (e.is_object() || e.is_array()) flatten(e, path + "[]", doc, out);
}

}  // namespace

TEST(ReportJson, CarriesFormatAndVersion) {
  const ordered_json j = report_to_json(full_report());
  EXPECT_EQ(j["format"], "zsim.report");
  EXPECT_EQ(j["version"], 1);
}

TEST(ReportJson, SchemaDocumentListsTheIssuesRequiredFields) {
  const auto doc = documented_fields();
  for (const char* p : {"model.params", "memory.gpu.params", "memory.gpu.grads", "memory.gpu.optimizer",
                        "memory.gpu.activations", "memory.gpu.buffers", "memory.gpu.peak", "memory.gpu.capacity",
                        "memory.cpu.peak", "memory.cpu.capacity", "memory.nvme.peak", "memory.nvme.capacity",
                        "comm.per_gpu_bytes.forward", "comm.per_gpu_bytes.backward", "comm.per_gpu_bytes.step",
                        "comm.per_gpu_bytes.total", "comm.cross_node_bytes_per_gpu", "comm.collectives[].phase",
                        "comm.collectives[].op", "comm.collectives[].group_size", "comm.collectives[].bytes",
                        "comm.collectives[].count", "fits"})
    EXPECT_TRUE(doc.count(p)) << p;
}

TEST(ReportJson, EveryDocumentedFieldIsPresent) {
  const auto doc = documented_fields();
  ASSERT_GT(doc.size(), 100u);
  std::set<std::string> present;
  flatten(report_to_json(full_report()), "", doc, present);
  for (const auto& [path, f] : doc)
    if (!f.optional) {
      EXPECT_TRUE(present.count(path)) << "documented but not written: " << path;
    }
}

TEST(ReportJson, EveryFieldIsDocumented) {
  const auto doc = documented_fields();
  std::set<std::string> present;
  flatten(report_to_json(full_report()), "", doc, present);
  for (const std::string& path : present) EXPECT_TRUE(doc.count(path)) << "written but not documented: " << path;
}

TEST(ReportJson, ValuesAreTheWalksInBytes) {
  const Report r = full_report();
  const ordered_json j = report_to_json(r);
  EXPECT_EQ(j["model"]["params"], S::kP);
  EXPECT_EQ(j["memory"]["gpu"]["peak"], S::kGpuPeak);
  EXPECT_EQ(j["memory"]["gpu"]["buffer_detail"]["bucket"], S::kLayer);
  EXPECT_EQ(j["memory"]["gpu"]["headroom"], -1);
  EXPECT_EQ(j["memory"]["gpu"]["fits"], false);
  EXPECT_EQ(j["memory"]["nvme"]["optimizer"], S::kGpn * S::kOptShard);
  EXPECT_EQ(j["memory"]["cpu"]["buffer_detail"]["swap"], S::kGpn * S::kSwap);
  EXPECT_EQ(j["memory"]["first_overflow"]["tier"], "gpu");
  EXPECT_EQ(j["memory"]["first_overflow"]["op"]["name"], r.memory.first_overflow->op_name);
  EXPECT_EQ(j["comm"]["per_gpu_bytes"]["total"], r.comm.per_gpu.total());
  EXPECT_EQ(j["comm"]["cross_node_bytes_per_node"], 3 * 2 * S::kLayer * (S::kNodes - 1) / S::kNodes);
  EXPECT_EQ(j["comm"]["collectives"].size(), 3u);
  EXPECT_EQ(j["comm"]["collectives"][2]["op"], "reduce_scatter");
  EXPECT_EQ(j["comm"]["collectives"][2]["count"], 2);
  EXPECT_EQ(j["comm"]["copies_per_node"]["nvme_read"]["step"], S::kGpn * S::kOptShard);
  EXPECT_EQ(j["fits"], false);
}

TEST(ReportJson, UnusedTierHasNullPeakOpAndFittingReportHasNullOverflow) {
  const ordered_json j =
      report_to_json(make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu)));
  EXPECT_TRUE(j["memory"]["nvme"]["peak_op"].is_null());
  EXPECT_TRUE(j["memory"]["first_overflow"].is_null());
  EXPECT_EQ(j["fits"], true);
}

TEST(ReportJson, TimeIsAbsentUnlessAttached) {
  EXPECT_FALSE(report_to_json(full_report()).contains("time"));
}

TEST(ReportJson, AttachedTimeIsWrittenUnderTimeAsGiven) {
  Report r = full_report();
  r.time = ReportTime{ordered_json{{"step_s", 1.25}, {"tokens_per_s", 26214.4}}, "Time per step: 1.25 s\n"};
  const ordered_json j = report_to_json(r);
  EXPECT_EQ(j["time"]["step_s"], 1.25);
  EXPECT_EQ(j["time"]["tokens_per_s"], 26214.4);
}

TEST(ReportJson, AttachedResolvedScenarioIsWrittenUnderScenarioAsGiven) {
  Report r = full_report();
  EXPECT_FALSE(report_to_json(r).contains("scenario"));
  r.scenario = ordered_json{{"model", {{"layers", 2}}}, {"zero_optimization", {{"stage", 3}}}};
  const ordered_json j = report_to_json(r);
  EXPECT_EQ(j["scenario"]["model"]["layers"], 2);
  EXPECT_EQ(j["scenario"]["zero_optimization"]["stage"], 3);
}

TEST(ReportJson, JsonTextIsTheJsonIndentedWithATrailingNewline) {
  const Report r = full_report();
  const std::string t = report_json_text(r);
  EXPECT_EQ(t.back(), '\n');
  EXPECT_EQ(ordered_json::parse(t), report_to_json(r));
  EXPECT_EQ(t.substr(0, 4), "{\n  ");
}

TEST(ReportJson, WritesAFileThatParsesBackToTheSameJson) {
  const std::string path = ::testing::TempDir() + "report_json_test_report.json";
  const Report r = full_report();
  write_report_json(r, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::ifstream in(path);
  EXPECT_EQ(ordered_json::parse(in), report_to_json(r));
  std::remove(path.c_str());
}

TEST(ReportJson, UnwritablePathThrowsAndLeavesNothing) {
  EXPECT_THROW(write_report_json(full_report(), "/nonexistent-dir/report.json"), std::runtime_error);
}

TEST(ReportJson, EveryFieldIsDocumentedAlsoWithTimeAttached) {
  Report r = full_report();
  r.time = ReportTime{ordered_json{{"step_s", 1.25}}, ""};
  r.scenario = ordered_json{{"model", {{"layers", 2}}}};
  const auto doc = documented_fields();
  std::set<std::string> present;
  flatten(report_to_json(r), "", doc, present);
  EXPECT_TRUE(present.count("time"));
  EXPECT_TRUE(present.count("scenario"));
  for (const std::string& path : present) EXPECT_TRUE(doc.count(path)) << "written but not documented: " << path;
}

// Issue 59: a DeepSpeed report says which figures priced it; every field it writes for them is documented.
TEST(ReportJson, UnderDeepSpeedTheFiguresUsedAreWrittenAndDocumented) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.fitted_under.torch = "2.11.0+cu130";
  const ordered_json j = report_to_json(make_report(sc, small_step(Tier::cpu)));
  const ordered_json& f = j["deepspeed_figures"];
  EXPECT_TRUE(f["profile"].is_null());
  EXPECT_EQ(f["fitted_under"], ordered_json({{"torch", "2.11.0+cu130"}}));
  EXPECT_EQ(f["host"]["source"], "none");
  EXPECT_EQ(f["gpu"]["source"], "data_sheet");
  EXPECT_EQ(f["outside_allocator"]["source"], "default");
  EXPECT_EQ(f["outside_allocator"]["bytes"], j["memory"]["gpu"]["outside_allocator"]);
  EXPECT_EQ(j["memory"]["gpu"]["outside_allocator_default"], true);
  const auto doc = documented_fields();
  std::set<std::string> present;
  flatten(j, "", doc, present);
  for (const std::string& path : present) EXPECT_TRUE(doc.count(path)) << "written but not documented: " << path;
}
