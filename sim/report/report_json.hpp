// The report as JSON, format "zsim.report" version 1; every field is documented in docs/report-schema.md.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "sim/report/report.hpp"

namespace zsim {

nlohmann::ordered_json report_to_json(const Report& r);
std::string report_json_text(const Report& r);  // indented, ending in a newline: what `--json FILE` holds

// Writes the JSON (indented) through a temporary file and a rename: no partial file on failure.
// Throws std::runtime_error if the file cannot be written.
void write_report_json(const Report& r, const std::string& path);

}  // namespace zsim
