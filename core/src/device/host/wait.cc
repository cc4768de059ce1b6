#include "device/host/wait.h"

#include "proxy/proxy.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>

namespace tutti::host {
namespace {

void futexWait(uint32_t* word, uint32_t expected, int64_t ns, bool shared) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  syscall(SYS_futex, word, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void futexWakeAll(uint32_t* word, bool shared) {
  syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sleep slices are short so abort, peer death and timeouts are noticed promptly.
constexpr int64_t kSliceNs = 50 * 1000 * 1000;
// publish() does not order its store before its look at the waiters (a full fence there would stall every step
// until the store reached the line the other end polls), so a waiter that announces itself while that store is
// still on its way may sleep through it. Such a waiter wakes by itself: the first slice lasts 100 us and each next
// one twice the last, up to kSliceNs, so a missed wake-up costs at most about the time already waited.
constexpr int64_t kFirstSliceNs = 100 * 1000;

}  // namespace

void SpinPacer::yieldCore() { sched_yield(); }

WaitStatus waitAtLeast(uint64_t* counter, uint32_t* waiters, uint32_t* seq, const uint32_t* closed,
                       uint64_t target, const WaitContext& ctx) {
  std::atomic_ref<uint64_t> value(*counter);
  if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
  const int spins = ctx.nDrive > 0 && ctx.driveSpinCount >= 0 ? ctx.driveSpinCount : ctx.spinCount;
  SpinPacer pacer(spins);
  for (int i = 0; i < spins; ++i) {
    if (ctx.nDrive > 0) {
      for (int t = 0; t < ctx.nDrive; ++t) proxyProgressInline(ctx.drive[t]);
      proxyDriveScoped();  // the operation's other ends (proxy.h, ProxyDriveScope)
      if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
    }
    const bool yielded = pacer.pause();
    if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
    if (!yielded) continue;
    // A yield may hand the core away for a whole time slice: notice abort and a closed peer while spinning.
    if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed)) return WaitStatus::Aborted;
    if (closed && std::atomic_ref<const uint32_t>(*closed).load(std::memory_order_acquire))
      return value.load(std::memory_order_acquire) >= target ? WaitStatus::Ready : WaitStatus::PeerClosed;
  }
  const int64_t deadline = ctx.timeoutNs > 0 ? nowNs() + ctx.timeoutNs : 0;
  const bool watchSlow = ctx.warnNs > 0 && ctx.onSlow;
  const int64_t sleepStart = watchSlow ? nowNs() : 0;
  bool warned = false;
  // After a sleep that did not bring the value: what ends the wait instead, or nothing (Ready: sleep again).
  auto afterSleep = [&]() {
    if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed)) return WaitStatus::Aborted;
    if (closed && std::atomic_ref<const uint32_t>(*closed).load(std::memory_order_acquire))
      return WaitStatus::PeerClosed;
    // A process that died cannot raise its closed flag: its lifeline tells (once per slice). What it published
    // before it went still counts.
    if (ctx.peerGone && ctx.peerGone->load(std::memory_order_acquire))
      return value.load(std::memory_order_acquire) >= target ? WaitStatus::Ready : WaitStatus::PeerClosed;
    if (deadline && nowNs() > deadline) return WaitStatus::TimedOut;
    if (watchSlow && !warned) {
      const int64_t waited = nowNs() - sleepStart;
      if (waited > ctx.warnNs) {
        warned = true;
        ctx.onSlow(ctx.slowCtx, waited);
      }
    }
    return WaitStatus::Ready;
  };
  // A network connection: sleep in the net plugin until a socket of this thread's connections can move data,
  // then move it from here (proxyWaitNetwork). Where ranks outnumber cores this spares the proxy thread's wake-up
  // and the futex wake-up behind it: one thread scheduled per message instead of two.
  if (ctx.netTask) {
    if (spins == 0) {  // what the connections' last progress left in flight is what the plugin waits on
      for (int t = 0; t < ctx.nDrive; ++t) proxyProgressInline(ctx.drive[t]);
      proxyDriveScoped();
      if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
    }
    for (int64_t slice = kFirstSliceNs;;) {
      const int woke = proxyWaitNetwork(ctx.netTask, ctx.drive, ctx.nDrive, slice);
      if (woke < 0) break;  // not now: the futex below
      for (int t = 0; t < ctx.nDrive; ++t) proxyProgressInline(ctx.drive[t]);
      proxyDriveScoped();
      if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
      if (const WaitStatus st = afterSleep(); st != WaitStatus::Ready) return st;
      // Data moved but not enough yet: the next wait starts short again. A missed wake-up (what another
      // thread moved) costs at most about the time already waited, as on the futex.
      slice = woke ? kFirstSliceNs : std::min(2 * slice, kSliceNs);
    }
  }
  // Asleep, this thread drives no network connection: the proxy thread takes over until it wakes.
  struct HandOff {
    HandOff() { proxyHandOffBegin(); }
    ~HandOff() { proxyHandOffEnd(); }
  } handOff;
  std::atomic_ref<uint32_t> nWaiters(*waiters);
  std::atomic_ref<uint32_t> seqWord(*seq);
  for (int64_t slice = kFirstSliceNs;; slice = std::min(2 * slice, kSliceNs)) {
    uint32_t s = seqWord.load(std::memory_order_seq_cst);
    nWaiters.fetch_add(1, std::memory_order_seq_cst);
    // Re-check after announcing ourselves: a publish() that read `waiters` before this announcement reached it has
    // stored its value by then, so we see it here, or, where that store was still on its way, at the end of the
    // slice (kFirstSliceNs); one that sees us bumps seq.
    if (value.load(std::memory_order_seq_cst) >= target) {
      nWaiters.fetch_sub(1, std::memory_order_relaxed);
      return WaitStatus::Ready;
    }
    futexWait(seq, s, slice, ctx.shared);
    nWaiters.fetch_sub(1, std::memory_order_relaxed);
    if (value.load(std::memory_order_acquire) >= target) return WaitStatus::Ready;
    if (const WaitStatus st = afterSleep(); st != WaitStatus::Ready) return st;
  }
}

void publish(uint64_t* counter, uint32_t* waiters, uint32_t* seq, uint64_t value, bool shared) {
  std::atomic_ref<uint64_t>(*counter).store(value, std::memory_order_release);
  if (std::atomic_ref<uint32_t>(*waiters).load(std::memory_order_relaxed) != 0) {
    std::atomic_ref<uint32_t>(*seq).fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(seq, shared);
  }
}

void closeEnd(tuttiConnCtrl_t* ctrl, bool senderSide, bool shared, int failure) {
  std::atomic_ref<uint32_t>(senderSide ? ctrl->senderClosed : ctrl->receiverClosed)
      .store(failure >= 0 ? static_cast<uint32_t>(failure) + 2 : 1u, std::memory_order_release);
  std::atomic_ref<uint32_t>(ctrl->tailSeq).fetch_add(1);
  std::atomic_ref<uint32_t>(ctrl->headSeq).fetch_add(1);
  futexWakeAll(&ctrl->tailSeq, shared);
  futexWakeAll(&ctrl->headSeq, shared);
}

}  // namespace tutti::host
