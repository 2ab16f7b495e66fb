// gpucloud: the platform's server-side binary. Subcommands: server, agent, up, sim.
#include <cstring>
#include <iostream>

#include "agent/command.h"
#include "server/command.h"
#include "sim/command.h"
#include "up/command.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sim") == 0) {
    return gpucloud::sim::RunSim(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc >= 2 && std::strcmp(argv[1], "server") == 0) {
    return gpucloud::server::RunServer(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc >= 2 && std::strcmp(argv[1], "agent") == 0) {
    return gpucloud::agent::RunAgent(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc >= 2 && std::strcmp(argv[1], "up") == 0) {
    return gpucloud::up::RunUp(argc - 1, argv + 1, std::cout, std::cerr);
  }
  std::cerr << "usage: gpucloud server|agent|up|sim --help\n";
  return argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) ? 0
                                                                                               : 2;
}
