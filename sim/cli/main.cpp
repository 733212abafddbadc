// zsim entry point; everything lives in cli_app.cpp.
#include <iostream>

#include "sim/cli/cli_app.hpp"

int main(int argc, char** argv) { return zsim::run_cli(argc, argv, std::cout, std::cerr); }
