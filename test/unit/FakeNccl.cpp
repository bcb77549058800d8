//===- FakeNccl.cpp - a libnccl.so.2 of one rank --------------------------===//
//
// A stand-in for NCCL, built as libnccl.so.2 beside the fake driver
// (FakeCudaDriver.cpp) for the tests of data-parallel training on the GPU
// backend without a GPU (GpuHostCodeTest): the runtime opens it as it opens
// NCCL (runtime/Nccl.cpp), with nccl.h's signatures. It makes groups of one
// rank only, where the mean of a buffer over the ranks is the buffer
// itself; each all-reduce reads its buffer (host memory under the fake
// driver, so a bad address faults here) and is recorded with its count,
// data type and operation, and whether it was inside a group. The tests
// read the record through the `switchyardFakeNccl*` functions.
//
//===----------------------------------------------------------------------===//

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

struct UniqueId {
  char internal[128];
};

struct AllReduce {
  const void *send;
  void *receive;
  size_t count;
  int type;
  int op;
  bool grouped;
};

struct State {
  std::mutex mutex;
  std::vector<AllReduce> allReduces;
  int groupDepth = 0;
  int comms = 0;
};

State &state() {
  static State instance;
  return instance;
}

constexpr int kSuccess = 0, kInvalidArgument = 4, kInvalidUsage = 5;
constexpr int kFloat32 = 7;

} // namespace

extern "C" {

//===-- What the tests read
//------------------------------------------------===//

size_t switchyardFakeNcclAllReduceCount() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().allReduces.size();
}

/// The count, data type and operation of all-reduce `index`, whether it
/// was in place and inside a group, and its buffer's address.
void switchyardFakeNcclAllReduce(size_t index, size_t *count, int *type,
                                 int *op, int *inPlace, int *grouped,
                                 uint64_t *address) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const AllReduce &call = state().allReduces.at(index);
  *count = call.count;
  *type = call.type;
  *op = call.op;
  *inPlace = call.send == call.receive;
  *grouped = call.grouped;
  *address = reinterpret_cast<uint64_t>(call.receive);
}

void switchyardFakeNcclReset() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allReduces.clear();
}

int switchyardFakeNcclLiveComms() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().comms;
}

//===-- NCCL
//---------------------------------------------------------------===//

int ncclGetVersion(int *version) {
  *version = 22707;
  return kSuccess;
}

int ncclGetUniqueId(UniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->internal, "fake", 4);
  return kSuccess;
}

int ncclCommInitRank(void **comm, int ranks, UniqueId id, int rank) {
  if (ranks != 1 || rank != 0 || std::memcmp(id.internal, "fake", 4) != 0)
    return kInvalidUsage;
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().comms;
  *comm = &state();
  return kSuccess;
}

int ncclCommDestroy(void *comm) {
  if (comm != &state())
    return kInvalidArgument;
  std::lock_guard<std::mutex> lock(state().mutex);
  --state().comms;
  return kSuccess;
}

int ncclAllReduce(const void *send, void *receive, size_t count, int type,
                  int op, void *comm, void * /*stream*/) {
  if (comm != &state() || type != kFloat32)
    return kInvalidArgument;
  // The buffer is read, as NCCL would (the mean over one rank is itself).
  volatile float sum = 0;
  for (size_t i = 0; i < count; ++i)
    sum = sum + static_cast<const float *>(send)[i];
  if (send != receive)
    std::memmove(receive, send, count * sizeof(float));
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allReduces.push_back(
      {send, receive, count, type, op, state().groupDepth > 0});
  return kSuccess;
}

int ncclGroupStart() {
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().groupDepth;
  return kSuccess;
}

int ncclGroupEnd() {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().groupDepth == 0)
    return kInvalidUsage;
  --state().groupDepth;
  return kSuccess;
}

const char *ncclGetErrorString(int result) {
  switch (result) {
  case kSuccess:
    return "no error";
  case kInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case kInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  default:
    return "unknown result code";
  }
}

} // extern "C"
