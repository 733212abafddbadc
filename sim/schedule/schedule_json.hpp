// Schedule <-> JSON, format "zsim.schedule" version 1 (docs/schedule-format.md): the file `zsim plan
// --emit-schedule` writes and zrun reads. Reading validates everything and reports bad input as
// InputError naming the JSON path (e.g. "ops[12].bytes").
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "sim/schedule/schedule.hpp"

namespace zsim {

// Every field of the schedule; enums as strings; ops name their stream and group by name.
// Keys keep the documented order. Throws std::logic_error if stream or group names are not unique
// (they are how ops refer to them).
nlohmann::ordered_json schedule_to_json(const Schedule& s);
std::string schedule_to_json_text(const Schedule& s);  // pretty-printed, one op per line

// `source` names the input in error messages (a file name, or "" for <input>).
Schedule schedule_from_json(const nlohmann::json& j, const std::string& source = "");
Schedule schedule_from_json_text(std::string_view text, const std::string& source = "");

// Files. Reading: InputError for a missing file, a syntax error (with line:column) or a bad schedule.
// Writing goes through a temporary file and a rename, so no partial file is left behind.
Schedule read_schedule_json(const std::string& path);
void write_schedule_json(const Schedule& s, const std::string& path);

}  // namespace zsim
