#include "sched/array_gate.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

namespace gpucloud::sched {

std::vector<bool> AdmitArrayMembers(const std::vector<ArrayMember>& members) {
  struct Array {
    int32_t bound = std::numeric_limits<int32_t>::max();
    int32_t holding = 0;
    std::vector<size_t> candidates;
  };
  std::map<std::string_view, Array> arrays;
  for (size_t i = 0; i < members.size(); ++i) {
    const ArrayMember& m = members[i];
    Array& a = arrays[m.array];
    if (m.parallelism > 0) a.bound = std::min(a.bound, m.parallelism);
    if (m.holding) {
      ++a.holding;
    } else {
      a.candidates.push_back(i);
    }
  }
  std::vector<bool> admit(members.size(), false);
  for (size_t i = 0; i < members.size(); ++i) admit[i] = members[i].holding;
  for (auto& [name, a] : arrays) {
    std::sort(a.candidates.begin(), a.candidates.end(), [&](size_t x, size_t y) {
      return members[x].index != members[y].index ? members[x].index < members[y].index : x < y;
    });
    const int64_t room = std::max<int64_t>(0, int64_t{a.bound} - a.holding);
    for (size_t k = 0; k < a.candidates.size() && static_cast<int64_t>(k) < room; ++k) {
      admit[a.candidates[k]] = true;
    }
  }
  return admit;
}

}  // namespace gpucloud::sched
