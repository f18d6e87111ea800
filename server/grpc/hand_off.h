// HandOff: makes visible to ThreadSanitizer the order gRPC's callback API already guarantees between the thread that
// starts an operation on a call (a read, a write, the finish) and the gRPC thread that then runs the reaction to it
// (OnReadDone, OnWriteDone, OnDone). gRPC orders them inside its own libraries, which Debian does not build with
// TSan, so without this every field a reactor writes before an operation and reads in the reaction looks like a
// race. Release() right before handing the operation to gRPC, Acquire() first in each reaction; outside TSan it costs
// one uncontended atomic add per operation.
#ifndef CONVOY_SERVER_GRPC_HAND_OFF_H_
#define CONVOY_SERVER_GRPC_HAND_OFF_H_

#include <atomic>
#include <cstdint>

namespace convoy::grpc_server {

class HandOff {
 public:
  void Release() { operations_.fetch_add(1, std::memory_order_release); }
  void Acquire() const { (void)operations_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> operations_{0};  // operations handed to gRPC; the count itself is not used
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_HAND_OFF_H_
