// `tutti-plugin-check net`: local checks (table, init, devices, properties), then connection checks
// between a receiving end (this worker, which drives) and a sending end (a forked process by default, a
// thread with --peer thread), then error paths. The sending end is a small command server over a Link.
#include "common.h"
#include "link.h"
#include "net_api.h"
#include "net_xfer.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

namespace tutti::check {
namespace {

constexpr size_t kLargeBytes = 8u << 20;
constexpr size_t kBufferBytes = kLargeBytes + (256u << 10);  // the large message plus room for offsets and guards
constexpr uint64_t kCommId = 0x7475747469636b31ull;         // any value: the tool plays one communicator

// ---- sending end ----------------------------------------------------------------------------------------

struct SendEnd {
  std::unique_ptr<NetPlugin> owned;  // process mode: loaded by the sending process itself
  NetPlugin* net = nullptr;
  void* ctx = nullptr;
  bool ownCtx = false;
  void* comm = nullptr;
  RegBuffer buf;
  int timeoutSec = 20;
};

std::string rc(const char* call, ncclResult_t r) { return std::string(call) + " returned " + resultName(r); }

// Executes one command; the reply is "OK" or "ERR <why>".
std::string serve(SendEnd& s, const std::string& cmd, bool* quit) {
  std::string verb = cmd.substr(0, cmd.find(' '));
  std::string arg = cmd.size() > verb.size() + 1 ? cmd.substr(verb.size() + 1) : "";
  std::string err;
  if (verb == "LOAD") {  // LOAD <abi> <path>
    int abi = atoi(arg.c_str());
    std::string path = arg.substr(arg.find(' ') + 1), why;
    std::vector<int> found;
    s.owned = loadNetPlugin(path, abi, &why, &found);
    if (!s.owned) return "ERR " + why;
    s.net = s.owned.get();
    ncclResult_t r = s.net->init(&s.ctx, kCommId + 1);
    if (r != ncclSuccess) return "ERR " + rc("init", r);
    s.ownCtx = true;
  } else if (verb == "CONNECT") {  // CONNECT <dev> <hex handle>
    int dev = atoi(arg.c_str());
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    if (!fromHex(arg.substr(arg.find(' ') + 1), handle, sizeof handle)) return "ERR bad handle encoding";
    s.comm = nullptr;
    Deadline dl(s.timeoutSec);
    for (int it = 0; !s.comm; it++) {
      ncclResult_t r = s.net->connect(s.ctx, dev, handle, &s.comm);
      if (r != ncclSuccess) return "ERR " + rc("connect", r);
      if (!s.comm && dl.expired()) return "ERR connect returned no comm for " + std::to_string(s.timeoutSec) + " s";
      pollPause(it);
    }
  } else if (verb == "REG") {
    err = s.buf.reg(s.net, s.comm, strtoull(arg.c_str(), nullptr, 10));
  } else if (verb == "DEREG") {
    err = s.buf.dereg();
  } else if (verb == "SEND") {
    std::vector<Msg> msgs;
    if (!decodeMsgs(arg, &msgs)) return "ERR bad SEND command";
    err = sendBatch(s.net, s.comm, s.buf, msgs, s.timeoutSec);
  } else if (verb == "CLOSE") {
    ncclResult_t r = s.net->closeSend(s.comm);
    s.comm = nullptr;
    if (r != ncclSuccess) err = rc("closeSend", r);
  } else if (verb == "QUIT") {
    *quit = true;
    if (s.ownCtx && s.net->hasFinalize()) {
      ncclResult_t r = s.net->finalize(s.ctx);
      if (r != ncclSuccess) err = rc("finalize (sending end)", r);
    }
  } else {
    err = "unknown command " + verb;
  }
  return err.empty() ? "OK" : "ERR " + err;
}

void serveLoop(SendEnd& s, Link& link) {
  bool quit = false;
  std::string cmd;
  // The driving end bounds every step; a long silence means it is gone.
  while (!quit && link.recv(&cmd, s.timeoutSec * 4 + 30)) {
    if (!link.send(serve(s, cmd, &quit))) break;
  }
}

// ---- driving (receiving) end --------------------------------------------------------------------------

class Driver {
 public:
  Driver(const Options& opt, Out& out, NetPlugin* net, void* ctx, int dev, Link& link)
      : opt_(opt), out_(out), net_(net), ctx_(ctx), dev_(dev), link_(link) {}

  pid_t peerPid = -1;  // process mode: for the reason when the sending end dies

  // Sends a command and waits for its reply ("" for OK).
  std::string call(const std::string& cmd) {
    std::string reply;
    if (!link_.send(cmd) || !link_.recv(&reply, opt_.timeoutSec * 3 + 10)) return peerGone();
    return reply == "OK" ? "" : reply.substr(reply.find(' ') + 1);
  }

  // listen + accept while the sending end connects. On success *recvComm and *listenComm are set.
  std::string connect(void** listenComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    *listenComm = *recvComm = nullptr;
    ncclResult_t r = net_->listen(ctx_, dev_, handle, listenComm);
    if (r != ncclSuccess) return rc("listen", r);
    if (!*listenComm) return "listen succeeded without returning a listen comm";
    if (!link_.send("CONNECT " + std::to_string(dev_) + " " + toHex(handle, sizeof handle))) return peerGone();
    Deadline dl(opt_.timeoutSec);
    std::string err, reply;
    bool replied = false;
    for (int it = 0; !*recvComm; it++) {
      // A sending end that already gave up (connect failed) will never show up: stop accepting.
      if (!replied && link_.poll(&reply)) {
        replied = true;
        if (reply != "OK") break;
      }
      r = net_->accept(*listenComm, recvComm);
      if (r != ncclSuccess) {
        err = rc("accept", r);
        break;
      }
      if (!*recvComm && dl.expired()) {
        err = "accept returned no comm for " + std::to_string(opt_.timeoutSec) + " s";
        break;
      }
      pollPause(it);
    }
    if (!replied && !link_.recv(&reply, opt_.timeoutSec * 3 + 10)) return peerGone();
    if (reply != "OK") {
      std::string e = "sending end: " + reply.substr(reply.find(' ') + 1);
      if (opt_.threadPeer == false && e.find("connect") != std::string::npos)
        e += " (a plugin that connects only inside one process needs --peer thread)";
      return err.empty() ? e : err + "; " + e;
    }
    return err;
  }

  // One batch: the sending end posts `msgs` in order, this end posts `groups` (same messages).
  std::string transfer(const std::vector<std::vector<Msg>>& groups, bool* broken) {
    std::vector<Msg> flat;
    for (auto& g : groups) flat.insert(flat.end(), g.begin(), g.end());
    if (!link_.send("SEND " + encodeMsgs(flat))) {
      *broken = true;
      return peerGone();
    }
    std::string err = recvBatch(net_, recvComm_, buf_, groups, opt_.timeoutSec, broken);
    std::string reply;
    if (!link_.recv(&reply, opt_.timeoutSec * 3 + 10)) {
      *broken = true;
      return peerGone();
    }
    if (reply != "OK") {
      *broken = true;
      std::string e = "sending end: " + reply.substr(reply.find(' ') + 1);
      err = err.empty() ? e : err + "; " + e;
    }
    return err;
  }

  // The checks on one long-lived connection.
  // False when no connection could be made (the later connection checks are then skipped).
  bool mainConnection(const NetProps& props) {
    void* listenComm = nullptr;
    out_.begin("net.connect");
    std::string err = connect(&listenComm, &recvComm_);
    if (err.empty() && listenComm) {
      // As the core does: the listen comm goes away once its connection is accepted.
      ncclResult_t r = net_->closeListen(listenComm);
      if (r != ncclSuccess) err = rc("closeListen after accept", r);
    }
    out_.verdict("net.connect", err);
    const char* dataChecks[] = {"net.regmr.host", "net.transfer.size-0", "net.transfer.size-1",
                                "net.transfer.size-4097-unaligned", "net.transfer.size-8MiB", "net.tags",
                                "net.outstanding", "net.wait", "net.grouped-recv", "net.iflush", "net.deregmr",
                                "net.close.main"};
    if (!err.empty() || !recvComm_) {
      for (auto* c : dataChecks) out_.skip(c, "no connection (net.connect failed)");
      return false;
    }
    out_.skip("net.regmr.cuda", "tutti-plugin-check is built without CUDA: GPU memory is not exercised");
    bool broken = false;
    auto run = [&](const char* name, auto&& body) {
      if (broken) return out_.skip(name, "an earlier check left the connection unusable");
      out_.begin(name);
      out_.verdict(name, body());
    };
    if (!(props.ptrSupport & NCCL_PTR_HOST)) {
      for (int i = 1; i < 11; i++) out_.skip(dataChecks[i], "ptrSupport has no NCCL_PTR_HOST: host buffers not allowed");
      broken = true;
    }
    run("net.regmr.host", [&] {
      std::string e = buf_.reg(net_, recvComm_, kBufferBytes);
      std::string s = call("REG " + std::to_string(kBufferBytes));
      if (!s.empty()) e += (e.empty() ? "sending end: " : "; sending end: ") + s;
      if (!e.empty()) broken = true;
      return e;
    });
    auto one = [&](size_t size, size_t off, int tag, uint32_t seed) {
      Msg m{tag, size, off, size + 32, seed};
      return transfer({{m}}, &broken);
    };
    run("net.transfer.size-0", [&] { return one(0, 0, 0, 1); });
    run("net.transfer.size-1", [&] { return one(1, 0, 1, 2); });
    run("net.transfer.size-4097-unaligned", [&] { return one(4097, 1, 2, 3); });
    run("net.transfer.size-8MiB", [&] {
      if (kLargeBytes > net_->sizeLimit()) return std::string();
      return one(kLargeBytes, 0, 3, 4);
    });
    run("net.tags", [&] {
      // Distinct tags, posted in the same order on both ends (the order the core uses).
      std::vector<std::vector<Msg>> g;
      const int tags[] = {0, 7, 0x7fff, 123456789};
      size_t off = 0;
      for (int i = 0; i < 4; i++, off += 4096) g.push_back({Msg{tags[i], 1000u + i, off, 1000u + i, 10u + i}});
      return transfer(g, &broken);
    });
    const int outstanding = std::min(8, net_->maxRequests());
    run("net.outstanding", [&] {
      std::vector<std::vector<Msg>> g;
      size_t off = 0;
      for (int i = 0; i < outstanding; i++) {
        size_t size = i % 2 ? 65536 + 13 * i : 100 + i;
        g.push_back({Msg{100 + i, size, off, size, 20u + i}});
        off += size + kGuardBytes + 64;
      }
      return transfer(g, &broken);
    });
    if (!net_->wait) {
      out_.skip("net.wait", "the plugin does not export tuttiNetWait_v1 (optional)");
    } else {
      run("net.wait", [&] { return checkWait(&broken); });
    }
    if (props.maxRecvs <= 1 || broken) {
      out_.skip("net.grouped-recv", broken ? "an earlier check left the connection unusable"
                                           : "maxRecvs is " + std::to_string(props.maxRecvs) + ": no grouped receives");
    } else {
      run("net.grouped-recv", [&] {
        int n = std::min(props.maxRecvs, 8);
        std::vector<Msg> group;
        size_t off = 0;
        for (int i = 0; i < n; i++) {
          size_t size = 3000 + 1000 * i;
          group.push_back(Msg{200 + i, size, off, size + 16, 40u + i});
          off += size + 16 + kGuardBytes;
        }
        return transfer({group}, &broken);
      });
    }
    if (!net_->hasIflush()) {
      out_.skip("net.iflush", "the plugin has no iflush (allowed)");
    } else {
      run("net.iflush", [&] {
        std::string e = one(4097, 0, 300, 50);
        if (!e.empty()) return e;
        void* data = buf_.data();
        int size = 4097;
        void* mh = buf_.mhandle();
        void* req = nullptr;
        ncclResult_t r = net_->iflush(recvComm_, 1, &data, &size, &mh, &req);
        if (r != ncclSuccess) return rc("iflush on host memory", r);
        return req ? waitRequest(net_, req, opt_.timeoutSec, nullptr, "iflush request") : std::string();
      });
    }
    run("net.deregmr", [&] {
      std::string e = buf_.dereg();
      std::string s = call("DEREG");
      if (!s.empty()) e += (e.empty() ? "sending end: " : "; sending end: ") + s;
      return e;
    });
    out_.begin("net.close.main");
    std::string s = call("CLOSE");
    ncclResult_t r = net_->closeRecv(recvComm_);
    recvComm_ = nullptr;
    std::string e = r == ncclSuccess ? "" : rc("closeRecv", r);
    if (!s.empty()) e += (e.empty() ? "sending end: " : "; sending end: ") + s;
    out_.verdict("net.close.main", e);
    return true;
  }

  // tuttiNetWait_v1 on the receive comm: with a receive posted and nothing sent, waitComms returns by its timeout
  // (50 ms); once the sending end has sent the message, a wait of up to the tool's timeout must end (ready 1, or -1:
  // declined), and the receive then completes with the right bytes.
  std::string checkWait(bool* broken) {
    const tuttiNetWait_v1_t* w = net_->wait;
    if (!w->waitComms) return "tuttiNetWait_v1.waitComms is NULL";
    const Msg m{500, 64, 0, 96, 61};
    void* data = buf_.data() + m.offset;
    size_t cap = m.cap;
    int tag = m.tag;
    void* mh = buf_.mhandle();
    void* req = nullptr;
    Deadline dl(opt_.timeoutSec);
    for (int it = 0; !req; it++) {
      ncclResult_t r = net_->irecv(recvComm_, 1, &data, &cap, &tag, &mh, &req);
      if (r != ncclSuccess) return *broken = true, rc("irecv", r);
      if (!req && dl.expired()) return *broken = true, std::string("irecv gave no request");
      if (!req) pollPause(it);
    }
    int done = 0;
    if (ncclResult_t r = net_->test(req, &done, nullptr); r != ncclSuccess) return *broken = true, rc("test", r);
    if (done) return *broken = true, std::string("a receive completed before anything was sent");
    void* const comms[] = {recvComm_};
    int ready = 7;
    const auto t0 = std::chrono::steady_clock::now();
    if (ncclResult_t r = w->waitComms(comms, 1, 50000, &ready); r != ncclSuccess)
      return *broken = true, rc("waitComms with nothing sent", r);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string err;
    if (ready < -1 || ready > 1) err = "waitComms set *ready to " + std::to_string(ready) + " (-1, 0 or 1)";
    else if (took > opt_.timeoutSec) err = "waitComms with a 50 ms timeout returned after " + std::to_string(took) + " s";
    if (!link_.send("SEND " + encodeMsgs({m}))) return *broken = true, peerGone();
    ready = 7;
    ncclResult_t r = w->waitComms(comms, 1, opt_.timeoutSec * 1000000, &ready);
    if (r != ncclSuccess) err = rc("waitComms with a message on its way", r);
    else if (ready == 0)
      err = "waitComms timed out (" + std::to_string(opt_.timeoutSec) + " s) although the peer sent a message";
    else if (ready != 1 && ready != -1) err = "waitComms set *ready to " + std::to_string(ready) + " (-1, 0 or 1)";
    int got = -1;
    std::string e = waitRequest(net_, req, opt_.timeoutSec, &got, "the receive after waitComms");
    if (!e.empty()) {
      *broken = true;
      err += (err.empty() ? "" : "; ") + e;
    } else if (got != static_cast<int>(m.size)) {
      err += (err.empty() ? "" : "; ") + std::string("test reported ") + std::to_string(got) + " bytes, 64 were sent";
    } else if (std::string c = checkPattern(buf_.data() + m.offset, m.size, m.seed); !c.empty()) {
      err += (err.empty() ? "" : "; ") + c;
    }
    std::string reply;
    if (!link_.recv(&reply, opt_.timeoutSec * 3 + 10)) return *broken = true, peerGone();
    if (reply != "OK") {
      *broken = true;
      err += (err.empty() ? "sending end: " : "; sending end: ") + reply.substr(reply.find(' ') + 1);
    }
    return err;
  }

  // Every order of closeSend / closeRecv / closeListen, each on a fresh connection that moved one message.
  void closeOrders(bool hostOk) {
    std::array<char, 3> order{'l', 'r', 's'};  // sorted: next_permutation walks all six
    do {
      std::string name = "net.close.order-";
      for (char c : order) name += c == 's' ? "S" : c == 'r' ? "R" : "L";
      out_.begin(name);
      void* listenComm = nullptr;
      std::string err = connect(&listenComm, &recvComm_);
      if (err.empty() && hostOk) {
        err = buf_.reg(net_, recvComm_, 64 << 10);
        std::string s = err.empty() ? call("REG 65536") : "";
        bool broken = false;
        if (err.empty() && s.empty()) err = transfer({{Msg{5, 1000, 0, 1000, 77}}}, &broken);
        if (!s.empty()) err = "sending end: " + s;
        std::string d = buf_.dereg();
        std::string sd = call("DEREG");
        if (err.empty()) err = !d.empty() ? d : sd;
      }
      bool connected = recvComm_ != nullptr;
      for (char c : order) {
        std::string e;
        if (c == 's' && connected) e = call("CLOSE");
        if (c == 'r' && recvComm_) {
          ncclResult_t r = net_->closeRecv(recvComm_);
          if (r != ncclSuccess) e = rc("closeRecv", r);
        }
        if (c == 'l' && listenComm) {
          ncclResult_t r = net_->closeListen(listenComm);
          if (r != ncclSuccess) e = rc("closeListen", r);
        }
        if (err.empty() && !e.empty()) err = e;
      }
      recvComm_ = nullptr;
      out_.verdict(name, err);
    } while (std::next_permutation(order.begin(), order.end()));
  }

  std::string peerGone() {
    std::string why = "the sending end stopped answering";
    if (peerPid > 0) {
      int st = 0;
      if (waitpid(peerPid, &st, WNOHANG) == peerPid) {
        peerPid = -1;
        if (WIFSIGNALED(st)) why = "the sending process crashed: signal " + std::to_string(WTERMSIG(st)) + " (" +
                                   strsignal(WTERMSIG(st)) + ")";
        else why = "the sending process exited with status " + std::to_string(WEXITSTATUS(st));
      }
    }
    return why;
  }

 private:
  const Options& opt_;
  Out& out_;
  NetPlugin* net_;
  void* ctx_;
  int dev_;
  Link& link_;
  void* recvComm_ = nullptr;
  RegBuffer buf_;
};

std::string propsProblems(const NetProps& p, int ndev) {
  std::vector<std::string> bad;
  if (p.nameNull || p.name.empty()) bad.push_back("name is empty");
  if (p.speed <= 0) bad.push_back("speed " + std::to_string(p.speed) + " Mbps (must be > 0)");
  if (p.maxComms < 1) bad.push_back("maxComms " + std::to_string(p.maxComms) + " (must be >= 1)");
  if (p.maxRecvs < 1) bad.push_back("maxRecvs " + std::to_string(p.maxRecvs) + " (must be >= 1)");
  if (p.ptrSupport & ~(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF))
    bad.push_back("ptrSupport has unknown bits (" + std::to_string(p.ptrSupport) + ")");
  if (!(p.ptrSupport & (NCCL_PTR_HOST | NCCL_PTR_CUDA))) bad.push_back("ptrSupport allows neither host nor CUDA memory");
  if (!std::isfinite(p.latency) || p.latency < 0) bad.push_back("latency " + std::to_string(p.latency) + " us (must be >= 0)");
  if (p.hasOffload && (p.netDeviceType < NCCL_NET_DEVICE_HOST || p.netDeviceType > NCCL_NET_DEVICE_GIN_GPI))
    bad.push_back("netDeviceType " + std::to_string(p.netDeviceType) + " is not a known ncclNetDeviceType");
  if (p.hasLimits) {
    if (p.maxP2pBytes == 0) bad.push_back("maxP2pBytes is 0");
    if (p.maxCollBytes == 0) bad.push_back("maxCollBytes is 0");
    if (p.vNdevs < 0 || p.vNdevs > p.vMaxDevs) bad.push_back("vProps.ndevs " + std::to_string(p.vNdevs) + " out of range");
    for (int d : p.vDevs)
      if (d < 0 || d >= ndev) bad.push_back("vProps.devs has " + std::to_string(d) + ", not a device index");
  }
  std::string s;
  for (auto& b : bad) s += (s.empty() ? "" : "; ") + b;
  return s;
}

}  // namespace

int runNetChecks(const Options& opt, Out& out) {
  // Process mode: the sending process is forked before the plugin is loaded, so it starts clean (no
  // inherited plugin threads or sockets) and loads and initialises the plugin itself, as a second rank would.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    out.fail("net.setup", std::string("socketpair: ") + strerror(errno));
    return 1;
  }
  pid_t peer = -1;
  if (!opt.threadPeer) {
    peer = fork();
    if (peer < 0) {
      out.fail("net.setup", std::string("fork of the sending process: ") + strerror(errno));
      return 1;
    }
    if (peer == 0) {
      close(sv[0]);
      Link link(sv[1]);
      SendEnd s;
      s.timeoutSec = opt.timeoutSec;
      serveLoop(s, link);
      _exit(0);
    }
    close(sv[1]);
  }
  Link link(sv[0]);
  auto stopPeer = [&] {
    if (!opt.threadPeer) {
      std::string r;
      if (link.send("QUIT")) link.recv(&r, opt.timeoutSec + 5);
      if (peer > 0) waitpid(peer, nullptr, 0);
    }
  };

  out.begin("net.load");
  std::string why;
  std::vector<int> found;
  auto net = loadNetPlugin(opt.path, opt.abi, &why, &found);
  if (!net) {
    out.fail("net.load", why);
    stopPeer();
    return 1;
  }
  std::string versions;
  for (int v : found) versions += (versions.empty() ? "v" : " v") + std::to_string(v);
  out.meta("name", net->name);
  out.meta("abi", std::to_string(net->version));
  out.info("plugin '" + net->name + "', net ABI v" + std::to_string(net->version) + " (symbols found: " + versions + ")");
  out.pass("net.load");

  auto missing = net->missingCallbacks();
  std::string m;
  for (auto& x : missing) m += (m.empty() ? "" : ", ") + x;
  out.verdict("net.table", m.empty() ? "" : "required members are NULL: " + m);
  if (!missing.empty()) {
    stopPeer();
    return 1;
  }

  out.begin("net.init");
  void* ctx = nullptr;
  ncclResult_t r = net->init(&ctx, kCommId);
  out.verdict("net.init", r == ncclSuccess ? "" : rc("init", r));
  if (r != ncclSuccess) {
    stopPeer();
    return 1;
  }
  out.begin("net.devices");
  int ndev = -1;
  r = net->devices(&ndev);
  out.verdict("net.devices", r != ncclSuccess ? rc("devices", r) : ndev < 0 ? "negative device count" : "");
  if (r != ncclSuccess || ndev < 0) ndev = 0;
  out.info("devices: " + std::to_string(ndev));
  std::vector<NetProps> props(ndev);
  for (int d = 0; d < ndev; d++) {
    std::string name = "net.properties.dev" + std::to_string(d);
    out.begin(name);
    r = net->getProperties(d, &props[d]);
    if (r != ncclSuccess) {
      out.fail(name, rc("getProperties", r));
      continue;
    }
    auto& p = props[d];
    char line[512];
    snprintf(line, sizeof line,
             "dev %d: %s speed %d Mbps, ptrSupport 0x%x, maxComms %d, maxRecvs %d, latency %.2f us, type %d%s%s", d,
             p.name.c_str(), p.speed, p.ptrSupport, p.maxComms, p.maxRecvs, p.latency, p.netDeviceType,
             p.pciPath.empty() ? "" : ", pci ", p.pciPath.c_str());
    out.info(line);
    out.verdict(name, propsProblems(p, ndev));
  }

  const char* deviceChecks[] = {"net.connect", "net.regmr.host", "net.transfer", "net.tags",
                                "net.outstanding", "net.wait", "net.grouped-recv", "net.iflush",
                                "net.close.orders", "net.connect.bad-handle"};
  int dev = opt.dev < 0 ? 0 : opt.dev;
  if (ndev == 0 || dev >= ndev) {
    std::string reason = ndev == 0 ? "the plugin reports no device (devices() returned 0)"
                                   : "--dev " + std::to_string(dev) + " but the plugin has " + std::to_string(ndev) +
                                         " device(s)";
    if (ndev == 0) out.info("no device: every device check is skipped");
    for (auto* c : deviceChecks) out.skip(c, reason);
  } else {
    std::thread peerThread;
    SendEnd threadEnd;
    int rcLoad = 0;
    std::string loadErr;
    Link peerLink(sv[1]);
    if (opt.threadPeer) {
      // Both ends share the plugin and its context, as two connections of one communicator would.
      threadEnd.net = net.get();
      threadEnd.ctx = ctx;
      threadEnd.timeoutSec = opt.timeoutSec;
      peerThread = std::thread([&] { serveLoop(threadEnd, peerLink); });
    } else {
      Driver probe(opt, out, net.get(), ctx, dev, link);
      loadErr = probe.call("LOAD " + std::to_string(net->version) + " " + opt.path);
      rcLoad = loadErr.empty() ? 0 : 1;
    }
    if (rcLoad) {
      for (auto* c : deviceChecks) out.fail(c, "the sending process could not load the plugin: " + loadErr);
    } else {
      Driver drv(opt, out, net.get(), ctx, dev, link);
      drv.peerPid = peer;
      if (drv.mainConnection(props[dev])) drv.closeOrders((props[dev].ptrSupport & NCCL_PTR_HOST) != 0);
      else out.skip("net.close.orders", "no connection (net.connect failed)");
    }
    std::string reply;
    if (link.send("QUIT")) link.recv(&reply, opt.timeoutSec + 5);
    if (peerThread.joinable()) peerThread.join();
    if (peer > 0) waitpid(peer, nullptr, 0);
    peer = -1;
    if (!reply.empty() && reply != "OK") out.fail("net.finalize.peer", reply.substr(reply.find(' ') + 1));

    // Error path last: it may leave plugin state behind. A garbage handle must make connect fail (now
    // or on a later poll), never crash nor succeed. Double close and other caller bugs are not checked:
    // NCCL's contract leaves them undefined.
    out.begin("net.connect.bad-handle");
    unsigned char bad[NCCL_NET_HANDLE_MAXSIZE];
    memset(bad, 0xff, sizeof bad);
    void* sc = nullptr;
    std::string err;
    int waitSec = std::min(opt.timeoutSec, 10);
    Deadline dl(waitSec);
    for (int it = 0;; it++) {
      r = net->connect(ctx, dev, bad, &sc);
      if (r != ncclSuccess) break;
      if (sc) {
        err = "connect to a handle of 0xff bytes returned a comm";
        break;
      }
      if (dl.expired()) {
        err = "connect to a handle of 0xff bytes neither failed nor connected in " + std::to_string(waitSec) + " s";
        break;
      }
      pollPause(it);
    }
    out.verdict("net.connect.bad-handle", err);
  }
  if (peer > 0) stopPeer();
  if (net->hasFinalize()) {
    out.begin("net.finalize");
    r = net->finalize(ctx);
    out.verdict("net.finalize", r == ncclSuccess ? "" : rc("finalize", r));
  }
  return 0;
}

}  // namespace tutti::check
