// The zsim binary: sim/'s command line with the subcommands of the layers above it (validate/'s `zsim validate`).
#include <iostream>

#include "sim/cli/allocator_tuning.hpp"
#include "sim/cli/cli_app.hpp"
#include "validate/validate_cli.hpp"

int main(int argc, char** argv) {
  zsim::tune_allocator_for_batch_work();
  return zsim::run_cli(argc, argv, std::cout, std::cerr, {zsim::validate_subcommand()});
}
