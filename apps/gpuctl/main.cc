// gpuctl: the user's command-line tool. All behaviour lives in src/cli.
#include <iostream>

#include "cli/gpuctl.h"

int main(int argc, char** argv) {
  return gpucloud::cli::RunGpuctl(argc, argv, std::cin, std::cout, std::cerr);
}
