// Data movement for the net checks: registered buffers, batches of messages posted all at once and then
// polled to completion, and the data / size / bounds checks on the receiving end.
#pragma once

#include "net_api.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tutti::check {

// One message of a batch. Both ends use the same offset into their own buffer.
struct Msg {
  int tag = 0;
  size_t size = 0;    // bytes sent
  size_t offset = 0;  // into the buffer
  size_t cap = 0;     // receive capacity posted (>= size)
  uint32_t seed = 0;  // data pattern
};

// Room left after a receive buffer's capacity that must stay untouched (also separates messages).
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xEE;

// A host buffer registered with one comm (regMr NCCL_PTR_HOST) for as long as the object lives.
class RegBuffer {
 public:
  RegBuffer() = default;
  RegBuffer(const RegBuffer&) = delete;
  RegBuffer& operator=(const RegBuffer&) = delete;
  ~RegBuffer() { release(); }
  // Empty string on success, else what failed.
  std::string reg(NetPlugin* net, void* comm, size_t bytes);
  std::string dereg();
  void release();
  unsigned char* data() { return mem_.data(); }
  size_t size() const { return mem_.size(); }
  void* mhandle() const { return mh_; }

 private:
  NetPlugin* net_ = nullptr;
  void* comm_ = nullptr;
  void* mh_ = nullptr;
  bool registered_ = false;
  std::vector<unsigned char> mem_;
};

void fillPattern(unsigned char* p, size_t n, uint32_t seed);
std::string checkPattern(const unsigned char* p, size_t n, uint32_t seed);

// Sends `msgs` in order on sendComm: every isend is posted before any completion is awaited (a NULL
// request means "retry", during which earlier requests are tested). Empty string on success.
std::string sendBatch(NetPlugin* net, void* sendComm, RegBuffer& buf, const std::vector<Msg>& msgs, int timeoutSec);

// Receives on recvComm: one irecv per group (n = group size), all posted before waiting; then checks the
// reported sizes, the data and the guard bytes. *broken is set when the failure leaves the stream
// unusable (error, timeout), not for wrong data.
std::string recvBatch(NetPlugin* net, void* recvComm, RegBuffer& buf, const std::vector<std::vector<Msg>>& groups,
                      int timeoutSec, bool* broken);

// "tag:size:offset:seed,..." for the sending end, and back.
std::string encodeMsgs(const std::vector<Msg>& msgs);
bool decodeMsgs(const std::string& s, std::vector<Msg>* msgs);

// Polls request until done. sizes may be null. Empty string on success.
std::string waitRequest(NetPlugin* net, void* req, int timeoutSec, int* sizes, const std::string& what);

}  // namespace tutti::check
