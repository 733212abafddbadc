// zrun: the real CUDA/NCCL runtime that executes zsim's schedule (docs/runtime.md).
#include "runtime/cli/zrun_app.hpp"

int main(int argc, char** argv) { return zrun::run_zrun(argc, argv); }
