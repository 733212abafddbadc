// `zrun calibrate`: with one GPU, measures in this process; with several, launches one worker per GPU (as
// zrun does) which measure the collectives together, then rank 0 measures the rest and writes the profile.
#pragma once

namespace zrun::calibrate {

// argv[0] is "calibrate" (zrun's argv without the program).
int run_calibrate(int argc, const char* const* argv);

}  // namespace zrun::calibrate
