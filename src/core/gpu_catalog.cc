#include "core/gpu_catalog.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "core/text.h"

namespace gpucloud {
namespace {

// MIG profiles share one shape on A100, H100 and H200; only the memory per slice differs
// (../shared/reference/nvidia.md, from NVIDIA's MIG user guide and mig-parted). `gb` holds the
// nominal memory of the 1g, 1g-double, 2g, 3g, 4g and 7g instances in GB.
std::vector<MigProfile> MigTable(int gb_1g, int gb_1g2, int gb_2g, int gb_3g, int gb_4g,
                                 int gb_7g) {
  auto p = [](std::string name, int compute, int mem_slices, int gb, int max,
              std::vector<int> starts) {
    return MigProfile{std::move(name), compute, mem_slices, GiB(gb), max, std::move(starts)};
  };
  auto n = [](int g, int gb) { return Cat(g, "g.", gb, "gb"); };
  return {
      p(n(1, gb_1g), 1, 1, gb_1g, 7, {0, 1, 2, 3, 4, 5, 6}),
      p(n(1, gb_1g) + "+me", 1, 1, gb_1g, 1, {0, 1, 2, 3, 4, 5, 6}),
      p(n(1, gb_1g2), 1, 2, gb_1g2, 4, {0, 2, 4, 6}),
      p(n(2, gb_2g), 2, 2, gb_2g, 3, {0, 2, 4}),
      p(n(3, gb_3g), 3, 4, gb_3g, 2, {0, 4}),
      p(n(4, gb_4g), 4, 4, gb_4g, 1, {0}),
      p(n(7, gb_7g), 7, 8, gb_7g, 1, {0}),
  };
}

// Prices are typical public-cloud on-demand list prices per GPU-hour (2024-2025); operators
// override them per node pool.
std::vector<GpuType> BuiltinTypes() {
  auto t = [](std::string name, std::string family, int gb, GpuArch arch, int cc,
              int64_t speed_milli, int64_t price_cents) {
    GpuType g;
    g.name = std::move(name);
    g.accelerator = Cat("nvidia-", family == "rtx4090" ? "rtx-4090" : family);
    g.family = std::move(family);
    g.memory = GiB(gb);
    g.arch = arch;
    g.compute_capability = cc;
    g.relative_speed_milli = speed_milli;
    g.on_demand_price_per_hour = Cents(price_cents);
    return g;
  };
  std::vector<GpuType> types = {
      t("V100-16GB", "v100", 16, GpuArch::kVolta, 70, 1000, 248),
      t("V100-32GB", "v100", 32, GpuArch::kVolta, 70, 1000, 306),
      t("T4", "t4", 16, GpuArch::kTuring, 75, 400, 53),
      t("A10", "a10", 24, GpuArch::kAmpere, 86, 700, 101),
      t("L40S", "l40s", 48, GpuArch::kAda, 89, 1400, 186),
      t("A100-40GB", "a100", 40, GpuArch::kAmpere, 80, 2000, 367),
      t("A100-80GB", "a100", 80, GpuArch::kAmpere, 80, 2200, 410),
      t("H100-80GB", "h100", 80, GpuArch::kHopper, 90, 4000, 698),
      t("H200-141GB", "h200", 141, GpuArch::kHopper, 90, 4600, 850),
      t("RTX-4090", "rtx4090", 24, GpuArch::kAda, 89, 1300, 69),
  };
  for (GpuType& g : types) {
    if (g.name == "A100-40GB") g.mig_profiles = MigTable(5, 10, 10, 20, 20, 40);
    if (g.name == "A100-80GB" || g.name == "H100-80GB") {
      g.mig_profiles = MigTable(10, 20, 20, 40, 40, 80);
    }
    if (g.name == "H200-141GB") g.mig_profiles = MigTable(18, 35, 35, 71, 71, 141);
  }
  return types;
}

// "NVIDIA A100-SXM4-80GB" -> {"nvidia", "a100", "sxm4", "80gb"}.
std::vector<std::string> Tokens(std::string_view text) { return SplitAny(ToLower(text), " -_/"); }

// A token like "80gb" gives 80; anything else gives 0.
int GbToken(std::string_view tok) {
  if (!tok.ends_with("gb") || tok.size() < 3) return 0;
  int v = 0;
  for (char c : tok.substr(0, tok.size() - 2)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
    v = v * 10 + (c - '0');
    if (v > 100000) return 0;
  }
  return v;
}

bool WithinTolerance(MiB a, MiB b) {
  int64_t diff = std::llabs(a.raw() - b.raw());
  return diff * 100 <= std::max(a.raw(), b.raw()) * 12;  // 12 percent
}

}  // namespace

std::string_view GpuArchName(GpuArch arch) {
  switch (arch) {
    case GpuArch::kVolta:
      return "Volta";
    case GpuArch::kTuring:
      return "Turing";
    case GpuArch::kAmpere:
      return "Ampere";
    case GpuArch::kAda:
      return "Ada";
    case GpuArch::kHopper:
      return "Hopper";
    case GpuArch::kUnknown:
      break;
  }
  return "Unknown";
}

const MigProfile* GpuType::FindMigProfile(std::string_view profile) const {
  for (const MigProfile& p : mig_profiles) {
    if (EqualsIgnoreCase(p.name, profile)) return &p;
  }
  return nullptr;
}

const GpuCatalog& GpuCatalog::Default() {
  static const GpuCatalog* catalog = new GpuCatalog(BuiltinTypes());
  return *catalog;
}

GpuCatalog::GpuCatalog(std::vector<GpuType> types) : types_(std::move(types)) {}

const GpuType* GpuCatalog::Find(std::string_view name) const {
  for (const GpuType& t : types_) {
    if (EqualsIgnoreCase(t.name, name)) return &t;
  }
  return nullptr;
}

std::vector<const GpuType*> GpuCatalog::Resolve(std::string_view user_text) const {
  if (const GpuType* exact = Find(user_text)) return {exact};
  std::vector<std::string> tokens = Tokens(user_text);
  // Families may be written in one token ("a100") or two ("rtx 4090").
  std::string family;
  int gb = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (int v = GbToken(tokens[i])) gb = v;
    std::string joined = i + 1 < tokens.size() ? tokens[i] + tokens[i + 1] : "";
    for (const GpuType& t : types_) {
      if (family.empty() && (t.family == tokens[i] || t.family == joined)) family = t.family;
    }
  }
  std::vector<const GpuType*> out;
  if (family.empty()) return out;
  for (const GpuType& t : types_) {
    if (t.family != family) continue;
    if (gb != 0 && !WithinTolerance(t.memory, GiB(gb))) continue;
    out.push_back(&t);
  }
  return out;
}

GpuType GpuCatalog::FromHardware(std::string_view reported_name, MiB total_memory) const {
  std::vector<const GpuType*> candidates = Resolve(reported_name);
  const GpuType* best = nullptr;
  for (const GpuType* t : candidates) {
    if (total_memory.raw() > 0 && !WithinTolerance(t->memory, total_memory)) continue;
    if (best == nullptr || std::llabs(t->memory.raw() - total_memory.raw()) <
                               std::llabs(best->memory.raw() - total_memory.raw())) {
      best = t;
    }
  }
  if (best != nullptr) return *best;
  GpuType generic;
  std::vector<std::string> tokens = Tokens(reported_name);
  std::erase_if(
      tokens, [](const std::string& s) { return s == "nvidia" || s == "tesla" || s == "geforce"; });
  generic.name = Cat("generic-", tokens.empty() ? "gpu" : Join(tokens, "-"));
  generic.family = generic.name;
  generic.accelerator = generic.name;
  generic.memory = total_memory;
  generic.generic = true;
  return generic;
}

std::vector<const GpuType*> GpuCatalog::TypesWithMigProfile(std::string_view profile) const {
  std::vector<const GpuType*> out;
  for (const GpuType& t : types_) {
    if (t.FindMigProfile(profile) != nullptr) out.push_back(&t);
  }
  return out;
}

std::string GpuCatalog::KnownNames() const {
  std::vector<std::string> names;
  for (const GpuType& t : types_) names.push_back(t.name);
  return Join(names, ", ");
}

}  // namespace gpucloud
