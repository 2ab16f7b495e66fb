// gpucloud: the platform's server-side binary. Subcommands: sim, agent (more to come: server,
// up).
#include <cstring>
#include <iostream>

#include "agent/command.h"
#include "sim/command.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sim") == 0) {
    return gpucloud::sim::RunSim(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc >= 2 && std::strcmp(argv[1], "agent") == 0) {
    return gpucloud::agent::RunAgent(argc - 1, argv + 1, std::cout, std::cerr);
  }
  std::cerr << "usage: gpucloud sim --help | gpucloud agent --help\n";
  return argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) ? 0
                                                                                                 : 2;
}
