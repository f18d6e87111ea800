// The Hopper instruction emulation (see hopper_emulation.h): per-block state for wgmma groups, mbarriers, bulk tensor
// copies in flight and the async proxy's view of shared memory, kept beside the BlockScheduler as a BlockExtension.
#include "kernels/cuda_emulation/hopper_emulation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda_emulation/float16.h"
#include "kernels/cuda_emulation/sanitizers.h"

namespace convoy::cuda_emulation {

struct WgmmaOperation {
  SourceLocation where;
  WgmmaType type = WgmmaType::kF16;
  int n = 0;
  std::vector<float> d;                 // [128 threads][n / 2] results in the accumulator fragment layout
  std::vector<uint32_t> chunks;         // 16-byte shared-memory chunks it reads (distinct)
  std::vector<unsigned char> snapshot;  // their bytes when it was issued
  bool retired = false;
  int completed_threads = 0;  // threads whose wgmma.wait_group covered it; at 128 nothing refers to it any more
};

namespace {

constexpr size_t kArenaBytes = kMaxSharedBytesPerBlock + 64 * 1024;
constexpr size_t kChunks = kArenaBytes / 16;
constexpr int64_t kTxLimit = (int64_t{1} << 20) - 1;

std::string Hex(uint32_t address) { return absl::StrFormat("0x%x", address); }

// Whole-arena scans of the async-proxy model read the bytes between declared arrays too, which ASan keeps poisoned:
// plain loops, not instrumented.
#if CONVOY_EMULATION_ASAN
#define CONVOY_ARENA_SCAN __attribute__((no_sanitize_address, noinline))
#else
#define CONVOY_ARENA_SCAN
#endif

CONVOY_ARENA_SCAN bool ChunkDiffers(const unsigned char* a, const unsigned char* b) {
  unsigned char diff = 0;
  for (int i = 0; i < 16; ++i) diff |= a[i] ^ b[i];
  return diff != 0;
}

CONVOY_ARENA_SCAN void CopyChunk(unsigned char* to, const unsigned char* from) {
  for (int i = 0; i < 16; ++i) to[i] = from[i];
}

// Chunks (16-byte offsets) in [0, bytes) where a and b differ, found a kilobyte at a time.
template <typename Visit>
CONVOY_ARENA_SCAN void ForEachDifferingChunk(const unsigned char* a, const unsigned char* b, size_t bytes,
                                             Visit&& visit) {
  for (size_t block = 0; block < bytes; block += 1024) {
    const size_t end = std::min(bytes, block + 1024);
    unsigned char any = 0;
    for (size_t i = block; i < end; ++i) any |= a[i] ^ b[i];
    if (any == 0) continue;
    for (size_t chunk = block; chunk < end; chunk += 16) {
      if (ChunkDiffers(a + chunk, b + chunk)) visit(static_cast<uint32_t>(chunk));
    }
  }
}

// Kernels that executed fence.proxy.async (process-wide): their blocks attribute every shared-memory store to the
// thread that made it from the start, so a fence publishes only its own thread's stores.
class FencingKernels {
 public:
  static bool Contains(const void* kernel) {
    std::lock_guard<std::mutex> lock(mu());
    return set().count(kernel) != 0;
  }
  static void Add(const void* kernel) {
    std::lock_guard<std::mutex> lock(mu());
    set().insert(kernel);
  }

 private:
  static std::mutex& mu() {
    static std::mutex* m = new std::mutex();
    return *m;
  }
  static std::unordered_set<const void*>& set() {
    static auto* s = new std::unordered_set<const void*>();
    return *s;
  }
};

constexpr int kNoWriter = -1;       // the async proxy's view holds the chunk's bytes
constexpr int kUnknownWriter = -2;  // written before the block started attributing stores

const char* TypeName(WgmmaType type) {
  switch (type) {
    case WgmmaType::kF16:
      return "f16";
    case WgmmaType::kBf16:
      return "bf16";
    case WgmmaType::kTf32:
      return "tf32";
    case WgmmaType::kS8S8:
      return "s8.s8";
    case WgmmaType::kU8S8:
      return "u8.s8";
  }
  return "?";
}

// The instruction's shape and types as PTX spells them: m64n64k16.f32.f16 (the float forms repeat the operand type),
// m64n64k32.s32.u8.s8.
std::string InstructionName(const WgmmaInstruction& instruction) {
  return absl::StrFormat("m64n%dk%d.%s.%s", instruction.n, WgmmaK(instruction.type),
                         WgmmaIsInteger(instruction.type) ? "s32" : "f32", TypeName(instruction.type));
}

struct PendingWgmma {
  WgmmaOperation* op = nullptr;
  int64_t group = -1;  // -1 until wgmma.commit_group
  float* d = nullptr;
  WgmmaRegisterState* d_state = nullptr;
  WgmmaRegisterState* a_state = nullptr;
  int thread_in_op = 0;
};

struct ThreadHopperState {
  int64_t fence_epoch = 0;  // wgmma.fence instructions executed
  int64_t committed_groups = 0;
  std::vector<PendingWgmma> pending;
};

struct Mbarrier {
  uint32_t address = 0;
  uint32_t expected = 0;
  int64_t pending = 0;  // arrivals still expected in the current phase
  int64_t tx = 0;       // transaction bytes still expected in the current phase
  uint64_t phase = 0;   // completed phases; the current phase has parity phase & 1
  bool valid = false;
  bool async_visible = false;  // made visible to the async proxy by a fence after init
  int copies_in_flight = 0;
  SourceLocation init_at;
};

struct BulkCopy {
  uint32_t barrier = 0;
  uint32_t bytes = 0;
  SourceLocation where;
  std::vector<uint32_t> chunks;  // destination 16-byte chunks (after the swizzle)
  std::vector<unsigned char> data;
};

class HopperBlockState final : public BlockExtension {
 public:
  HopperBlockState() : pending_copy_chunks_(kChunks, 0), wgmma_reader_chunks_(kChunks, 0) {}

  void StartBlock(int thread_count) override {
    threads_.assign(thread_count, ThreadHopperState{});
    entry_registers_ = EntryRegisters(thread_count);
    warpgroup_registers_.assign(thread_count / kWarpgroupSize, entry_registers_);
    register_pool_ = 0;
    barriers_.clear();
    copies_.clear();
    if (chunks_touched_) {
      std::fill(pending_copy_chunks_.begin(), pending_copy_chunks_.end(), 0);
      std::fill(wgmma_reader_chunks_.begin(), wgmma_reader_chunks_.end(), 0);
      chunks_touched_ = false;
    }
    live_ops_.clear();
    operations_.clear();
    view_ready_ = false;
    attributing_ = false;
    const BlockScheduler& scheduler = BlockScheduler::ForThisThread();
    if (scheduler.kernel() != nullptr && FencingKernels::Contains(scheduler.kernel())) StartAttributing(scheduler);
    copy_scratch_ = BulkCopy{};
    error_scratch_.clear();
  }

  absl::StatusOr<bool> ProgressWhenQuiet() override {
    if (copies_.empty()) return false;
    while (!copies_.empty()) {
      BulkCopy copy = std::move(copies_.front());
      copies_.pop_front();
      if (std::string error = Land(copy); !error.empty()) return absl::InternalError(error);
    }
    return true;
  }

  absl::Status FinishBlock() override {
    if (!copies_.empty()) {
      return absl::InternalError(absl::StrCat("the block exited with ", copies_.size(),
                                              " bulk tensor copies (the first "
                                              "issued at ",
                                              copies_.front().where.ToString(),
                                              ") still in flight: wait on their mbarrier before exiting"));
    }
    for (size_t id = 0; id < threads_.size(); ++id) {
      for (const PendingWgmma& entry : threads_[id].pending) {
        return absl::InternalError(absl::StrCat("thread ", id, " exited with the wgmma.mma_async issued at ",
                                                entry.op->where.ToString(),
                                                " not retired by a wgmma.wait_group (commit it and wait)"));
      }
    }
    return absl::OkStatus();
  }

  // setmaxnreg's register pool. Every thread enters with the register cap a __launch_bounds__(threads, 1) kernel gets
  // (64K registers over the block's threads, in units of 8, at most 256: what ptxas compiles a kernel with setmaxnreg
  // to); the pool holds what setmaxnreg.dec released in this block and nothing else, so a setmaxnreg.inc asking for
  // more than was released waits for ever (a hang on the GPU, a deadlock report here).
  static int EntryRegisters(int thread_count) {
    if (thread_count <= 0) return 256;
    const int cap = 65536 / thread_count / 8 * 8;
    return cap > 256 ? 256 : cap;
  }
  int entry_registers() const { return entry_registers_; }
  int& warpgroup_registers(int warpgroup) { return warpgroup_registers_[warpgroup]; }
  int64_t& register_pool() { return register_pool_; }

  std::string DescribeState() const override {
    std::string out;
    for (const Mbarrier& b : barriers_) {
      if (!b.valid) continue;
      absl::StrAppend(&out, out.empty() ? "" : "; ", DescribeBarrier(b));
    }
    if (!copies_.empty()) absl::StrAppend(&out, "; ", copies_.size(), " bulk copies in flight");
    if (register_pool_ != 0 || std::any_of(warpgroup_registers_.begin(), warpgroup_registers_.end(),
                                           [this](int r) { return r != entry_registers_; })) {
      absl::StrAppend(&out, out.empty() ? "" : "; ", "setmaxnreg: ", register_pool_,
                      " registers released to the pool, warpgroups hold");
      for (int r : warpgroup_registers_) absl::StrAppend(&out, " ", r);
      absl::StrAppend(&out, " per thread (", entry_registers_, " at entry)");
    }
    return out;
  }

  static std::string DescribeBarrier(const Mbarrier& b) {
    return absl::StrFormat(
        "mbarrier at shared %s (init at %s, count %u): phase %d (parity %d) in progress, %d arrivals and %d "
        "transaction bytes outstanding, %d bulk copies in flight",
        Hex(b.address), b.init_at.ToString(), b.expected, b.phase, b.phase & 1, b.pending, b.tx, b.copies_in_flight);
  }

  ThreadHopperState& thread(int id) { return threads_[id]; }

  Mbarrier* FindBarrier(uint32_t address) {
    for (Mbarrier& b : barriers_) {
      if (b.address == address) return &b;
    }
    return nullptr;
  }
  Mbarrier& AddBarrier(uint32_t address) {
    barriers_.push_back(Mbarrier{});
    barriers_.back().address = address;
    return barriers_.back();
  }

  // Completes the barrier's phase if nothing is outstanding; "" or an error.
  std::string MaybeCompletePhase(Mbarrier& b) {
    if (b.pending != 0 || b.tx != 0) return "";
    if (b.copies_in_flight > 0) {
      return absl::StrCat(DescribeBarrier(b),
                          ": its phase completed while bulk copies that signal it are still in "
                          "flight (mbarrier.expect_tx counted fewer bytes than the copies bring)");
    }
    ++b.phase;
    b.pending = b.expected;
    b.tx = 0;
    return "";
  }

  // The async proxy's view of shared memory: what bulk copies wrote and what fence.proxy.async published. It starts
  // as the block's 0xFF poison.
  unsigned char* async_view() {
    if (async_view_.empty()) async_view_.resize(kArenaBytes);
    if (!view_ready_) {
      std::memset(async_view_.data(), 0xFF, async_view_.size());
      view_ready_ = true;
    }
    return async_view_.data();
  }

  // Per-thread attribution of shared-memory stores: every slice a thread runs, the chunks that changed against the
  // shadow copy are that thread's; fence.proxy.async publishes (copies into the async view) only the chunks the
  // fencing thread wrote. A block attributes from its start when its kernel fenced before in this process, and from
  // its first fence otherwise (chunks written before then have an unknown writer and any fence publishes them).
  void StartAttributing(const BlockScheduler& scheduler) {
    if (attributing_) return;
    attributing_ = true;
    if (shadow_.empty()) shadow_.resize(kArenaBytes);
    if (writers_.empty()) writers_.resize(kChunks);
    const size_t bytes = scheduler.shared_bytes_in_use();
    const unsigned char* arena = scheduler.shared_arena();
    unsigned char* view = async_view();
    std::fill(writers_.begin(), writers_.end(), kNoWriter);
    for (size_t chunk = 0; chunk < bytes; chunk += 16) CopyChunk(shadow_.data() + chunk, arena + chunk);
    ForEachDifferingChunk(arena, view, bytes, [&](uint32_t chunk) { writers_[chunk / 16] = kUnknownWriter; });
  }

  void ThreadSuspended(int thread) override {
    if (!attributing_) return;
    const BlockScheduler& scheduler = BlockScheduler::ForThisThread();
    Attribute(scheduler, thread);
  }

  void Attribute(const BlockScheduler& scheduler, int thread) {
    const unsigned char* arena = scheduler.shared_arena();
    ForEachDifferingChunk(arena, shadow_.data(), scheduler.shared_bytes_in_use(), [&](uint32_t chunk) {
      CopyChunk(shadow_.data() + chunk, arena + chunk);
      writers_[chunk / 16] = thread;
    });
  }

  // The last thread that stored to `chunk` without publishing it, or kNoWriter / kUnknownWriter.
  int WriterOf(uint32_t chunk) const { return attributing_ ? writers_[chunk / 16] : kUnknownWriter; }

  void PublishGenericWrites(const BlockScheduler& scheduler, int thread) {
    unsigned char* view = async_view();
    const unsigned char* arena = scheduler.shared_arena();
    if (!attributing_) {
      if (scheduler.kernel() != nullptr) FencingKernels::Add(scheduler.kernel());
      StartAttributing(scheduler);
    }
    Attribute(scheduler, thread);
    ForEachDifferingChunk(arena, view, scheduler.shared_bytes_in_use(), [&](uint32_t chunk) {
      int& writer = writers_[chunk / 16];
      if (writer != thread && writer != kUnknownWriter) return;
      CopyChunk(view + chunk, arena + chunk);
      writer = kNoWriter;
    });
    for (Mbarrier& b : barriers_) b.async_visible = b.valid;
  }

  void MarkBarriersVisible() {
    for (Mbarrier& b : barriers_) b.async_visible = b.valid;
  }

  // Checks one 16-byte chunk an async-proxy read (wgmma) touches: "" or why it must not be read now.
  std::string CheckAsyncRead(const BlockScheduler& scheduler, uint32_t chunk) {
    if (pending_copy_chunks_[chunk / 16] != 0) {
      return absl::StrCat("it reads shared memory ", Hex(chunk),
                          " that a bulk tensor copy has not written yet (wait "
                          "on the copy's mbarrier before the wgmma)");
    }
    const unsigned char* view = async_view();
    if (std::memcmp(view + chunk, scheduler.shared_arena() + chunk, 16) != 0) {
      const int writer = WriterOf(chunk);
      return absl::StrCat("it reads shared memory ", Hex(chunk), " written by ordinary (generic-proxy) stores",
                          writer >= 0 ? absl::StrCat(" of thread ", writer) : std::string(),
                          " that no fence.proxy.async.shared::cta made visible to the async proxy (the writing "
                          "threads must each execute the fence after their own stores and before the barrier that "
                          "orders them with the wgmma: another thread's fence does not publish them)");
    }
    return "";
  }

  WgmmaOperation* NewOperation() {
    operations_.push_back(std::make_unique<WgmmaOperation>());
    return operations_.back().get();
  }

  void TrackOperation(WgmmaOperation* op) {
    chunks_touched_ = true;
    for (uint32_t chunk : op->chunks) ++wgmma_reader_chunks_[chunk / 16];
    live_ops_.push_back(op);
  }

  // Every thread of the warpgroup waited for `op`: nothing refers to it any more.
  void Release(WgmmaOperation* op) {
    operations_.erase(std::remove_if(operations_.begin(), operations_.end(),
                                     [op](const std::unique_ptr<WgmmaOperation>& p) { return p.get() == op; }),
                      operations_.end());
  }

  // Scratch that BulkTensorLoad fills in place, so that a failing thread leaves no heap memory on its stack.
  BulkCopy& copy_scratch() { return copy_scratch_; }
  std::string& error_scratch() { return error_scratch_; }
  void CommitCopyScratch() {
    AddCopy(std::move(copy_scratch_));
    copy_scratch_ = BulkCopy{};
  }

  // The wgmma.wait_group of the last thread of the warpgroup that covers `op` retires it: its shared memory may be
  // reused from then on.
  std::string Retire(const BlockScheduler& scheduler, WgmmaOperation& op) {
    op.retired = true;
    for (uint32_t chunk : op.chunks) --wgmma_reader_chunks_[chunk / 16];
    live_ops_.erase(std::remove(live_ops_.begin(), live_ops_.end(), &op), live_ops_.end());
    for (size_t i = 0; i < op.chunks.size(); ++i) {
      if (std::memcmp(scheduler.shared_arena() + op.chunks[i], op.snapshot.data() + 16 * i, 16) != 0) {
        return absl::StrCat("shared memory ", Hex(op.chunks[i]), " read by the wgmma.mma_async issued at ",
                            op.where.ToString(), " changed before a wgmma.wait_group retired it");
      }
    }
    return "";
  }

  const WgmmaOperation* UnretiredReaderOf(uint32_t chunk) const {
    if (wgmma_reader_chunks_[chunk / 16] == 0) return nullptr;
    for (const WgmmaOperation* op : live_ops_) {
      if (std::binary_search(op->chunks.begin(), op->chunks.end(), chunk)) return op;
    }
    return nullptr;
  }

  void AddCopy(BulkCopy copy) {
    chunks_touched_ = true;
    for (uint32_t chunk : copy.chunks) ++pending_copy_chunks_[chunk / 16];
    copies_.push_back(std::move(copy));
  }

  std::string Land(const BulkCopy& copy) {
    BlockScheduler& scheduler = BlockScheduler::ForThisThread();
    unsigned char* view = async_view();
    for (size_t i = 0; i < copy.chunks.size(); ++i) {
      const uint32_t chunk = copy.chunks[i];
      if (wgmma_reader_chunks_[chunk / 16] != 0) {
        for (const WgmmaOperation* op : live_ops_) {
          if (std::binary_search(op->chunks.begin(), op->chunks.end(), chunk)) {
            return absl::StrCat("the bulk tensor copy issued at ", copy.where.ToString(), " overwrites shared memory ",
                                Hex(chunk), " that the in-flight wgmma.mma_async issued at ", op->where.ToString(),
                                " still reads (release a stage only after the wgmma.wait_group that retires its "
                                "wgmmas)");
          }
        }
      }
      std::memcpy(scheduler.shared_arena() + chunk, copy.data.data() + 16 * i, 16);
      std::memcpy(view + chunk, copy.data.data() + 16 * i, 16);
      if (attributing_) {
        std::memcpy(shadow_.data() + chunk, copy.data.data() + 16 * i, 16);
        writers_[chunk / 16] = kNoWriter;
      }
      --pending_copy_chunks_[chunk / 16];
    }
    Mbarrier* barrier = FindBarrier(copy.barrier);
    if (barrier == nullptr || !barrier->valid) {
      return absl::StrCat("the bulk tensor copy issued at ", copy.where.ToString(), " completes on mbarrier ",
                          Hex(copy.barrier), ", which is no longer a valid mbarrier");
    }
    --barrier->copies_in_flight;
    barrier->tx -= copy.bytes;
    if (barrier->tx < 0 && barrier->pending == 0) {
      return absl::StrCat("the bulk tensor copy issued at ", copy.where.ToString(), " brings ", copy.bytes,
                          " bytes to ", DescribeBarrier(*barrier),
                          " after all its arrivals: mbarrier.expect_tx counted fewer bytes than the copies bring");
    }
    if (barrier->tx < -kTxLimit) {
      return absl::StrCat(DescribeBarrier(*barrier), ": the transaction count left its range [-(2^20-1), 2^20-1]");
    }
    return MaybeCompletePhase(*barrier);
  }

 private:
  std::vector<ThreadHopperState> threads_;
  std::vector<Mbarrier> barriers_;
  std::deque<BulkCopy> copies_;
  std::vector<uint16_t> pending_copy_chunks_;  // per 16 bytes: bulk copies that will write it
  std::vector<uint16_t> wgmma_reader_chunks_;  // per 16 bytes: unretired wgmmas that read it
  bool chunks_touched_ = false;
  std::vector<unsigned char> async_view_;
  bool view_ready_ = false;
  std::vector<WgmmaOperation*> live_ops_;                    // unretired
  std::vector<std::unique_ptr<WgmmaOperation>> operations_;  // issued and not yet waited by every thread
  BulkCopy copy_scratch_;
  std::string error_scratch_;
  bool attributing_ = false;
  std::vector<unsigned char> shadow_;  // the arena as of the last attribution
  std::vector<int> writers_;           // per 16 bytes: the thread whose store is not published yet, or kNoWriter
  int entry_registers_ = 256;
  std::vector<int> warpgroup_registers_;  // per warpgroup: registers per thread now
  int64_t register_pool_ = 0;             // registers released by setmaxnreg.dec, not yet taken
};

struct Context {
  BlockScheduler& scheduler;
  HopperBlockState& state;
  ThreadHopperState& thread;
};

Context Here() {
  BlockScheduler& scheduler = BlockScheduler::Current();
  HopperBlockState& state = scheduler.Extension<HopperBlockState>();
  return Context{scheduler, state, state.thread(scheduler.current_thread())};
}

// Fails the calling thread. The message is built in a statement of its own, so every temporary of the expression
// is gone before the thread is abandoned (its stack is never unwound: no heap memory may be left on it).
#define CONVOY_HOPPER_FAIL(scheduler, ...)                     \
  do {                                                         \
    std::string convoy_message_ = absl::StrCat(__VA_ARGS__);   \
    (scheduler).FailCurrentThread(std::move(convoy_message_)); \
  } while (0)

// ------------------------------------------------------------------------------------------------------ wgmma

struct WgmmaLane {
  HopperBlockState* state = nullptr;
  BlockScheduler* scheduler = nullptr;
  WgmmaInstruction instruction;
  uint64_t desc_a = 0, desc_b = 0;
  const uint32_t* a_registers = nullptr;  // nullptr: A from shared memory
  const float* d = nullptr;
  const WgmmaOperation* chained = nullptr;  // an in-flight wgmma whose result is this one's C
  int thread_in_op = 0;
  SourceLocation where;
  WgmmaOperation* result = nullptr;
};

float ElementFromBits(uint32_t bits, WgmmaType type) {
  switch (type) {
    case WgmmaType::kF16:
      return HalfBitsToFloat(static_cast<uint16_t>(bits));
    case WgmmaType::kBf16:
      return Bfloat16BitsToFloat(static_cast<uint16_t>(bits));
    case WgmmaType::kTf32:
      return BitsToFloat(bits & 0xFFFFE000u);  // the tensor core keeps the top 19 bits
    case WgmmaType::kS8S8:
    case WgmmaType::kU8S8:
      break;  // integer operands: IntegerElement
  }
  return 0.0f;
}

// An 8-bit integer operand element: A of .u8.s8 is unsigned, every other 8-bit operand signed.
double IntegerElement(uint32_t byte, WgmmaType type, bool operand_a) {
  const bool is_unsigned = operand_a && type == WgmmaType::kU8S8;
  return is_unsigned ? static_cast<double>(byte & 0xFFu) : static_cast<double>(static_cast<int8_t>(byte & 0xFFu));
}

// Reads operand element (mn, k) from shared memory through the descriptor, recording the chunk it touches.
struct OperandReader {
  const BlockScheduler& scheduler;
  HopperBlockState& state;
  WgmmaOperation& op;
  std::vector<uint32_t>& seen;  // distinct chunks, sorted later
  std::string error;

  bool Read(const MatrixDescriptor& desc, bool mn_major, WgmmaType type, int mn, int k, const char* operand,
            double* value) {
    const int element = WgmmaElementBytes(type);
    const uint32_t address = WgmmaOperandElementAddress(desc, mn_major, element, mn, k);
    const unsigned char* pointer = scheduler.SharedPointer(address, element);
    if (pointer == nullptr) {
      error = absl::StrFormat(
          "operand %s element (%d, %d) is at shared address %s, outside the %d bytes of shared memory the block "
          "declared (descriptor: start %s, leading byte offset %d, stride byte offset %d, swizzle %dB)",
          operand, mn, k, Hex(address), scheduler.shared_bytes_in_use(), Hex(desc.start_address),
          desc.leading_byte_offset, desc.stride_byte_offset, desc.swizzle_bytes);
      return false;
    }
    if (seen.empty() || seen.back() != (address & ~15u)) seen.push_back(address & ~15u);
    uint32_t bits = 0;
    std::memcpy(&bits, pointer, element);
    *value = WgmmaIsInteger(type) ? IntegerElement(bits, type, operand[0] == 'A') : ElementFromBits(bits, type);
    return true;
  }
};

// Register i of thread t's A fragment holds rows / columns as the ISA's "WGMMA .m64nNk16 / k8 / k32 register fragment
// layout for matrix A" figures show; element h of the register (h = 0 the low half or byte: one element of 32 bits,
// two of 16, four of 8).
void AFragmentPosition(WgmmaType type, int thread, int reg, int half, int* row, int* col) {
  const int warp = thread / 32, lane = thread % 32;
  *row = 16 * warp + lane / 4 + 8 * (reg & 1);
  const int per_register = 4 / WgmmaElementBytes(type);
  *col = per_register * (lane % 4) + half + 4 * per_register * (reg >> 1);
}

// Register v of thread t's accumulator fragment: the ISA's "WGMMA .m64nNk16 register fragment layout for accumulator
// matrix D" (each warp owns 16 rows; each 8-column block holds 4 registers per thread).
void DFragmentPosition(int thread, int reg, int* row, int* col) {
  const int warp = thread / 32, lane = thread % 32;
  *row = 16 * warp + lane / 4 + 8 * ((reg >> 1) & 1);
  *col = 8 * (reg >> 2) + 2 * (lane % 4) + (reg & 1);
}

std::string ResolveWgmma(void* const payloads[kWarpgroupSize]) {
  const WgmmaLane& first = *static_cast<const WgmmaLane*>(payloads[0]);
  const WgmmaInstruction& in = first.instruction;
  for (int t = 1; t < kWarpgroupSize; ++t) {
    const WgmmaLane& lane = *static_cast<const WgmmaLane*>(payloads[t]);
    const WgmmaInstruction& other = lane.instruction;
    if (other.type != in.type || other.n != in.n || other.scale_d != in.scale_d || other.scale_a != in.scale_a ||
        other.scale_b != in.scale_b || other.transpose_a != in.transpose_a || other.transpose_b != in.transpose_b ||
        (lane.a_registers == nullptr) != (first.a_registers == nullptr)) {
      return absl::StrCat("thread ", t, " of the warpgroup issues a different wgmma than thread 0");
    }
    if (lane.desc_b != first.desc_b || (first.a_registers == nullptr && lane.desc_a != first.desc_a)) {
      return absl::StrFormat(
          "the matrix descriptors must be the same in every thread of the warpgroup: thread 0 has a 0x%016x b "
          "0x%016x, thread %d has a 0x%016x b 0x%016x",
          first.desc_a, first.desc_b, t, lane.desc_a, lane.desc_b);
    }
  }
  const int n = in.n, k_extent = WgmmaK(in.type);
  const bool integer = WgmmaIsInteger(in.type);
  WgmmaOperation* op = first.state->NewOperation();
  op->where = first.where;
  op->type = in.type;
  op->n = n;
  std::vector<uint32_t> seen;
  OperandReader reader{*first.scheduler, *first.state, *op, seen, ""};
  std::vector<double> a(64 * k_extent), b(static_cast<size_t>(n) * k_extent);  // element values, exact
  if (first.a_registers == nullptr) {
    const MatrixDescriptor desc = DecodeMatrixDescriptor(first.desc_a);
    for (int m = 0; m < 64; ++m) {
      for (int k = 0; k < k_extent; ++k) {
        double value;
        if (!reader.Read(desc, in.transpose_a, in.type, m, k, "A", &value)) return reader.error;
        a[m * k_extent + k] = value;
      }
    }
  } else {
    for (int t = 0; t < kWarpgroupSize; ++t) {
      const WgmmaLane& lane = *static_cast<const WgmmaLane*>(payloads[t]);
      const int element_bits = 8 * WgmmaElementBytes(in.type);
      for (int reg = 0; reg < 4; ++reg) {
        for (int half = 0; half < 32 / element_bits; ++half) {
          int row, col;
          AFragmentPosition(in.type, t, reg, half, &row, &col);
          const uint32_t word = lane.a_registers[reg];
          const uint32_t mask = element_bits == 32 ? ~0u : (1u << element_bits) - 1;
          const uint32_t bits = element_bits == 32 ? word : (word >> (element_bits * half)) & mask;
          a[row * k_extent + col] = integer ? IntegerElement(bits, in.type, true) : ElementFromBits(bits, in.type);
        }
      }
    }
  }
  const MatrixDescriptor desc_b = DecodeMatrixDescriptor(first.desc_b);
  for (int col = 0; col < n; ++col) {
    for (int k = 0; k < k_extent; ++k) {
      double value;
      if (!reader.Read(desc_b, in.transpose_b, in.type, col, k, "B", &value)) return reader.error;
      b[col * k_extent + k] = value;
    }
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (uint32_t chunk : seen) {
    if (std::string error = first.state->CheckAsyncRead(*first.scheduler, chunk); !error.empty()) return error;
  }
  op->chunks = seen;
  op->snapshot.resize(16 * seen.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    std::memcpy(op->snapshot.data() + 16 * i, first.scheduler->shared_arena() + seen[i], 16);
  }
  // D = A * B + C in the accumulator layout.
  const int regs = n / 2;
  op->d.assign(static_cast<size_t>(kWarpgroupSize) * regs, 0.0f);
  const double sa = in.scale_a, sb = in.scale_b;
  for (int t = 0; t < kWarpgroupSize; ++t) {
    const WgmmaLane& lane = *static_cast<const WgmmaLane*>(payloads[t]);
    for (int v = 0; v < regs; ++v) {
      int row, col;
      DFragmentPosition(t, v, &row, &col);
      const float* c = lane.chained != nullptr ? &lane.chained->d[t * regs + v] : &lane.d[v];
      const double* ar = &a[row * k_extent];
      const double* bc = &b[col * k_extent];
      double dot = 0.0;
      for (int k = 0; k < k_extent; ++k) dot += ar[k] * bc[k];  // exact for the integer forms (|dot| < 2^21)
      if (integer) {
        // int32 registers (their bit patterns in d): wraps like the tensor core's adder without .satfinite.
        uint32_t sum = 0;
        if (in.scale_d) std::memcpy(&sum, c, 4);
        sum += static_cast<uint32_t>(static_cast<int64_t>(dot));
        std::memcpy(&op->d[t * regs + v], &sum, 4);
        continue;
      }
      double sum = 0.0;
      if (in.scale_d) sum = *c;
      op->d[t * regs + v] = static_cast<float>(sum + sa * sb * dot);
    }
  }
  first.state->TrackOperation(op);
  for (int t = 0; t < kWarpgroupSize; ++t) static_cast<WgmmaLane*>(payloads[t])->result = op;
  return "";
}

constexpr WarpgroupCollectiveKind kWgmma{"wgmma.mma_async.sync.aligned", &ResolveWgmma};

// ---------------------------------------------------------------------------------------------------- setmaxnreg

struct SetMaxNRegLane {
  bool increase;
  int registers;
  HopperBlockState* state;
  int warpgroup;
  bool granted = false;  // set in the lane of thread 0 of the warpgroup once the registers were taken
};

// Runs once per warpgroup when all 128 threads arrived: the count must be uniform and move the right way; a decrease
// returns registers to the pool at once, an increase is granted by SetMaxNRegGranted (it may have to wait).
std::string ResolveSetMaxNReg(void* const payloads[kWarpgroupSize]) {
  const SetMaxNRegLane& first = *static_cast<const SetMaxNRegLane*>(payloads[0]);
  for (int t = 1; t < kWarpgroupSize; ++t) {
    const SetMaxNRegLane& lane = *static_cast<const SetMaxNRegLane*>(payloads[t]);
    if (lane.increase != first.increase || lane.registers != first.registers) {
      return absl::StrFormat(
          "thread %d asks for setmaxnreg.%s %d but thread 0 for setmaxnreg.%s %d: the count must "
          "be the same in the whole warpgroup",
          t, lane.increase ? "inc" : "dec", lane.registers, first.increase ? "inc" : "dec", first.registers);
    }
  }
  const int current = first.state->warpgroup_registers(first.warpgroup);
  if (first.increase && first.registers < current) {
    return absl::StrFormat("setmaxnreg.inc %d is below the %d registers per thread the warpgroup holds",
                           first.registers, current);
  }
  if (!first.increase) {
    if (first.registers > current) {
      return absl::StrFormat("setmaxnreg.dec %d is above the %d registers per thread the warpgroup holds",
                             first.registers, current);
    }
    first.state->register_pool() += int64_t{current - first.registers} * kWarpgroupSize;
    first.state->warpgroup_registers(first.warpgroup) = first.registers;
  }
  return "";
}

// The increase of thread 0's lane (payload of the whole warpgroup) takes its registers once the pool holds them.
bool SetMaxNRegGranted(const void* context) {
  SetMaxNRegLane& lane = *static_cast<SetMaxNRegLane*>(const_cast<void*>(context));
  if (lane.granted) return true;
  int& current = lane.state->warpgroup_registers(lane.warpgroup);
  const int64_t need = int64_t{lane.registers - current} * kWarpgroupSize;
  if (need > lane.state->register_pool()) return false;
  lane.state->register_pool() -= need;
  current = lane.registers;
  lane.granted = true;
  return true;
}

bool SetMaxNRegReached(const void* context) {
  const SetMaxNRegLane& lane = *static_cast<const SetMaxNRegLane*>(context);
  return lane.state->warpgroup_registers(lane.warpgroup) >= lane.registers;
}

std::string DescribeSetMaxNRegWait(const void* context) {
  const SetMaxNRegLane& lane = *static_cast<const SetMaxNRegLane*>(context);
  const int current = lane.state->warpgroup_registers(lane.warpgroup);
  return absl::StrFormat(
      "registers: setmaxnreg.inc %d of warpgroup %d (%d per thread now) needs %d registers, the pool released by "
      "setmaxnreg.dec holds %d (the block entered with %d per thread): on the GPU this setmaxnreg.inc hangs",
      lane.registers, lane.warpgroup, current, (lane.registers - current) * kWarpgroupSize,
      lane.state->register_pool(), lane.state->entry_registers());
}

constexpr WarpgroupCollectiveKind kSetMaxNReg{"setmaxnreg.sync.aligned", &ResolveSetMaxNReg};

// -------------------------------------------------------------------------------------------------- mbarrier

Mbarrier& BarrierAt(Context& c, void* barrier, const char* instruction, SourceLocation where) {
  const uint32_t address = c.scheduler.SharedAddress(barrier);
  if (!c.scheduler.IsShared(barrier, 8) || address % 8 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrFormat("%s (%s): the mbarrier %p must be an 8-byte aligned object in shared memory",
                                       instruction, where.ToString(), barrier));
  }
  Mbarrier* b = c.state.FindBarrier(address);
  if (b == nullptr || !b->valid) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(instruction, " (", where.ToString(), "): shared ", Hex(address),
                                                 " is not an initialized mbarrier (mbarrier.init first)"));
  }
  return *b;
}

struct MbarrierWait {
  HopperBlockState* state;
  uint32_t address;
  uint32_t parity;
};

bool MbarrierWaitReady(const void* context) {
  const MbarrierWait& w = *static_cast<const MbarrierWait*>(context);
  const Mbarrier* b = w.state->FindBarrier(w.address);
  return b != nullptr && (b->phase & 1) != w.parity;
}

std::string DescribeMbarrierWait(const void* context) {
  const MbarrierWait& w = *static_cast<const MbarrierWait*>(context);
  const Mbarrier* b = w.state->FindBarrier(w.address);
  return absl::StrCat("the phase of parity ", w.parity, " of ",
                      b == nullptr ? "an mbarrier that no longer exists" : HopperBlockState::DescribeBarrier(*b));
}

// ------------------------------------------------------------------------------------------- bulk tensor copies

void FillElement(unsigned char* out, const DecodedTensorMap& map) {
  if (map.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) {
    std::memset(out, 0, map.element_bytes);
    return;
  }
  if (map.element_bytes == 2) {
    const uint16_t nan = 0x7FFF;
    std::memcpy(out, &nan, 2);
  } else if (map.element_bytes == 4) {
    const uint32_t nan = 0x7FFFFFFF;
    std::memcpy(out, &nan, 4);
  } else {
    std::memset(out, 0xFF, map.element_bytes);
  }
}

// Copies element `coordinate` (one per dimension) of the tensor, or the fill value outside it.
void CopyElement(const DecodedTensorMap& map, const int64_t* coordinate, unsigned char* out) {
  uint64_t offset = 0;
  for (int i = 0; i < map.rank; ++i) {
    if (coordinate[i] < 0 || static_cast<uint64_t>(coordinate[i]) >= map.dims[i]) {
      FillElement(out, map);
      return;
    }
    offset += static_cast<uint64_t>(coordinate[i]) * map.strides[i];
  }
  std::memcpy(out, map.global_address + offset, map.element_bytes);
}

// The box of a tiled-mode copy, densely in shared-memory order (dimension 0 fastest).
std::string GatherTiled(const DecodedTensorMap& map, const int32_t* coordinates, std::vector<unsigned char>* image) {
  int64_t counts[5] = {1, 1, 1, 1, 1};
  int64_t total = 1;
  for (int i = 0; i < map.rank; ++i) {
    const uint32_t stride = (i == 0 && map.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE) ? 1 : map.element_strides[i];
    counts[i] = (map.box[i] + stride - 1) / stride;
    total *= counts[i];
  }
  image->resize(static_cast<size_t>(total) * map.element_bytes);
  int64_t index[5] = {0, 0, 0, 0, 0};
  for (int64_t e = 0; e < total; ++e) {
    int64_t coordinate[5];
    for (int i = 0; i < map.rank; ++i) {
      const uint32_t stride = (i == 0 && map.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE) ? 1 : map.element_strides[i];
      coordinate[i] = int64_t{coordinates[i]} + index[i] * stride;
    }
    CopyElement(map, coordinate, image->data() + e * map.element_bytes);
    for (int i = 0; i < map.rank && ++index[i] == counts[i]; ++i) index[i] = 0;
  }
  return "";
}

// The pixels of an im2col-mode copy: pixels_per_column pixels from the filter base at `coordinates` (W, H, D
// traversed by the element strides within the bounding box, wrapping to the next row / image), each shifted by the
// im2col offsets, channels_per_pixel channels each.
std::string GatherIm2col(const DecodedTensorMap& map, const int32_t* coordinates, const uint16_t* offsets,
                         std::vector<unsigned char>* image) {
  const int spatial = map.rank - 2;
  // Filter offsets are unsigned 16 / (rank - 2) bits each; CUTLASS (sm90 implicit GEMM can_implement) keeps them
  // below the all-ones value, (1 << 16 / spatial) - 1: 65535, 255 or 31 is refused.
  const int offset_limit = (1 << (16 / spatial)) - 1;
  int64_t lower[3], upper[3], position[3];
  for (int i = 0; i < spatial; ++i) {
    lower[i] = map.lower_corner[i];
    upper[i] = static_cast<int64_t>(map.dims[i + 1]) - 1 + map.upper_corner[i];
    position[i] = coordinates[i + 1];
    if (offsets[i] >= offset_limit) {
      return absl::StrCat("im2col offset ", i, " = ", offsets[i], " is not below ", offset_limit, " for a ", map.rank,
                          "D tensor (the offset limit: (size - 1) * dilation of the filter must be under it)");
    }
  }
  int64_t image_index = coordinates[map.rank - 1];
  const size_t pixel_bytes = size_t{map.channels_per_pixel} * map.element_bytes;
  image->resize(pixel_bytes * map.pixels_per_column);
  for (uint32_t p = 0; p < map.pixels_per_column; ++p) {
    for (uint32_t ch = 0; ch < map.channels_per_pixel; ++ch) {
      int64_t coordinate[5];
      coordinate[0] = int64_t{coordinates[0]} + ch;
      for (int i = 0; i < spatial; ++i) coordinate[i + 1] = position[i] + offsets[i];
      coordinate[map.rank - 1] = image_index;
      CopyElement(map, coordinate, image->data() + p * pixel_bytes + ch * map.element_bytes);
    }
    for (int i = 0; i < spatial; ++i) {  // next filter base: W fastest, then H, D, then the next image
      position[i] += map.element_strides[i + 1];
      if (position[i] <= upper[i]) break;
      position[i] = lower[i];
      if (i == spatial - 1) ++image_index;
    }
  }
  return "";
}

}  // namespace

// ------------------------------------------------------------------------------------------- descriptor model

MatrixDescriptor DecodeMatrixDescriptor(uint64_t descriptor) {
  MatrixDescriptor d;
  d.start_address = static_cast<uint32_t>(descriptor & 0x3FFF) << 4;
  d.leading_byte_offset = static_cast<uint32_t>((descriptor >> 16) & 0x3FFF) << 4;
  d.stride_byte_offset = static_cast<uint32_t>((descriptor >> 32) & 0x3FFF) << 4;
  d.base_offset = static_cast<int>((descriptor >> 49) & 0x7);
  static constexpr int kSwizzle[4] = {0, 128, 64, 32};
  d.swizzle_bytes = kSwizzle[(descriptor >> 62) & 0x3];
  return d;
}

uint64_t EncodeMatrixDescriptor(const MatrixDescriptor& d) {
  const uint64_t mode = d.swizzle_bytes == 128 ? 1 : d.swizzle_bytes == 64 ? 2 : d.swizzle_bytes == 32 ? 3 : 0;
  return (uint64_t{(d.start_address & 0x3FFFF) >> 4}) | (uint64_t{(d.leading_byte_offset & 0x3FFFF) >> 4} << 16) |
         (uint64_t{(d.stride_byte_offset & 0x3FFFF) >> 4} << 32) | (uint64_t(d.base_offset & 7) << 49) | (mode << 62);
}

uint32_t SwizzleSharedAddress(uint32_t address, int swizzle_bytes, int base_offset) {
  if (swizzle_bytes == 0) return address;
  const uint32_t bits = swizzle_bytes == 128 ? 3 : swizzle_bytes == 64 ? 2 : 1;
  const uint32_t mask = (1u << bits) - 1;
  const uint32_t phase = ((address >> 7) - static_cast<uint32_t>(base_offset)) & mask;
  return address ^ (phase << 4);
}

uint32_t WgmmaOperandElementAddress(const MatrixDescriptor& d, bool mn_major, int element_bytes, int mn, int k) {
  const int per_chunk = 16 / element_bytes;  // elements per 16 bytes (T)
  const uint32_t lbo = d.leading_byte_offset, sbo = d.stride_byte_offset;
  uint32_t address = d.start_address;
  if (!mn_major) {
    // K-major: 8-row core matrices; a row holds 16 bytes of K (no swizzle) or the swizzle span.
    const int group = mn / 8, row = mn % 8, chunk = k / per_chunk, within = k % per_chunk;
    if (d.swizzle_bytes == 0) {
      address += group * sbo + row * 16 + chunk * lbo + within * element_bytes;
    } else {
      address += group * sbo + row * d.swizzle_bytes + chunk * 16 + within * element_bytes;
    }
  } else {
    // MN-major: 16 bytes (no swizzle) or the swizzle span of MN contiguous per K row; 8 K rows per core matrix.
    const int within = mn % per_chunk, row = k % 8, k_group = k / 8;
    if (d.swizzle_bytes == 0) {
      const int mn_group = mn / per_chunk;
      address += within * element_bytes + mn_group * sbo + row * 16 + k_group * lbo;
    } else {
      const int chunks_per_row = d.swizzle_bytes / 16;
      const int chunk = (mn / per_chunk) % chunks_per_row, mn_group = mn / (per_chunk * chunks_per_row);
      address += within * element_bytes + chunk * 16 + mn_group * lbo + row * d.swizzle_bytes + k_group * sbo;
    }
  }
  const uint32_t within_chunk = address & 15u;
  return SwizzleSharedAddress(address & ~15u, d.swizzle_bytes, d.base_offset) | within_chunk;
}

// ---------------------------------------------------------------------------------------------- wgmma entries

void CheckWgmmaRegisterAccess(WgmmaRegisterState& registers) {
  Context c = Here();
  if (registers.in_flight != nullptr) {
    CONVOY_HOPPER_FAIL(
        c.scheduler, absl::StrCat("registers of the wgmma.mma_async issued at ", registers.in_flight->where.ToString(),
                                  " are accessed while it is in flight: wgmma.commit_group and a wgmma.wait_group "
                                  "that covers it must come first"));
  }
  registers.access_epoch = c.thread.fence_epoch;
}

void WgmmaMmaAsync(const WgmmaInstruction& instruction, float* d, WgmmaRegisterState& d_state,
                   const uint32_t* a_registers, WgmmaRegisterState* a_state, uint64_t desc_a, uint64_t desc_b,
                   SourceLocation where) {
  Context c = Here();
  const auto name = [&] {  // built only inside a message: a failing thread's stack must hold no heap memory
    return absl::StrFormat("wgmma.mma_async.%s (%s)", InstructionName(instruction), where.ToString());
  };
  if (instruction.n < 8 || instruction.n > 256 || instruction.n % 8 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": N must be a multiple of 8 in [8, 256]"));
  }
  // The integer shapes: N = 8, 16, 24, then multiples of 16 up to 256.
  if (WgmmaIsInteger(instruction.type) && instruction.n > 24 && instruction.n % 16 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": the integer wgmma has N = 8, 16, 24 or a multiple of 16"));
  }
  if ((instruction.type == WgmmaType::kTf32 || WgmmaIsInteger(instruction.type)) &&
      (instruction.transpose_a || instruction.transpose_b)) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": ", TypeName(instruction.type),
                                                 " operands must be K-major (no transpose)"));
  }
  if (WgmmaIsInteger(instruction.type) && (instruction.scale_a != 1 || instruction.scale_b != 1)) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": the integer wgmma has no operand negation"));
  }
  if (a_registers != nullptr && instruction.transpose_a) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": A from registers has no transpose"));
  }
  if (c.thread.fence_epoch == 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": no wgmma.fence before this thread's first wgmma.mma_async"));
  }
  if (d_state.access_epoch == c.thread.fence_epoch) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(),
                                    ": the accumulator registers were accessed after the last wgmma.fence; a "
                                    "wgmma.fence must separate register accesses from the wgmma that uses them"));
  }
  if (a_state != nullptr && a_state->access_epoch == c.thread.fence_epoch) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": the A fragment registers were written after the last wgmma.fence"));
  }
  if (d_state.in_flight != nullptr &&
      (d_state.in_flight->n != instruction.n || d_state.in_flight->type != instruction.type)) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": its accumulators belong to the in-flight wgmma issued at ",
                                    d_state.in_flight->where.ToString(),
                                    " of another shape; only wgmmas of the same shape chain without a wait"));
  }
  WgmmaLane lane;
  lane.state = &c.state;
  lane.scheduler = &c.scheduler;
  lane.instruction = instruction;
  lane.desc_a = desc_a;
  lane.desc_b = desc_b;
  lane.a_registers = a_registers;
  lane.d = d;
  lane.chained = d_state.in_flight;
  lane.where = where;
  const int thread = c.scheduler.current_thread();
  c.scheduler.WarpgroupCollective(kWgmma, &lane, where);
  PendingWgmma entry;
  entry.op = lane.result;
  entry.d = d;
  entry.d_state = &d_state;
  entry.a_state = a_state;
  entry.thread_in_op = thread % kWarpgroupSize;
  d_state.in_flight = lane.result;
  if (a_state != nullptr) a_state->in_flight = lane.result;
  // In flight the registers read as NaN (the bit pattern 0x7FC00000 for the integer forms' int32 registers).
  const float poison = std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < instruction.n / 2; ++i) std::memcpy(&d[i], &poison, sizeof(float));
  c.thread.pending.push_back(std::move(entry));
}

void WgmmaFence(SourceLocation) { ++Here().thread.fence_epoch; }

void WgmmaCommitGroup(SourceLocation) {
  Context c = Here();
  const int64_t group = ++c.thread.committed_groups;
  for (PendingWgmma& entry : c.thread.pending) {
    if (entry.group < 0) entry.group = group;
  }
}

void WgmmaWaitGroup(int pending, SourceLocation where) {
  Context c = Here();
  if (pending < 0 || pending > 7) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat("wgmma.wait_group (", where.ToString(), "): N = ", pending, " must be in [0, 7]"));
  }
  const int64_t complete_up_to = c.thread.committed_groups - pending;
  std::vector<PendingWgmma>& entries = c.thread.pending;
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    PendingWgmma& entry = entries[i];
    if (entry.group < 0 || entry.group > complete_up_to) {
      entries[kept++] = std::move(entry);
      continue;
    }
    // A thread's wait covers its own part of the operation only: the shared memory the wgmma reads may be reused
    // once every thread of the warpgroup waited for it (a lagging warp may still be reading its part).
    if (++entry.op->completed_threads == kWarpgroupSize && !entry.op->retired) {
      std::string& error = c.state.error_scratch();
      error = c.state.Retire(c.scheduler, *entry.op);
      if (!error.empty()) {
        CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat("wgmma.wait_group (", where.ToString(), "): ", error));
      }
    }
    const int regs = entry.op->n / 2;
    if (entry.d_state->in_flight == entry.op) {
      std::memcpy(entry.d, entry.op->d.data() + entry.thread_in_op * regs, regs * sizeof(float));
      entry.d_state->in_flight = nullptr;
    }
    if (entry.a_state != nullptr && entry.a_state->in_flight == entry.op) entry.a_state->in_flight = nullptr;
    if (entry.op->completed_threads == kWarpgroupSize) c.state.Release(entry.op);
  }
  entries.resize(kept);
}

// -------------------------------------------------------------------------------------------- mbarrier entries

void MbarrierInit(void* barrier, uint32_t count, SourceLocation where) {
  Context c = Here();
  const uint32_t address = c.scheduler.SharedAddress(barrier);
  if (!c.scheduler.IsShared(barrier, 8) || address % 8 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrFormat("mbarrier.init (%s): %p is not an 8-byte aligned address in shared memory",
                                       where.ToString(), barrier));
  }
  if (count == 0 || count > (1u << 20) - 1) {
    CONVOY_HOPPER_FAIL(
        c.scheduler, absl::StrCat("mbarrier.init (", where.ToString(), "): count ", count, " must be in [1, 2^20-1]"));
  }
  Mbarrier* b = c.state.FindBarrier(address);
  if (b != nullptr && b->valid) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat("mbarrier.init (", where.ToString(), "): shared ", Hex(address),
                                                 " already holds the mbarrier initialized at ", b->init_at.ToString(),
                                                 " (mbarrier.inval it first)"));
  }
  if (b == nullptr) b = &c.state.AddBarrier(address);
  b->expected = count;
  b->pending = count;
  b->tx = 0;
  b->phase = 0;
  b->valid = true;
  b->async_visible = false;
  b->copies_in_flight = 0;
  b->init_at = where;
  std::memset(barrier, 0, 8);  // the object's bytes are the hardware's; kernels must not read them as data
}

void MbarrierInval(void* barrier, SourceLocation where) {
  Context c = Here();
  Mbarrier& b = BarrierAt(c, barrier, "mbarrier.inval", where);
  if (b.copies_in_flight > 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat("mbarrier.inval (", where.ToString(), "): ", HopperBlockState::DescribeBarrier(b),
                                    ": bulk copies still signal it"));
  }
  b.valid = false;
}

uint64_t MbarrierArrive(void* barrier, uint32_t count, SourceLocation where) {
  Context c = Here();
  Mbarrier& b = BarrierAt(c, barrier, "mbarrier.arrive", where);
  if (count == 0 || static_cast<int64_t>(count) > b.pending) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat("mbarrier.arrive (", where.ToString(), "): ", count, " arrivals on ",
                                    HopperBlockState::DescribeBarrier(b), ": more arrivals than the phase expects"));
  }
  const uint64_t token = b.phase;
  b.pending -= count;
  std::string& error = c.state.error_scratch();
  error = c.state.MaybeCompletePhase(b);
  if (!error.empty()) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat("mbarrier.arrive (", where.ToString(), "): ", error));
  }
  if (b.phase != token) c.scheduler.WakeReadyThreadsAndYield();  // the waiters of the completed phase run first
  return token;
}

void MbarrierExpectTx(void* barrier, uint32_t bytes, SourceLocation where) {
  Context c = Here();
  Mbarrier& b = BarrierAt(c, barrier, "mbarrier.expect_tx", where);
  b.tx += bytes;
  if (bytes > kTxLimit || b.tx > kTxLimit) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat("mbarrier.expect_tx (", where.ToString(), "): ", bytes, " bytes take ",
                                    HopperBlockState::DescribeBarrier(b), " past the 2^20-1 transaction-count limit"));
  }
}

uint64_t MbarrierArriveExpectTx(void* barrier, uint32_t bytes, SourceLocation where) {
  MbarrierExpectTx(barrier, bytes, where);
  return MbarrierArrive(barrier, 1, where);
}

bool MbarrierTestWaitParity(void* barrier, uint32_t parity, SourceLocation where) {
  Context c = Here();
  const Mbarrier& b = BarrierAt(c, barrier, "mbarrier.test_wait.parity", where);
  return (b.phase & 1) != (parity & 1);
}

void MbarrierWaitParity(void* barrier, uint32_t parity, SourceLocation where) {
  Context c = Here();
  const Mbarrier& b = BarrierAt(c, barrier, "mbarrier.try_wait.parity", where);
  MbarrierWait wait{&c.state, b.address, parity & 1};
  c.scheduler.BlockUntil(&MbarrierWaitReady, &wait, &DescribeMbarrierWait, where);
}

// -------------------------------------------------------------------------------------------------- fences

void FenceProxyAsyncShared(SourceLocation) {
  Context c = Here();
  c.state.PublishGenericWrites(c.scheduler, c.scheduler.current_thread());
}

void FenceMbarrierInit(SourceLocation) { Here().state.MarkBarriersVisible(); }

// ----------------------------------------------------------------------------------------------- bulk copies

void BulkTensorLoad(void* shared_destination, const void* tensor_map, int rank, const int32_t* coordinates,
                    const uint16_t* im2col_offsets, void* barrier, SourceLocation where) {
  Context c = Here();
  const bool im2col = im2col_offsets != nullptr;
  const auto name = [&] {
    return absl::StrFormat("cp.async.bulk.tensor.%dd.%s (%s)", rank, im2col ? "im2col" : "tile", where.ToString());
  };
  if (reinterpret_cast<uintptr_t>(tensor_map) % 64 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(),
                                    ": the tensor map must be 64-byte aligned (pass it as a __grid_constant__ "
                                    "kernel parameter)"));
  }
  DecodedTensorMap map;
  if (!DecodeTensorMap(*static_cast<const CUtensorMap*>(tensor_map), &map)) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": the tensor map was not made by cuTensorMapEncodeTiled/Im2col"));
  }
  if (map.rank != rank || map.im2col != im2col) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrFormat("%s: the tensor map is a %dD %s map", name(), map.rank,
                                                    map.im2col ? "im2col" : "tiled"));
  }
  if (im2col && rank < 3) CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": im2col mode needs a 3D-5D tensor"));
  const uint32_t destination = c.scheduler.SharedAddress(shared_destination);
  if (!c.scheduler.IsShared(shared_destination, 1) || destination % 128 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": the shared destination must be 128-byte aligned shared memory"));
  }
  Mbarrier& b = BarrierAt(c, barrier, "cp.async.bulk.tensor's mbarrier", where);
  if (!b.async_visible) {
    CONVOY_HOPPER_FAIL(c.scheduler,
                       absl::StrCat(name(), ": its mbarrier (initialized at ", b.init_at.ToString(),
                                    ") was not made visible to the async proxy: execute fence.mbarrier_init or "
                                    "fence.proxy.async after mbarrier.init and before the copy"));
  }
  BulkCopy& copy = c.state.copy_scratch();  // state-owned: nothing with heap memory on this thread's stack
  copy.barrier = b.address;
  copy.where = where;
  std::string& error = c.state.error_scratch();
  error =
      im2col ? GatherIm2col(map, coordinates, im2col_offsets, &copy.data) : GatherTiled(map, coordinates, &copy.data);
  if (!error.empty()) CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat(name(), ": ", error));
  if (copy.data.size() % 16 != 0) copy.data.resize((copy.data.size() + 15) / 16 * 16, 0);
  copy.bytes = static_cast<uint32_t>(copy.data.size());
  const int span = SwizzleSpanBytes(map.swizzle);
  for (size_t offset = 0; offset < copy.data.size(); offset += 16) {
    const uint32_t chunk = SwizzleSharedAddress(destination + static_cast<uint32_t>(offset), span, 0);
    if (c.scheduler.SharedPointer(chunk, 16) == nullptr) {
      CONVOY_HOPPER_FAIL(
          c.scheduler,
          absl::StrCat(name(), ": the ", copy.data.size(), "-byte box at shared ", Hex(destination), " runs past the ",
                       c.scheduler.shared_bytes_in_use(), " bytes of shared memory the block declared"));
    }
    if (const WgmmaOperation* reader = c.state.UnretiredReaderOf(chunk); reader != nullptr) {
      CONVOY_HOPPER_FAIL(c.scheduler,
                         absl::StrCat(name(), ": it would overwrite shared memory ", Hex(chunk),
                                      " that the wgmma.mma_async issued at ", reader->where.ToString(),
                                      " still reads (not every thread of its warpgroup executed a wgmma.wait_group "
                                      "covering it before the stage was released: a lagging warp may still read it)"));
    }
    copy.chunks.push_back(chunk);
  }
  ++b.copies_in_flight;
  c.state.CommitCopyScratch();
}

void SetMaxNReg(bool increase, int registers, SourceLocation where) {
  Context c = Here();
  if (registers < 24 || registers > 256 || registers % 8 != 0) {
    CONVOY_HOPPER_FAIL(c.scheduler, absl::StrCat("setmaxnreg (", where.ToString(), "): ", registers,
                                                 " registers must be a multiple of 8 in [24, 256]"));
  }
  const int thread = c.scheduler.current_thread();
  SetMaxNRegLane lane{increase, registers, &c.state, thread / kWarpgroupSize};
  c.scheduler.WarpgroupCollective(kSetMaxNReg, &lane, where);
  if (!increase) return;
  // Every thread of the warpgroup waits until the increase is granted: the warpgroup's first thread takes the
  // registers from the pool, the others wait for its count to reach the request.
  c.scheduler.BlockUntil(thread % kWarpgroupSize == 0 ? &SetMaxNRegGranted : &SetMaxNRegReached, &lane,
                         &DescribeSetMaxNRegWait, where);
}

}  // namespace convoy::cuda_emulation
