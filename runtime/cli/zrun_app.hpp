// `zrun`: either the launcher (started by a user: spawns one worker per local GPU) or one worker (started
// by zrun's launcher, torchrun, srun or mpirun): plans, meets the other ranks, builds the communicators
// of the schedule's groups, checks them, and trains (runtime/exec/trainer.hpp).
#pragma once

namespace zrun {

int run_zrun(int argc, const char* const* argv);

}  // namespace zrun
