// A fake libnvidia-ml.so.1 for tests of the dlopen path: two (FAKE_NVML_GPUS) H100s with fixed
// readings. FAKE_NVML_INIT_RC sets nvmlInit_v2's return code, FAKE_NVML_COUNT_RC
// nvmlDeviceGetCount_v2's. Built a second time without nvmlDeviceGetUUID
// (FAKE_NVML_OMIT_UUID) to test a library that lacks a required symbol.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Device {
  int index;  // a MIG device: 100 + 10 x its GPU + its slot
};
Device kDevices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

// MIG: FAKE_NVML_MIG="0:3/4@0,1/1@4,1/1@5;1:7/8@0" puts GPU 0 in MIG mode with a GPU instance of
// 3 compute slices over 4 memory slices starting at slice 0 (3g.40gb), and two 1g.10gb at 4 and
// 5; GPU 1 with one 7g.80gb.
struct MigDevice {
  Device handle;
  unsigned int slices, size, start;
};
MigDevice kMig[8][7];
int kMigCount[8];

void ParseMig() {  // again at each look: tests change the variable between backends
  for (int& n : kMigCount) n = 0;
  const char* spec = std::getenv("FAKE_NVML_MIG");
  for (const char* p = spec; p != nullptr && *p != 0;) {
    int gpu = std::atoi(p);
    const char* colon = std::strchr(p, ':');
    if (colon == nullptr || gpu < 0 || gpu > 7) return;
    p = colon + 1;
    while (*p != 0 && *p != ';') {
      unsigned int slices = 0, size = 0, start = 0;
      if (std::sscanf(p, "%u/%u@%u", &slices, &size, &start) != 3 || kMigCount[gpu] >= 7) return;
      int slot = kMigCount[gpu]++;
      kMig[gpu][slot] = {{100 + 10 * gpu + slot}, slices, size, start};
      while (*p != 0 && *p != ',' && *p != ';') ++p;
      if (*p == ',') ++p;
    }
    if (*p == ';') ++p;
  }
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int Count() {
  int n = EnvInt("FAKE_NVML_GPUS", 2);
  return n < 0 ? 0 : (n > 8 ? 8 : n);
}

}  // namespace

extern "C" {

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

int nvmlInit_v2() { return EnvInt("FAKE_NVML_INIT_RC", 0); }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 999 ? "Unknown Error" : "fake error"; }
int nvmlSystemGetDriverVersion(char* buf, unsigned int len) {
  std::snprintf(buf, len, "%s", "550.54.15");
  return 0;
}
int nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 12040;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = static_cast<unsigned int>(Count());
  return EnvInt("FAKE_NVML_COUNT_RC", 0);
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
  if (static_cast<int>(i) >= Count()) return 2;
  *d = &kDevices[i];
  return 0;
}
int nvmlDeviceGetName(void*, char* buf, unsigned int len) {
  std::snprintf(buf, len, "%s", "NVIDIA H100 80GB HBM3");
  return 0;
}
#ifndef FAKE_NVML_OMIT_UUID
int nvmlDeviceGetUUID(void* d, char* buf, unsigned int len) {
  int index = static_cast<Device*>(d)->index;
  if (index >= 100) {
    std::snprintf(buf, len, "MIG-fake-%d-%d", (index - 100) / 10, (index - 100) % 10);
  } else {
    std::snprintf(buf, len, "GPU-fake-%d", index);
  }
  return 0;
}
#endif
int nvmlDeviceGetMemoryInfo(void*, nvmlMemory_t* m) {
  m->total = 81559ull << 20;
  m->used = 1024ull << 20;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0",
                0x19 + static_cast<Device*>(d)->index);
  return 0;
}
int nvmlDeviceGetMigMode(void* d, unsigned int* current, unsigned int* pending) {
  ParseMig();
  *current = kMigCount[static_cast<Device*>(d)->index] > 0 ? 1 : 0;
  *pending = *current;
  return 0;
}
// PCIe by index: GPUs 2k and 2k+1 share a PCIe switch (10, PIX), GPUs 0-3 and 4-7 a host bridge
// (30, PHB); others meet at the system (50, SYS).
int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
  int i = static_cast<Device*>(a)->index, j = static_cast<Device*>(b)->index;
  *level = i / 2 == j / 2 ? 10 : i / 4 == j / 4 ? 30 : 50;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(void*, unsigned int* n) {
  *n = 7;
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(void* d, unsigned int i, void** mig) {
  int gpu = static_cast<Device*>(d)->index;
  if (static_cast<int>(i) >= kMigCount[gpu]) return 6;  // NVML_ERROR_NOT_FOUND
  *mig = &kMig[gpu][i].handle;
  return 0;
}
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};
struct nvmlGpuInstanceInfo_t {
  void* device;
  unsigned int id, profileId, start, size;
};
static MigDevice* MigOf(void* d) {
  int index = static_cast<Device*>(d)->index - 100;
  return index < 0 ? nullptr : &kMig[index / 10][index % 10];
}
int nvmlDeviceGetGpuInstanceId(void* d, unsigned int* id) {
  MigDevice* m = MigOf(d);
  if (m == nullptr) return 3;
  *id = static_cast<unsigned int>(m->handle.index - 100) % 10 + 1;
  return 0;
}
int nvmlDeviceGetAttributes_v2(void* d, nvmlDeviceAttributes_t* a) {
  MigDevice* m = MigOf(d);
  if (m == nullptr) return 3;
  std::memset(a, 0, sizeof *a);
  a->gpuInstanceSliceCount = a->computeInstanceSliceCount = m->slices;
  a->memorySizeMB = 9856ull * m->size;
  return 0;
}
int nvmlDeviceGetGpuInstanceById(void* d, unsigned int id, void** gi) {
  int gpu = static_cast<Device*>(d)->index;
  if (id < 1 || static_cast<int>(id) > kMigCount[gpu]) return 6;
  *gi = &kMig[gpu][id - 1];
  return 0;
}
int nvmlGpuInstanceGetInfo(void* gi, nvmlGpuInstanceInfo_t* info) {
  MigDevice* m = static_cast<MigDevice*>(gi);
  info->device = nullptr;
  info->id = static_cast<unsigned int>(m->handle.index - 100) % 10 + 1;
  info->profileId = 0;
  info->start = m->start;
  info->size = m->size;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, nvmlUtilization_t* u) {
  u->gpu = 87;
  u->memory = 41;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int, unsigned int* t) {
  *t = 64;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* mw) {
  *mw = 412500;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void*, unsigned long long* mj) {
  *mj = 123456789ull;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int, unsigned int*) { return 3; }  // not supported
int nvmlDeviceGetTotalEccErrors(void*, int type, int, unsigned long long* n) {
  *n = type == 0 ? 5 : 0;
  return 0;
}
int nvmlDeviceGetRemappedRows(void*, unsigned int* corr, unsigned int* unc, unsigned int* pending,
                              unsigned int* failed) {
  *corr = 3;
  *unc = 1;
  *pending = 0;
  *failed = 0;
  return 0;
}

// NVLink: FAKE_NVML_NVLINK="0-1,2-S" gives GPU 0 a link to GPU 1 (and back) and GPU 2 a link
// to an NVSwitch; other links are inactive; 4 links per GPU.
static int Peer(int gpu, unsigned int link) {  // -1 none, -2 switch, else the GPU
  const char* spec = getenv("FAKE_NVML_NVLINK");
  if (spec == nullptr) return -1;
  unsigned int seen = 0;
  for (const char* p = spec; *p != 0;) {
    int a = atoi(p);
    const char* dash = strchr(p, '-');
    if (dash == nullptr) break;
    int b = dash[1] == 'S' ? -2 : atoi(dash + 1);
    if (a == gpu || b == gpu) {
      if (seen++ == link) return a == gpu ? b : a;
    }
    const char* comma = strchr(dash, ',');
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return -1;
}
int nvmlDeviceGetNvLinkState(void* d, unsigned int link, unsigned int* active) {
  if (link >= 4) return 2;  // invalid argument: no such link
  *active = Peer(static_cast<Device*>(d)->index, link) != -1;
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* d, unsigned int link, nvmlPciInfo_t* p) {
  int peer = Peer(static_cast<Device*>(d)->index, link);
  if (peer == -1) return 2;
  std::memset(p, 0, sizeof *p);
  if (peer == -2) {
    std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:C0:00.0");  // an NVSwitch
  } else {
    std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", 0x19 + peer);
  }
  return 0;
}

// More readings: PCIe replays, the video engines, field values (memory temperature; NVLink
// traffic on GPUs with an active link, else not supported).
int nvmlDeviceGetPcieReplayCounter(void*, unsigned int* n) {
  *n = 7;
  return 0;
}
int nvmlDeviceGetEncoderUtilization(void*, unsigned int* u, unsigned int* period) {
  *u = 11;
  *period = 167000;
  return 0;
}
int nvmlDeviceGetDecoderUtilization(void*, unsigned int* u, unsigned int* period) {
  *u = 22;
  *period = 167000;
  return 0;
}
struct nvmlFieldValue_t {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType, nvmlReturn;
  union {
    double dVal;
    unsigned int uiVal;
    unsigned long long ullVal;
  } value;
};
int nvmlDeviceGetFieldValues(void* d, int count, nvmlFieldValue_t* values) {
  int gpu = static_cast<Device*>(d)->index;
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& f = values[i];
    f.nvmlReturn = 0;
    if (f.fieldId == 82) {  // NVML_FI_DEV_MEMORY_TEMP
      f.valueType = 1;
      f.value.uiVal = 71;
    } else if ((f.fieldId == 138 || f.fieldId == 139) && f.scopeId == 0xFFFFFFFFu &&
               Peer(gpu, 0) != -1) {  // NVLink data TX / RX, all links, in KiB
      f.valueType = 3;
      f.value.ullVal = f.fieldId == 138 ? 1000 : 2000;
    } else {
      f.nvmlReturn = 3;  // not supported
    }
  }
  return 0;
}

// GPM (FAKE_NVML_GPM=1: supported): graphics 45 %, any tensor 12.5 % between two samples, on
// the GPU and on each MIG instance. nvmlGpmLiveForTest: the samples allocated and not freed
// (a test looks it up with dlsym, for leaks).
static int gpm_live = 0;
struct nvmlGpmSupport_t {
  unsigned int version, isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned int metricId;
  int nvmlReturn;
  double value;
  char *shortName, *longName, *unit;
};
struct nvmlGpmMetricsGet_t {
  unsigned int version, numMetrics;
  void *sample1, *sample2;
  nvmlGpmMetric_t metrics[210];  // numMetrics of them used
};
int nvmlGpmQueryDeviceSupport(void*, nvmlGpmSupport_t* s) {
  if (s->version != 1) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  s->isSupportedDevice = EnvInt("FAKE_NVML_GPM", 0) == 1;
  return 0;
}
int nvmlGpmSampleAlloc(void** sample) {
  *sample = new int(0);
  ++gpm_live;
  return 0;
}
int nvmlGpmSampleFree(void* sample) {
  delete static_cast<int*>(sample);
  --gpm_live;
  return 0;
}
int nvmlGpmSampleGet(void*, void* sample) {
  *static_cast<int*>(sample) = 1;
  return 0;
}
int nvmlGpmMigSampleGet(void* d, unsigned int gi, void* sample) {
  int gpu = static_cast<Device*>(d)->index;
  if (gi < 1 || static_cast<int>(gi) > kMigCount[gpu]) return 2;
  *static_cast<int*>(sample) = 1;
  return 0;
}
int nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* m) {
  if (m->version != 1) return 25;
  if (m->sample1 == nullptr || m->sample2 == nullptr || m->sample1 == m->sample2) return 2;
  for (unsigned int i = 0; i < m->numMetrics; ++i) {
    nvmlGpmMetric_t& metric = m->metrics[i];
    metric.nvmlReturn = 0;
    metric.value = metric.metricId == 1 ? 45.0 : metric.metricId == 5 ? 12.5 : 0.0;
  }
  return 0;
}
int nvmlGpmLiveForTest() { return gpm_live; }

// Events: FAKE_NVML_XIDS="GPU:XID,..." are delivered once, in order, to the event set.
struct nvmlEventData_t {
  void* device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static int fake_event_set = 0;
static int delivered = 0;
int nvmlEventSetCreate(void** set) {
  *set = &fake_event_set;
  return 0;
}
int nvmlDeviceGetSupportedEventTypes(void*, unsigned long long* types) {
  *types = 0x1 | 0x2 | 0x8;
  return 0;
}
int nvmlDeviceRegisterEvents(void*, unsigned long long, void*) { return 0; }
int nvmlEventSetFree(void*) { return 0; }
int nvmlEventSetWait_v2(void*, nvmlEventData_t* data, unsigned int) {
  const char* spec = getenv("FAKE_NVML_XIDS");
  if (spec == nullptr) return 10;  // timeout
  int index = 0;
  for (const char* p = spec; *p != 0;) {
    int gpu = atoi(p);
    const char* colon = strchr(p, ':');
    if (colon == nullptr) break;
    int xid = atoi(colon + 1);
    if (index++ == delivered) {
      ++delivered;
      data->device = &kDevices[gpu];
      data->eventType = xid == 48 ? 0x2 : 0x8;
      data->eventData = static_cast<unsigned long long>(xid);
      return 0;
    }
    const char* comma = strchr(colon, ',');
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return 10;
}

}  // extern "C"
