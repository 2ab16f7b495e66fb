#include "agent/proc_stat.h"

#include <fstream>
#include <sstream>
#include <string>

#include "core/text.h"

namespace gpucloud::agent {

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream f(Cat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(f, text)) return std::nullopt;
  size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos || text.size() < close + 3) return std::nullopt;
  std::istringstream in(text.substr(close + 2));
  ProcStat st;
  std::string field;
  // Fields after the name start at 3 (state); starttime is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 3) st.state = field[0];
  }
  st.start_time = std::stoull(field);
  return st;
}

bool Alive(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  std::optional<ProcStat> st = ReadProcStat(pid);
  return st && st->start_time == start_time && st->state != 'Z';
}

}  // namespace gpucloud::agent
