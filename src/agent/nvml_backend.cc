#include "agent/nvml_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include "core/log.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

// The NVML types used here (from NVIDIA's nvml.h, as go-nvml declares them).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
using nvmlEventSet_t = struct nvmlEventSet_st*;
constexpr unsigned long long kEventDoubleBitEcc = 0x2, kEventXidCritical = 0x8;
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for XidCritical
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlPciInfo_t {  // nvmlPciInfo_t of nvmlDeviceGetPciInfo_v3
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
// MIG (nvmlDeviceGetAttributes_v2, nvmlGpuInstanceGetInfo).
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};
using nvmlGpuInstance_t = struct nvmlGpuInstance_st*;
struct nvmlGpuInstancePlacement_t {
  unsigned int start, size;  // in memory slices
};
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
};

// Field values (nvmlDeviceGetFieldValues): the ids read here, and the union as a 64-bit value.
struct nvmlFieldValue_t {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;  // nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint
  nvmlReturn_t nvmlReturn;
  union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
  } value;
};
constexpr unsigned int kFieldMemoryTemp = 82, kFieldNvlinkDataTx = 138, kFieldNvlinkDataRx = 139;
constexpr unsigned int kAllLinks = 0xFFFFFFFFu;  // scopeId: summed over every link
// GPU Performance Monitoring (Hopper and later; drivers from R520).
using nvmlGpmSample_t = struct nvmlGpmSample_st*;
struct nvmlGpmSupport_t {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION (1)
  unsigned int isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION (1)
  unsigned int numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[210];  // NVML_GPM_METRIC_MAX of recent drivers; only numMetrics read
};
constexpr unsigned int kGpmGraphicsUtil = 1, kGpmAnyTensorUtil = 5;  // percent, 0 to 100

template <typename F>
F Symbol(void* lib, const char* versioned, const char* plain = nullptr) {
  void* f = dlsym(lib, versioned);
  if (f == nullptr && plain != nullptr) f = dlsym(lib, plain);
  return reinterpret_cast<F>(f);
}

class NvmlBackend final : public GpuBackend {
 public:
  NvmlBackend(void* lib, const GpuCatalog& catalog) : lib_(lib), catalog_(catalog) {}
  ~NvmlBackend() override {
    for (auto& [key, sample] : gpm_previous_) gpm_free_(sample);
    if (events_ != nullptr && event_set_free_ != nullptr) event_set_free_(events_);
    if (initialized_ && shutdown_) shutdown_();
    dlclose(lib_);
  }

  absl::Status Load() {
    struct Required {
      const char* versioned;
      const char* plain;
      void** into;
    };
    Required required[] = {
        {"nvmlInit_v2", "nvmlInit", reinterpret_cast<void**>(&init_)},
        {"nvmlShutdown", nullptr, reinterpret_cast<void**>(&shutdown_)},
        {"nvmlErrorString", nullptr, reinterpret_cast<void**>(&error_string_)},
        {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", reinterpret_cast<void**>(&get_count_)},
        {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex",
         reinterpret_cast<void**>(&get_handle_)},
        {"nvmlDeviceGetName", nullptr, reinterpret_cast<void**>(&get_name_)},
        {"nvmlDeviceGetUUID", nullptr, reinterpret_cast<void**>(&get_uuid_)},
        {"nvmlDeviceGetMemoryInfo", nullptr, reinterpret_cast<void**>(&get_memory_)},
        {"nvmlSystemGetDriverVersion", nullptr, reinterpret_cast<void**>(&driver_version_)},
    };
    for (const Required& r : required) {
      *r.into = dlsym(lib_, r.versioned);
      if (*r.into == nullptr && r.plain != nullptr) *r.into = dlsym(lib_, r.plain);
      if (*r.into == nullptr) {
        return absl::FailedPreconditionError(
            Cat("NVML library lacks the required symbol ", r.versioned));
      }
    }
    // Optional: left null when the driver is too old or the function absent.
    cuda_version_ = Symbol<decltype(cuda_version_)>(lib_, "nvmlSystemGetCudaDriverVersion_v2",
                                                    "nvmlSystemGetCudaDriverVersion");
    get_pci_ = Symbol<decltype(get_pci_)>(lib_, "nvmlDeviceGetPciInfo_v3");
    get_mig_mode_ = Symbol<decltype(get_mig_mode_)>(lib_, "nvmlDeviceGetMigMode");
    get_util_ = Symbol<decltype(get_util_)>(lib_, "nvmlDeviceGetUtilizationRates");
    get_temp_ = Symbol<decltype(get_temp_)>(lib_, "nvmlDeviceGetTemperature");
    get_power_ = Symbol<decltype(get_power_)>(lib_, "nvmlDeviceGetPowerUsage");
    get_energy_ = Symbol<decltype(get_energy_)>(lib_, "nvmlDeviceGetTotalEnergyConsumption");
    get_clock_ = Symbol<decltype(get_clock_)>(lib_, "nvmlDeviceGetClockInfo");
    nvlink_state_ = Symbol<decltype(nvlink_state_)>(lib_, "nvmlDeviceGetNvLinkState");
    nvlink_remote_pci_ =
        Symbol<decltype(nvlink_remote_pci_)>(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    event_set_create_ = Symbol<decltype(event_set_create_)>(lib_, "nvmlEventSetCreate");
    supported_events_ =
        Symbol<decltype(supported_events_)>(lib_, "nvmlDeviceGetSupportedEventTypes");
    register_events_ = Symbol<decltype(register_events_)>(lib_, "nvmlDeviceRegisterEvents");
    event_wait_ = Symbol<decltype(event_wait_)>(lib_, "nvmlEventSetWait_v2", "nvmlEventSetWait");
    event_set_free_ = Symbol<decltype(event_set_free_)>(lib_, "nvmlEventSetFree");
    get_ecc_ = Symbol<decltype(get_ecc_)>(lib_, "nvmlDeviceGetTotalEccErrors");
    get_remapped_ = Symbol<decltype(get_remapped_)>(lib_, "nvmlDeviceGetRemappedRows");
    common_ancestor_ =
        Symbol<decltype(common_ancestor_)>(lib_, "nvmlDeviceGetTopologyCommonAncestor");
    max_mig_ = Symbol<decltype(max_mig_)>(lib_, "nvmlDeviceGetMaxMigDeviceCount");
    mig_by_index_ = Symbol<decltype(mig_by_index_)>(lib_, "nvmlDeviceGetMigDeviceHandleByIndex");
    gi_id_ = Symbol<decltype(gi_id_)>(lib_, "nvmlDeviceGetGpuInstanceId");
    attributes_ = Symbol<decltype(attributes_)>(lib_, "nvmlDeviceGetAttributes_v2");
    gi_by_id_ = Symbol<decltype(gi_by_id_)>(lib_, "nvmlDeviceGetGpuInstanceById");
    gi_info_ = Symbol<decltype(gi_info_)>(lib_, "nvmlGpuInstanceGetInfo");
    pcie_replays_ = Symbol<decltype(pcie_replays_)>(lib_, "nvmlDeviceGetPcieReplayCounter");
    enc_util_ = Symbol<decltype(enc_util_)>(lib_, "nvmlDeviceGetEncoderUtilization");
    dec_util_ = Symbol<decltype(dec_util_)>(lib_, "nvmlDeviceGetDecoderUtilization");
    field_values_ = Symbol<decltype(field_values_)>(lib_, "nvmlDeviceGetFieldValues");
    gpm_support_ = Symbol<decltype(gpm_support_)>(lib_, "nvmlGpmQueryDeviceSupport");
    gpm_alloc_ = Symbol<decltype(gpm_alloc_)>(lib_, "nvmlGpmSampleAlloc");
    gpm_free_ = Symbol<decltype(gpm_free_)>(lib_, "nvmlGpmSampleFree");
    gpm_get_ = Symbol<decltype(gpm_get_)>(lib_, "nvmlGpmSampleGet");
    gpm_mig_get_ = Symbol<decltype(gpm_mig_get_)>(lib_, "nvmlGpmMigSampleGet");
    gpm_metrics_ = Symbol<decltype(gpm_metrics_)>(lib_, "nvmlGpmMetricsGet");
    if (!gpm_support_ || !gpm_alloc_ || !gpm_free_ || !gpm_get_ || !gpm_metrics_) {
      gpm_support_ = nullptr;  // GPM needs all of them (a driver before R520 has none)
    }
    nvmlReturn_t rc = init_();
    if (rc == kDriverNotLoaded) {
      return absl::UnavailableError("NVML: the NVIDIA driver is not loaded");
    }
    if (rc != kSuccess) return Error("nvmlInit_v2", rc);
    initialized_ = true;
    return absl::OkStatus();
  }

  std::string_view Name() const override { return "nvml"; }

  absl::StatusOr<NodeGpus> Discover() override {
    NodeGpus out;
    out.backend = "nvml";
    char buf[96] = {};
    if (nvmlReturn_t rc = driver_version_(buf, sizeof buf); rc != kSuccess) {
      return Error("nvmlSystemGetDriverVersion", rc);
    }
    out.driver_version = buf;
    if (cuda_version_ != nullptr) {
      int v = 0;
      if (cuda_version_(&v) == kSuccess) out.cuda_driver_version = v;
    }
    absl::StatusOr<std::vector<nvmlDevice_t>> devices = Devices();
    if (!devices.ok()) return devices.status();
    mig_instances_.clear();
    for (size_t i = 0; i < devices->size(); ++i) {
      nvmlDevice_t d = (*devices)[i];
      GpuDevice g;
      g.index = static_cast<int>(i);
      char name[96] = {}, uuid[96] = {};
      if (nvmlReturn_t rc = get_name_(d, name, sizeof name); rc != kSuccess) {
        return Error("nvmlDeviceGetName", rc);
      }
      if (nvmlReturn_t rc = get_uuid_(d, uuid, sizeof uuid); rc != kSuccess) {
        return Error("nvmlDeviceGetUUID", rc);
      }
      g.name = name;
      g.uuid = uuid;
      nvmlMemory_t mem{};
      if (nvmlReturn_t rc = get_memory_(d, &mem); rc != kSuccess) {
        return Error("nvmlDeviceGetMemoryInfo", rc);
      }
      g.memory = MiB(static_cast<int64_t>(mem.total >> 20));
      if (get_pci_ != nullptr) {
        nvmlPciInfo_t pci{};
        if (get_pci_(d, &pci) == kSuccess) g.pci_bus_id = pci.bus_id;
      }
      if (get_mig_mode_ != nullptr) {
        unsigned int current = 0, pending = 0;
        if (get_mig_mode_(d, &current, &pending) == kSuccess) g.mig_enabled = current == 1;
      }
      g.catalog_type = catalog_.FromHardware(g.name, g.memory).name;
      if (g.mig_enabled) DiscoverMig(d, g);
      out.gpus.push_back(std::move(g));
    }
    std::vector<std::vector<int>> links = NvlinkCounts(*devices, out.gpus);
    AssignNvlinkIslands(links, out.gpus);
    out.topology = TopologyMatrix(*devices, links);
    return out;
  }

  // Active NVLinks of each GPU by the peer at their far end: [i][j] links from GPU i to GPU j,
  // [i][n] links to NVSwitches. All zero when NVML cannot tell.
  std::vector<std::vector<int>> NvlinkCounts(const std::vector<nvmlDevice_t>& devices,
                                             const std::vector<GpuDevice>& gpus) {
    const int n = static_cast<int>(devices.size());
    std::vector<std::vector<int>> links(n, std::vector<int>(n + 1, 0));
    if (nvlink_state_ == nullptr || nvlink_remote_pci_ == nullptr) return links;
    for (int i = 0; i < n; ++i) {
      for (unsigned int link = 0; link < 18; ++link) {  // NVML_NVLINK_MAX_LINKS
        unsigned int active = 0;
        if (nvlink_state_(devices[i], link, &active) != kSuccess) break;  // no such link
        nvmlPciInfo_t pci{};
        if (active == 0 || nvlink_remote_pci_(devices[i], link, &pci) != kSuccess) continue;
        int peer = n;
        for (int j = 0; j < n; ++j) {
          if (j != i && gpus[j].pci_bus_id == pci.bus_id) peer = j;
        }
        ++links[i][peer];
      }
    }
    return links;
  }

  // `nvidia-smi topo -m` in a matrix: NVLink first (the number of active links between two
  // GPUs, directly or through NVSwitches), else the PCIe path from
  // nvmlDeviceGetTopologyCommonAncestor. Empty without that function.
  std::vector<std::vector<std::string>> TopologyMatrix(const std::vector<nvmlDevice_t>& devices,
                                                       const std::vector<std::vector<int>>& links) {
    const int n = static_cast<int>(devices.size());
    if (common_ancestor_ == nullptr || n == 0) return {};
    std::vector<std::vector<std::string>> m(n, std::vector<std::string>(n));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) {
          m[i][j] = "X";
          continue;
        }
        int nv = links[i][j] + std::min(links[i][n], links[j][n]);
        if (nv > 0) {
          m[i][j] = Cat("NV", nv);
          continue;
        }
        int level = -1;
        if (common_ancestor_(devices[i], devices[j], &level) != kSuccess) {
          m[i][j] = "?";
          continue;
        }
        m[i][j] = level <= 10   ? "PIX"
                  : level <= 20 ? "PXB"
                  : level <= 30 ? "PHB"
                  : level <= 40 ? "NODE"
                                : "SYS";
      }
    }
    return m;
  }

  // The MIG devices of a GPU in MIG mode: each one's GPU instance gives its placement (start and
  // size in memory slices) and its attributes the compute slices; the two name the profile in
  // the catalog ("+me" variants, indistinguishable this way, read as the plain profile). A MIG
  // device NVML cannot describe is left out, with a log line.
  void DiscoverMig(nvmlDevice_t d, GpuDevice& g) {
    if (max_mig_ == nullptr || mig_by_index_ == nullptr || gi_id_ == nullptr ||
        attributes_ == nullptr || gi_by_id_ == nullptr || gi_info_ == nullptr) {
      log::Warn("agent", "GPU is in MIG mode, but this NVML cannot list MIG devices",
                {{"gpu", g.index}});
      return;
    }
    const GpuType* type = catalog_.Find(g.catalog_type);
    unsigned int count = 0;
    if (max_mig_(d, &count) != kSuccess) return;
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t mig = nullptr;
      if (mig_by_index_(d, i, &mig) != kSuccess) continue;  // an empty slot
      char uuid[96] = {};
      unsigned int gi = 0;
      nvmlDeviceAttributes_t attrs{};
      nvmlGpuInstance_t instance = nullptr;
      nvmlGpuInstanceInfo_t info{};
      if (get_uuid_(mig, uuid, sizeof uuid) != kSuccess || gi_id_(mig, &gi) != kSuccess ||
          attributes_(mig, &attrs) != kSuccess || gi_by_id_(d, gi, &instance) != kSuccess ||
          gi_info_(instance, &info) != kSuccess) {
        log::Warn("agent", "MIG device did not answer", {{"gpu", g.index}, {"mig_index", i}});
        continue;
      }
      const MigProfile* profile = nullptr;
      static const std::vector<MigProfile> kNone;
      for (const MigProfile& p : type != nullptr ? type->mig_profiles : kNone) {
        if (p.compute_slices == static_cast<int>(attrs.gpuInstanceSliceCount) &&
            p.memory_slices == static_cast<int>(info.placement.size) &&
            (profile == nullptr || p.name.size() < profile->name.size())) {
          profile = &p;
        }
      }
      if (profile == nullptr) {
        log::Warn("agent", "MIG device matches no profile of its GPU type",
                  {{"gpu", g.index},
                   {"mig_uuid", uuid},
                   {"compute_slices", attrs.gpuInstanceSliceCount},
                   {"memory_slices", info.placement.size},
                   {"type", g.catalog_type}});
        continue;
      }
      g.mig_layout.push_back({profile->name, static_cast<int>(info.placement.start)});
      mig_instances_[g.index].push_back(
          {mig, static_cast<int>(gi), profile->name, static_cast<int>(info.placement.start)});
      g.mig_uuid_by_start[static_cast<int>(info.placement.start)] = uuid;
    }
    std::sort(g.mig_layout.begin(), g.mig_layout.end(),
              [](const MigPlacement& a, const MigPlacement& b) { return a.start < b.start; });
  }

  // NVLink islands: GPUs joined by active NVLinks, directly or through NVSwitches, share an
  // island (numbered by its lowest GPU index); a GPU without active links has none (-1).
  void AssignNvlinkIslands(const std::vector<std::vector<int>>& links,
                           std::vector<GpuDevice>& gpus) {
    const int n = static_cast<int>(links.size());
    const int kSwitch = n;  // one node standing for every NVSwitch
    std::vector<int> parent(n + 1);
    for (int i = 0; i <= n; ++i) parent[i] = i;
    auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::vector<bool> linked(n, false);
    for (int i = 0; i < n; ++i) {
      for (int peer = 0; peer <= kSwitch; ++peer) {
        if (links[i][peer] == 0) continue;
        linked[i] = true;
        parent[find(i)] = find(peer);
      }
    }
    for (int i = 0; i < n; ++i) {
      if (!linked[i]) continue;
      int lowest = i;
      for (int j = 0; j < n; ++j) {
        if (linked[j] && find(j) == find(i)) lowest = std::min(lowest, j);
      }
      gpus[i].nvlink_island = lowest;
    }
  }

  absl::StatusOr<std::vector<GpuSample>> Sample() override {
    absl::StatusOr<std::vector<nvmlDevice_t>> devices = Devices();
    if (!devices.ok()) return devices.status();
    std::vector<GpuSample> out;
    for (size_t i = 0; i < devices->size(); ++i) {
      nvmlDevice_t d = (*devices)[i];
      GpuSample s;
      s.index = static_cast<int>(i);
      nvmlMemory_t mem{};
      if (get_memory_(d, &mem) == kSuccess) {
        s.fb_used = MiB(static_cast<int64_t>(mem.used >> 20));
        s.fb_free = MiB(static_cast<int64_t>(mem.free >> 20));
      }
      nvmlUtilization_t util{};
      if (get_util_ != nullptr && get_util_(d, &util) == kSuccess) {
        s.gpu_util_percent = static_cast<int>(util.gpu);
        s.mem_copy_util_percent = static_cast<int>(util.memory);
      }
      unsigned int v = 0;
      if (get_temp_ != nullptr && get_temp_(d, 0, &v) == kSuccess)
        s.temperature_c = static_cast<int>(v);
      if (get_power_ != nullptr && get_power_(d, &v) == kSuccess) s.power_w = v / 1000.0;
      unsigned long long energy = 0;
      if (get_energy_ != nullptr && get_energy_(d, &energy) == kSuccess) s.energy_mj = energy;
      if (get_clock_ != nullptr && get_clock_(d, 1, &v) == kSuccess)
        s.sm_clock_mhz = static_cast<int>(v);
      if (get_clock_ != nullptr && get_clock_(d, 2, &v) == kSuccess)
        s.mem_clock_mhz = static_cast<int>(v);
      unsigned long long ecc = 0;
      if (get_ecc_ != nullptr && get_ecc_(d, 0, 0, &ecc) == kSuccess) s.ecc_corrected = ecc;
      if (get_ecc_ != nullptr && get_ecc_(d, 1, 0, &ecc) == kSuccess) s.ecc_uncorrected = ecc;
      // Row remapping (A100 and later): rows remapped for correctable and uncorrectable errors.
      unsigned int corr = 0, unc = 0, pending = 0, failed = 0;
      if (get_remapped_ != nullptr &&
          get_remapped_(d, &corr, &unc, &pending, &failed) == kSuccess) {
        s.remapped_rows = static_cast<uint64_t>(corr) + unc;
        s.remapped_rows_correctable = corr;
        s.remapped_rows_uncorrectable = unc;
        s.row_remap_failed = failed != 0;
      }
      SampleMore(d, s);
      out.push_back(s);
    }
    return out;
  }

  // The readings beyond the basic ones: PCIe replays, the video engines, the field values
  // (memory temperature, NVLink traffic), the last Xid, GPM's profiling ratios and the MIG
  // instances. Each is left unset when NVML cannot read it.
  void SampleMore(nvmlDevice_t d, GpuSample& s) {
    unsigned int v = 0, period = 0;
    if (pcie_replays_ != nullptr && pcie_replays_(d, &v) == kSuccess) s.pcie_replays = v;
    if (enc_util_ != nullptr && enc_util_(d, &v, &period) == kSuccess)
      s.enc_util_percent = static_cast<int>(v);
    if (dec_util_ != nullptr && dec_util_(d, &v, &period) == kSuccess)
      s.dec_util_percent = static_cast<int>(v);
    if (field_values_ != nullptr) {
      nvmlFieldValue_t f[3] = {};
      f[0].fieldId = kFieldMemoryTemp;
      f[1].fieldId = kFieldNvlinkDataTx;
      f[2].fieldId = kFieldNvlinkDataRx;
      f[1].scopeId = f[2].scopeId = kAllLinks;
      if (field_values_(d, 3, f) == kSuccess) {
        if (f[0].nvmlReturn == kSuccess)
          s.memory_temperature_c = static_cast<int>(FieldValue(f[0]));
        if (f[1].nvmlReturn == kSuccess && f[2].nvmlReturn == kSuccess) {
          s.nvlink_kib = static_cast<uint64_t>(FieldValue(f[1]) + FieldValue(f[2]));
        }
      }
    }
    if (auto e = std::find_if(event_devices_.begin(), event_devices_.end(),
                              [&](const auto& kv) { return kv.second == s.index; });
        e != event_devices_.end()) {
      auto last = last_xid_.find(s.index);
      s.last_xid = last == last_xid_.end() ? 0 : last->second;
    }
    Gpm(d, s.index, -1, s.gr_engine_active, s.tensor_active);
    auto mig = mig_instances_.find(s.index);
    if (mig == mig_instances_.end()) return;
    for (const MigInstance& m : mig->second) {
      GpuSample::MigInstance i;
      i.gpu_instance_id = m.gpu_instance_id;
      i.profile = m.profile;
      i.start = m.start;
      nvmlMemory_t mem{};
      if (get_memory_(m.handle, &mem) == kSuccess) {
        i.fb_used = MiB(static_cast<int64_t>(mem.used >> 20));
        i.fb_free = MiB(static_cast<int64_t>(mem.free >> 20));
      }
      Gpm(d, s.index, m.gpu_instance_id, i.gr_engine_active, i.tensor_active);
      s.mig.push_back(std::move(i));
    }
  }

  static double FieldValue(const nvmlFieldValue_t& f) {
    switch (f.valueType) {
      case 0:
        return f.value.dVal;
      case 1:
        return f.value.uiVal;
      case 2:
        return static_cast<double>(f.value.ulVal);
      case 4:
        return static_cast<double>(f.value.sllVal);
      case 5:
        return f.value.siVal;
      default:
        return static_cast<double>(f.value.ullVal);
    }
  }

  // GPM: a sample of the GPU (gpu_instance -1) or of one of its MIG instances now; with the
  // previous one, the graphics engine's and the tensor pipes' activity in between, as ratios.
  // A GPU without GPM support (before Hopper) is asked once.
  void Gpm(nvmlDevice_t d, int gpu, int gpu_instance, std::optional<double>& graphics,
           std::optional<double>& tensor) {
    if (gpm_support_ == nullptr) return;
    auto supported = gpm_supported_.find(gpu);
    if (supported == gpm_supported_.end()) {
      nvmlGpmSupport_t support{1, 0};
      bool yes = gpm_support_(d, &support) == kSuccess && support.isSupportedDevice != 0;
      supported = gpm_supported_.emplace(gpu, yes).first;
    }
    if (!supported->second || (gpu_instance >= 0 && gpm_mig_get_ == nullptr)) return;
    nvmlGpmSample_t now = nullptr;
    if (gpm_alloc_(&now) != kSuccess) return;
    nvmlReturn_t rc = gpu_instance < 0
                          ? gpm_get_(d, now)
                          : gpm_mig_get_(d, static_cast<unsigned int>(gpu_instance), now);
    if (rc != kSuccess) {
      gpm_free_(now);
      return;
    }
    auto& previous = gpm_previous_[{gpu, gpu_instance}];
    if (previous != nullptr) {
      auto get = std::make_unique<nvmlGpmMetricsGet_t>();
      *get = {};
      get->version = 1;
      get->numMetrics = 2;
      get->sample1 = previous;
      get->sample2 = now;
      get->metrics[0].metricId = kGpmGraphicsUtil;
      get->metrics[1].metricId = kGpmAnyTensorUtil;
      if (gpm_metrics_(get.get()) == kSuccess) {
        if (get->metrics[0].nvmlReturn == kSuccess) graphics = get->metrics[0].value / 100.0;
        if (get->metrics[1].nvmlReturn == kSuccess) tensor = get->metrics[1].value / 100.0;
      }
      gpm_free_(previous);
    }
    previous = now;
  }

  // The Xid event loop of NVIDIA's device plugin, without its thread: each GPU is registered
  // once for critical Xids and double-bit ECC errors, and every call drains what has arrived
  // (a zero timeout). A driver without the event API reports none.
  std::vector<XidEvent> TakeXids() override {
    std::vector<XidEvent> out;
    if (!event_set_create_ || !register_events_ || !event_wait_) return out;
    if (!events_tried_) {
      events_tried_ = true;
      if (event_set_create_(&events_) != kSuccess) {
        events_ = nullptr;
        return out;
      }
      absl::StatusOr<std::vector<nvmlDevice_t>> devices = Devices();
      if (!devices.ok()) return out;
      for (size_t i = 0; i < devices->size(); ++i) {
        unsigned long long supported = kEventXidCritical | kEventDoubleBitEcc;
        if (supported_events_) supported_events_((*devices)[i], &supported);
        unsigned long long wanted = supported & (kEventXidCritical | kEventDoubleBitEcc);
        if (wanted != 0 && register_events_((*devices)[i], wanted, events_) == kSuccess) {
          event_devices_[(*devices)[i]] = static_cast<int>(i);
        }
      }
    }
    if (events_ == nullptr) return out;
    for (int n = 0; n < 1024; ++n) {
      nvmlEventData_t data{};
      nvmlReturn_t rc = event_wait_(events_, &data, 0);
      if (rc != kSuccess) break;  // NVML_ERROR_TIMEOUT (10): nothing more now
      auto dev = event_devices_.find(data.device);
      int gpu = dev == event_devices_.end() ? -1 : dev->second;
      if (data.eventType & kEventXidCritical)
        out.push_back({gpu, static_cast<int>(data.eventData)});
      if (data.eventType & kEventDoubleBitEcc) out.push_back({gpu, 48});
      if (!out.empty() && gpu >= 0) last_xid_[gpu] = out.back().xid;
    }
    return out;
  }

 private:
  absl::Status Error(const char* call, nvmlReturn_t rc) const {
    const char* text = error_string_ ? error_string_(rc) : nullptr;
    return absl::InternalError(
        Cat(call, " failed: ", text ? text : "unknown error", " (", rc, ")"));
  }

  absl::StatusOr<std::vector<nvmlDevice_t>> Devices() const {
    unsigned int count = 0;
    if (nvmlReturn_t rc = get_count_(&count); rc != kSuccess) {
      return Error("nvmlDeviceGetCount_v2", rc);
    }
    if (count > 1024) return absl::InternalError(Cat("NVML reports ", count, " GPUs"));
    std::vector<nvmlDevice_t> out;
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      if (nvmlReturn_t rc = get_handle_(i, &d); rc != kSuccess) {
        return Error("nvmlDeviceGetHandleByIndex_v2", rc);
      }
      out.push_back(d);
    }
    return out;
  }

  void* lib_;
  const GpuCatalog& catalog_;
  bool initialized_ = false;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  const char* (*error_string_)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_count_)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle_)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name_)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_uuid_)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory_)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*driver_version_)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*cuda_version_)(int*) = nullptr;
  nvmlReturn_t (*get_pci_)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*get_mig_mode_)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*get_util_)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*get_temp_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*get_power_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*get_energy_)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*get_clock_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*get_ecc_)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*get_remapped_)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                unsigned int*) = nullptr;
  nvmlReturn_t (*common_ancestor_)(nvmlDevice_t, nvmlDevice_t,
                                   int*) = nullptr;  // nvmlGpuTopologyLevel_t
  nvmlReturn_t (*max_mig_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*mig_by_index_)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gi_id_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*attributes_)(nvmlDevice_t, nvmlDeviceAttributes_t*) = nullptr;
  nvmlReturn_t (*gi_by_id_)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*gi_info_)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*nvlink_state_)(nvmlDevice_t, unsigned int, unsigned int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci_)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*event_set_create_)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*supported_events_)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*register_events_)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_wait_)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
  nvmlReturn_t (*event_set_free_)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*pcie_replays_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*enc_util_)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*dec_util_)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*field_values_)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*gpm_support_)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*gpm_alloc_)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*gpm_free_)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpm_get_)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpm_mig_get_)(nvmlDevice_t, unsigned int, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpm_metrics_)(nvmlGpmMetricsGet_t*) = nullptr;
  std::map<int, bool> gpm_supported_;                            // by GPU index
  std::map<std::pair<int, int>, nvmlGpmSample_t> gpm_previous_;  // by GPU and GPU instance
  struct MigInstance {                                           // a MIG device Discover found
    nvmlDevice_t handle;
    int gpu_instance_id;
    std::string profile;
    int start;
  };
  std::map<int, std::vector<MigInstance>> mig_instances_;  // by GPU index
  std::map<int, int> last_xid_;  // by GPU index: the last Xid TakeXids saw
  nvmlEventSet_t events_ = nullptr;
  bool events_tried_ = false;
  std::map<nvmlDevice_t, int> event_devices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuBackend>> OpenNvml(const std::string& library,
                                                     const GpuCatalog& catalog) {
  void* lib = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(Cat("cannot load ", library, ": ", why ? why : "not found"));
  }
  auto backend = std::make_unique<NvmlBackend>(lib, catalog);
  if (absl::Status s = backend->Load(); !s.ok()) return s;
  return backend;
}

}  // namespace gpucloud::agent
