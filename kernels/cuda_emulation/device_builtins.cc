// The resolvers of the emulated warp collectives (see device_builtins.h): each runs once per warp group, after every
// lane named in the mask has arrived, reading the lanes' payloads and writing their results.
#include "kernels/cuda_emulation/device_builtins.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_format.h"

namespace convoy::cuda_emulation {
namespace {

template <typename Payload>
Payload& LaneOf(void* const payloads[kWarpSize], int lane) {
  return *static_cast<Payload*>(payloads[lane]);
}

// The lane whose value `lane` receives (its own when the source falls outside its width segment).
template <ShuffleMode kMode>
int ShuffleSource(int lane, const ShuffleLane& me) {
  const int segment = lane & ~(me.width - 1);
  switch (kMode) {
    case ShuffleMode::kIndex:
      return segment + (me.operand & (me.width - 1));
    case ShuffleMode::kUp:
      return lane - me.operand >= segment ? lane - me.operand : lane;
    case ShuffleMode::kDown:
      return lane + me.operand < segment + me.width ? lane + me.operand : lane;
    case ShuffleMode::kXor: {
      const int source = lane ^ me.operand;
      return source >= segment && source < segment + me.width ? source : lane;
    }
  }
  return lane;
}

template <ShuffleMode kMode>
std::string ResolveShuffle(void* const payloads[kWarpSize], unsigned mask) {
  int sources[kWarpSize];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    const ShuffleLane& me = LaneOf<ShuffleLane>(payloads, lane);
    if (me.width < 1 || me.width > kWarpSize || (me.width & (me.width - 1)) != 0) {
      return absl::StrFormat("lane %d: width %d is not a power of two in [1, 32]", lane, me.width);
    }
    sources[lane] = ShuffleSource<kMode>(lane, me);
    if ((mask >> sources[lane] & 1u) == 0) {
      return absl::StrFormat("lane %d reads lane %d, which is not in the mask (its value would be undefined)", lane,
                             sources[lane]);
    }
  }
  // Reads first, then writes: results land in the lanes' own payloads only after every value was read.
  uint64_t results[kWarpSize];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (mask >> lane & 1u) results[lane] = LaneOf<ShuffleLane>(payloads, sources[lane]).value;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (mask >> lane & 1u) LaneOf<ShuffleLane>(payloads, lane).result = results[lane];
  }
  return "";
}

// Folds the lanes' values (as 32-bit words) with `op` and gives every lane the result.
template <typename Word, typename Op>
std::string ResolveReduce(void* const payloads[kWarpSize], unsigned mask, Op op) {
  bool first = true;
  Word total = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    const Word value = static_cast<Word>(static_cast<uint32_t>(LaneOf<VoteLane>(payloads, lane).value));
    total = first ? value : op(total, value);
    first = false;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (mask >> lane & 1u) LaneOf<VoteLane>(payloads, lane).result = static_cast<uint32_t>(total);
  }
  return "";
}

}  // namespace

std::string ResolveShuffleIndex(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveShuffle<ShuffleMode::kIndex>(payloads, mask);
}
std::string ResolveShuffleUp(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveShuffle<ShuffleMode::kUp>(payloads, mask);
}
std::string ResolveShuffleDown(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveShuffle<ShuffleMode::kDown>(payloads, mask);
}
std::string ResolveShuffleXor(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveShuffle<ShuffleMode::kXor>(payloads, mask);
}

std::string ResolveBallot(void* const payloads[kWarpSize], unsigned mask) {
  unsigned ballot = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane & 1u) && LaneOf<VoteLane>(payloads, lane).value != 0) ballot |= 1u << lane;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (mask >> lane & 1u) LaneOf<VoteLane>(payloads, lane).result = ballot;
  }
  return "";
}

std::string ResolveMatchAny(void* const payloads[kWarpSize], unsigned mask) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    unsigned same = 0;
    for (int other = 0; other < kWarpSize; ++other) {
      if ((mask >> other & 1u) && LaneOf<VoteLane>(payloads, other).value == LaneOf<VoteLane>(payloads, lane).value) {
        same |= 1u << other;
      }
    }
    LaneOf<VoteLane>(payloads, lane).result = same;
  }
  return "";
}

std::string ResolveMatchAll(void* const payloads[kWarpSize], unsigned mask) {
  const int first = __builtin_ctz(mask);
  bool all_equal = true;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (mask >> lane & 1u)
      all_equal &= LaneOf<VoteLane>(payloads, lane).value == LaneOf<VoteLane>(payloads, first).value;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    LaneOf<VoteLane>(payloads, lane).result = all_equal ? mask : 0;
    LaneOf<VoteLane>(payloads, lane).flag = all_equal;
  }
  return "";
}

std::string ResolveReduceAdd(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, std::plus<uint32_t>());
}
std::string ResolveReduceMinSigned(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<int32_t>(payloads, mask, [](int32_t a, int32_t b) { return std::min(a, b); });
}
std::string ResolveReduceMaxSigned(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<int32_t>(payloads, mask, [](int32_t a, int32_t b) { return std::max(a, b); });
}
std::string ResolveReduceMinUnsigned(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, [](uint32_t a, uint32_t b) { return std::min(a, b); });
}
std::string ResolveReduceMaxUnsigned(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, [](uint32_t a, uint32_t b) { return std::max(a, b); });
}
std::string ResolveReduceAnd(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, std::bit_and<uint32_t>());
}
std::string ResolveReduceOr(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, std::bit_or<uint32_t>());
}
std::string ResolveReduceXor(void* const payloads[kWarpSize], unsigned mask) {
  return ResolveReduce<uint32_t>(payloads, mask, std::bit_xor<uint32_t>());
}
std::string ResolveNothing(void* const[kWarpSize], unsigned) { return ""; }

}  // namespace convoy::cuda_emulation
