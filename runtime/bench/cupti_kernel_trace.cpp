// libzrun_kernel_trace.so: a CUPTI injection library that records every kernel, memcpy and memset a process runs on
// the GPU, with the GPU's own start and end times, and writes them as TSV when the process exits. It measures a
// kernel's duration inside a step without zrun's per-op timing events (which cost the GPU ~2 us each) and without
// changing the program: the CUDA driver loads it when CUDA_INJECTION64_PATH names it.
//   CUDA_INJECTION64_PATH=/path/libzrun_kernel_trace.so ZRUN_KERNEL_TRACE=out.%p.tsv zrun ...
// "%p" in the path becomes the process id (zrun runs one process per GPU); a process that ran nothing writes nothing.
// Columns: kind (kernel / memcpy / memset), stream, start_ns, end_ns, grid_x, block_x, bytes, name (demangled).
// Activity kind CONCURRENT_KERNEL does not serialize kernels; CUPTI's own cost is a few hundred ns of host time per
// launch (docs/runtime.md "Kernel traces").
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kBufferBytes = 8u << 20;

struct Row {
  const char* kind;
  std::uint32_t stream;
  std::uint64_t start_ns, end_ns;
  std::int32_t grid_x, block_x;
  std::uint64_t bytes;
  std::string name;
};

std::mutex g_mutex;
std::vector<Row> g_rows;
std::string g_path;
bool g_failed = false;

void report(const char* call, CUptiResult r) {
  const char* what = nullptr;
  cuptiGetResultString(r, &what);
  std::fprintf(stderr, "zrun kernel trace: %s failed: %s; no trace is written\n", call, what ? what : "?");
  g_failed = true;
}
#define TRACE_CUPTI(call)                              \
  do {                                                 \
    const CUptiResult r_ = (call);                     \
    if (r_ != CUPTI_SUCCESS) report(#call, r_);        \
  } while (0)

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  for (char& c : out)
    if (c == '\t' || c == '\n') c = ' ';
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Row> rows;
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        rows.push_back({"kernel", k->streamId, k->start, k->end, k->gridX, k->blockX, 0, demangle(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        rows.push_back({"memcpy", m->streamId, m->start, m->end, 0, 0, m->bytes,
                        "copy kind " + std::to_string(m->copyKind)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        rows.push_back({"memset", m->streamId, m->start, m->end, 0, 0, m->bytes, "memset"});
        break;
      }
      default: break;
    }
  }
  std::size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "zrun kernel trace: CUPTI dropped %zu records\n", dropped);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Row& r : rows) g_rows.push_back(std::move(r));
}

void write_trace() {
  TRACE_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_rows.empty()) return;
  std::FILE* f = std::fopen(g_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "zrun kernel trace: cannot write %s: %s\n", g_path.c_str(), std::strerror(errno));
    return;
  }
  std::fprintf(f, "kind\tstream\tstart_ns\tend_ns\tgrid_x\tblock_x\tbytes\tname\n");
  for (const Row& r : g_rows)
    std::fprintf(f, "%s\t%u\t%llu\t%llu\t%d\t%d\t%llu\t%s\n", r.kind, r.stream,
                 static_cast<unsigned long long>(r.start_ns), static_cast<unsigned long long>(r.end_ns), r.grid_x,
                 r.block_x, static_cast<unsigned long long>(r.bytes), r.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "zrun kernel trace: %zu records written to %s\n", g_rows.size(), g_path.c_str());
}

}  // namespace

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("ZRUN_KERNEL_TRACE");
  g_path = path && *path ? path : "kernel_trace.%p.tsv";
  if (const auto at = g_path.find("%p"); at != std::string::npos) g_path.replace(at, 2, std::to_string(getpid()));
  TRACE_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  TRACE_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  TRACE_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  TRACE_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  if (g_failed) return 0;
  std::atexit(write_trace);
  return 1;
}
