// Out-of-band bootstrap: the unique id, the TCP rendezvous through a root, and the small collectives
// (allGather, barrier) and tagged point-to-point messages the communicator needs before, and beside, its
// data transports. Not a data path: every message is copied through the kernel's socket buffers.
#pragma once

#include <tutti/common.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tutti {

class BootstrapMailbox;  // receiver thread + unexpected-message queue (bootstrap.cc)

// Fills a 128-byte ncclUniqueId (NCCL_UNIQUE_ID_BYTES) with a random 64-bit magic and the root's socket
// address. Starts the root rendezvous thread in THIS process, unless NCCL_COMM_ID=host:port is set: then
// the id encodes that address and a magic derived from it, and rank 0's Bootstrap::create runs the root.
// The id holds no pointers; it may be copied to other processes and machines.
ncclResult_t bootstrapGetUniqueId(void* id128);

// Starts the root rendezvous thread for `id128` in this process (listening on the id's address). Called
// by rank 0 when the id came from NCCL_COMM_ID; harmless to call at most once per id.
// The root serves one communicator and exits: after it has told every rank its ring successor, or when
// TUTTI_BOOTSTRAP_TIMEOUT seconds passed since the first rank arrived (or since it started, if none
// did), after telling the ranks that arrived which ranks are missing.
ncclResult_t bootstrapCreateRoot(const void* id128);

// Root threads currently running in this process (for tests and leak checks).
int bootstrapRootThreadsRunning();

class Bootstrap {
 public:
  // Joins the rendezvous; returns once every rank has joined and each rank knows every rank's listen
  // address. A rank that does not arrive within TUTTI_BOOTSTRAP_TIMEOUT seconds makes every waiting
  // rank fail with ncclTimeout and a message naming the missing ranks. `*out` is set only on success.
  static ncclResult_t create(const void* id128, int rank, int nRanks, std::unique_ptr<Bootstrap>* out);
  // create() in two steps, for a caller that must be able to abort() the join from another thread:
  // open() checks the arguments and builds the object without waiting; join() (once) is the rendezvous.
  static ncclResult_t open(const void* id128, int rank, int nRanks, std::unique_ptr<Bootstrap>* out);
  ncclResult_t join(const void* id128);

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }

  // In place: `data` holds nRanks slots of `bytesPerRank`; this rank's slot is filled by the caller.
  // Collective: every rank calls it with the same bytesPerRank.
  ncclResult_t allGather(void* data, size_t bytesPerRank);
  // Collective: returns once every rank has entered the barrier.
  ncclResult_t barrier();

  // Point-to-point messages matched by (peer, tag), any size, FIFO per (peer, tag). Messages that
  // arrive before their recv are queued. send() returns once the data is in the socket; it only waits
  // while the socket buffers are full, since the receiving process drains its sockets on its own
  // thread, and abort() ends that wait. recv() waits up to TUTTI_TIMEOUT seconds (0: forever); a
  // message of a different size than `bytes` is an error (ncclInvalidUsage), as is a peer that closed.
  // Tags are the caller's; internal traffic (allGather, barrier) never matches a user tag.
  // Thread-safety: any method may be called from several threads; sends to one peer are serialized.
  ncclResult_t send(int peer, int tag, const void* data, size_t bytes);
  ncclResult_t recv(int peer, int tag, void* data, size_t bytes);
  // As recv, but gives up after `timeoutMs` (ncclTimeout, no message logged: a poll, not a failure).
  ncclResult_t recvWithin(int peer, int tag, void* data, size_t bytes, int64_t timeoutMs);

  // Liveness of rank `peer`: raised once its bootstrap connection to this rank has ended (it died, or destroyed
  // its communicator). Only a peer that has sent this rank a message holds such a connection (connection setup
  // exchanges messages with every connected peer). Valid while this Bootstrap lives; null before join().
  const std::atomic<uint8_t>* peerGoneFlag(int peer) const;

  // Makes every current and future wait of this bootstrap fail with ncclInternalError. Thread-safe,
  // idempotent, does not block (ncclCommAbort calls it from another thread).
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

 private:
  Bootstrap(int rank, int nRanks, uint64_t magic);

  // `kind` (wire::MsgKind) keeps internal traffic (address ring, allGather, barrier) apart from user tags.
  ncclResult_t sendKind(int peer, uint32_t kind, int tag, const void* data, size_t bytes, int64_t deadlineMs);
  ncclResult_t recvKind(int peer, uint32_t kind, int tag, void* data, size_t bytes, int64_t deadlineMs);
  ncclResult_t ringAllGather(uint32_t kind, void* data, size_t bytesPerRank, int64_t deadlineMs);
  ncclResult_t join(const void* id128, int64_t timeoutMs);

  struct PeerSend;  // lazily opened, cached outgoing connection to one peer

  int rank_;
  int nRanks_;
  uint64_t magic_;
  std::atomic<bool> aborted_{false};
  bool joined_ = false;
  int abortFd_ = -1;  // eventfd, readable once abort() or the destructor ran
  std::mutex mailboxMu_;  // orders abort()'s wake-up against join() creating the mailbox
  std::unique_ptr<BootstrapMailbox> mailbox_;
  std::vector<std::unique_ptr<PeerSend>> peers_;  // indexed by rank; address filled during create
};

}  // namespace tutti
