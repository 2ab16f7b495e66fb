// gpucloud: the platform's server-side binary. Subcommands: sim (more to come: server, agent, up).
#include <cstring>
#include <iostream>

#include "sim/command.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sim") == 0) {
    return gpucloud::sim::RunSim(argc - 1, argv + 1, std::cout, std::cerr);
  }
  std::cerr << "usage: gpucloud sim --help\n";
  return argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) ? 0
                                                                                                 : 2;
}
