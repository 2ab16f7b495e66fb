#include "cli/label_selector.h"

#include "core/object_meta.h"
#include "core/text.h"

namespace gpucloud::cli {

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector s;
  for (const std::string& raw : SplitAny(text, ",")) {
    const std::string& part = raw;
    if (part.empty()) continue;
    Term t;
    const size_t ne = part.find("!="), eq = part.find('=');
    if (ne != std::string::npos) {
      t = {part.substr(0, ne), part.substr(ne + 2), Term::Op::kNe};
    } else if (eq != std::string::npos) {
      const size_t skip = part.compare(eq, 2, "==") == 0 ? 2 : 1;
      t = {part.substr(0, eq), part.substr(eq + skip), Term::Op::kEq};
    } else if (part[0] == '!') {
      t = {part.substr(1), "", Term::Op::kAbsent};
    } else {
      t = {part, "", Term::Op::kExists};
    }
    if (!ValidateLabelKey(t.key).ok() || !ValidateLabelValue(t.value).ok()) {
      return absl::InvalidArgumentError(Cat("label selector: bad term \"", part, "\""));
    }
    s.terms_.push_back(std::move(t));
  }
  return s;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Term& t : terms_) {
    auto it = labels.find(t.key);
    const bool has = it != labels.end();
    const bool ok = t.op == Term::Op::kEq       ? has && it->second == t.value
                    : t.op == Term::Op::kNe     ? !has || it->second != t.value
                    : t.op == Term::Op::kExists ? has
                                                : !has;
    if (!ok) return false;
  }
  return true;
}

}  // namespace gpucloud::cli
