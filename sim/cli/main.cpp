// zsim entry point; everything lives in cli_app.cpp.
#include <iostream>

#include "sim/cli/allocator_tuning.hpp"
#include "sim/cli/cli_app.hpp"

int main(int argc, char** argv) {
  zsim::tune_allocator_for_batch_work();
  return zsim::run_cli(argc, argv, std::cout, std::cerr);
}
