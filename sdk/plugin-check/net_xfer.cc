#include "net_xfer.h"

#include "common.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace tutti::check {

std::string RegBuffer::reg(NetPlugin* net, void* comm, size_t bytes) {
  release();
  mem_.assign(bytes, 0);
  net_ = net;
  comm_ = comm;
  void* mh = nullptr;
  ncclResult_t r = net->regMr(comm, mem_.data(), bytes, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) return std::string("regMr(NCCL_PTR_HOST, ") + std::to_string(bytes) + " B) returned " + resultName(r);
  mh_ = mh;
  registered_ = true;
  return "";
}

std::string RegBuffer::dereg() {
  if (!registered_) return "";
  registered_ = false;
  ncclResult_t r = net_->deregMr(comm_, mh_);
  return r == ncclSuccess ? "" : std::string("deregMr returned ") + resultName(r);
}

void RegBuffer::release() {
  if (registered_) (void)dereg();
}

void fillPattern(unsigned char* p, size_t n, uint32_t seed) {
  // Position-dependent and seed-dependent, so a shifted, truncated or swapped message is caught.
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<unsigned char>(x >> 16);
  }
}

std::string checkPattern(const unsigned char* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  size_t bad = 0, first = 0;
  unsigned char got = 0, want = 0;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    auto w = static_cast<unsigned char>(x >> 16);
    if (p[i] != w) {
      if (!bad++) first = i, got = p[i], want = w;
    }
  }
  if (!bad) return "";
  char b[160];
  snprintf(b, sizeof b, "%zu of %zu bytes wrong, first at offset %zu (got 0x%02x, want 0x%02x)", bad, n, first, got,
           want);
  return b;
}

std::string waitRequest(NetPlugin* net, void* req, int timeoutSec, int* sizes, const std::string& what) {
  Deadline dl(timeoutSec);
  for (int it = 0;; it++) {
    int done = 0;
    ncclResult_t r = net->test(req, &done, sizes);
    if (r != ncclSuccess) return "test() on " + what + " returned " + resultName(r);
    if (done) return "";
    if (dl.expired()) return what + " not complete after " + std::to_string(timeoutSec) + " s";
    pollPause(it);
  }
}

namespace {

// Tests every request not yet done once; returns an error text or "".
std::string testAll(NetPlugin* net, std::vector<void*>& reqs, std::vector<bool>& done, std::vector<std::vector<int>>* sizes,
                    const char* what, int* left) {
  for (size_t i = 0; i < reqs.size(); i++) {
    if (done[i] || !reqs[i]) continue;
    int d = 0;
    int dummy[64] = {};
    ncclResult_t r = net->test(reqs[i], &d, sizes ? (*sizes)[i].data() : dummy);
    if (r != ncclSuccess) {
      done[i] = true;  // a failed request is gone; never test it again
      return std::string("test() on ") + what + " " + std::to_string(i) + " returned " + resultName(r);
    }
    if (d) {
      done[i] = true;
      (*left)--;
    }
  }
  return "";
}

}  // namespace

std::string sendBatch(NetPlugin* net, void* sendComm, RegBuffer& buf, const std::vector<Msg>& msgs, int timeoutSec) {
  std::vector<void*> reqs(msgs.size(), nullptr);
  std::vector<bool> done(msgs.size(), false);
  int left = static_cast<int>(msgs.size());
  Deadline dl(timeoutSec);
  for (size_t i = 0; i < msgs.size(); i++) {
    const Msg& m = msgs[i];
    if (m.offset + m.size > buf.size()) return "message outside the send buffer (tool bug)";
    fillPattern(buf.data() + m.offset, m.size, m.seed);
    for (int it = 0;; it++) {
      ncclResult_t r = net->isend(sendComm, buf.data() + m.offset, m.size, m.tag, buf.mhandle(), &reqs[i]);
      if (r != ncclSuccess)
        return "isend #" + std::to_string(i) + " (" + std::to_string(m.size) + " B) returned " + resultName(r);
      if (reqs[i]) break;
      std::string e = testAll(net, reqs, done, nullptr, "send", &left);
      if (!e.empty()) return e;
      if (dl.expired())
        return "isend #" + std::to_string(i) + " kept returning a NULL request for " + std::to_string(timeoutSec) +
               " s with " + std::to_string(i) + " sends posted";
      pollPause(it);
    }
  }
  for (int it = 0; left > 0; it++) {
    std::string e = testAll(net, reqs, done, nullptr, "send", &left);
    if (!e.empty()) return e;
    if (left && dl.expired()) return std::to_string(left) + " send(s) not complete after " + std::to_string(timeoutSec) + " s";
    pollPause(it);
  }
  return "";
}

std::string recvBatch(NetPlugin* net, void* recvComm, RegBuffer& buf, const std::vector<std::vector<Msg>>& groups,
                      int timeoutSec, bool* broken) {
  memset(buf.data(), kGuardByte, buf.size());
  std::vector<void*> reqs(groups.size(), nullptr);
  std::vector<bool> done(groups.size(), false);
  std::vector<std::vector<int>> sizes(groups.size(), std::vector<int>(64, -1));
  int left = static_cast<int>(groups.size());
  Deadline dl(timeoutSec);
  *broken = true;
  for (size_t g = 0; g < groups.size(); g++) {
    int n = static_cast<int>(groups[g].size());
    void* data[64];
    size_t caps[64];
    int tags[64];
    void* mhs[64];
    for (int i = 0; i < n; i++) {
      const Msg& m = groups[g][i];
      if (m.offset + m.cap + kGuardBytes > buf.size()) return "message outside the receive buffer (tool bug)";
      data[i] = buf.data() + m.offset;
      caps[i] = m.cap;
      tags[i] = m.tag;
      mhs[i] = buf.mhandle();
    }
    for (int it = 0;; it++) {
      ncclResult_t r = net->irecv(recvComm, n, data, caps, tags, mhs, &reqs[g]);
      if (r != ncclSuccess)
        return "irecv #" + std::to_string(g) + " (n=" + std::to_string(n) + ") returned " + resultName(r);
      if (reqs[g]) break;
      std::string e = testAll(net, reqs, done, &sizes, "receive", &left);
      if (!e.empty()) return e;
      if (dl.expired())
        return "irecv #" + std::to_string(g) + " kept returning a NULL request for " + std::to_string(timeoutSec) + " s";
      pollPause(it);
    }
  }
  for (int it = 0; left > 0; it++) {
    std::string e = testAll(net, reqs, done, &sizes, "receive", &left);
    if (!e.empty()) return e;
    if (left && dl.expired())
      return std::to_string(left) + " receive(s) not complete after " + std::to_string(timeoutSec) + " s";
    pollPause(it);
  }
  *broken = false;
  std::string err;
  for (size_t g = 0; g < groups.size() && err.empty(); g++) {
    for (size_t i = 0; i < groups[g].size() && err.empty(); i++) {
      const Msg& m = groups[g][i];
      std::string where = "message tag " + std::to_string(m.tag) + " (" + std::to_string(m.size) + " B";
      where += groups[g].size() > 1 ? ", buffer " + std::to_string(i) + " of a grouped irecv)" : ")";
      if (sizes[g][i] != static_cast<int>(m.size)) {
        err = where + ": test() reported size " + std::to_string(sizes[g][i]);
        break;
      }
      std::string d = checkPattern(buf.data() + m.offset, m.size, m.seed);
      if (!d.empty()) err = where + ": data corrupted: " + d;
      const unsigned char* guard = buf.data() + m.offset + m.cap;
      for (size_t k = 0; k < kGuardBytes && err.empty(); k++)
        if (guard[k] != kGuardByte) err = where + ": wrote past the end of the posted receive buffer";
    }
  }
  return err;
}

std::string encodeMsgs(const std::vector<Msg>& msgs) {
  std::string s;
  for (auto& m : msgs) {
    if (!s.empty()) s += ',';
    s += std::to_string(m.tag) + ":" + std::to_string(m.size) + ":" + std::to_string(m.offset) + ":" +
         std::to_string(m.seed);
  }
  return s;
}

bool decodeMsgs(const std::string& s, std::vector<Msg>* msgs) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Msg m;
    unsigned long long size = 0, off = 0;
    unsigned seed = 0;
    if (sscanf(item.c_str(), "%d:%llu:%llu:%u", &m.tag, &size, &off, &seed) != 4) return false;
    m.size = size;
    m.offset = off;
    m.seed = seed;
    m.cap = size;
    msgs->push_back(m);
  }
  return true;
}

}  // namespace tutti::check
