// Finalize-time rendering of the records as Chrome trace JSON ("X" complete events, ts/dur in us).
// Tracks (tid) per rank: collectives (Group, Coll, P2p), api, proxy ctrl, "channel C" (KernelCh) and
// "proxy ch C" (ProxyOp > ProxyStep > step states). A track is laid out in lanes so that every lane is
// well nested: a slice that would partly overlap another goes to the next lane ("proxy ch 0 (2)").
#include "trace.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

namespace tutti::profilertrace {

namespace {

enum Family : int { kCollectives = 1, kApi = 2, kProxyCtrl = 3, kChannel = 4, kProxy = 5 };

// Proxy tracks are split by direction so sends and receives of one channel read as two rows.
enum Direction : int { kRecv = 0, kSend = 1, kUnknownDirection = 2 };

struct Slice {
  int64_t startNs, endNs;
  int track;      // direction << 16 | family << 8 | channel
  int parent;     // slice index on the same track, or -1
  int depth;
  int lane = 0;
  const Record* rec;  // nullptr for a state sub-slice
  int32_t state = -1;
};

int familyOf(uint64_t type) {
  switch (type) {
    case ncclProfileGroup:
    case ncclProfileColl:
    case ncclProfileP2p: return kCollectives;
    case ncclProfileKernelCh: return kChannel;
    case ncclProfileProxyOp:
    case ncclProfileProxyStep:
    case ncclProfileNetPlugin: return kProxy;
    case ncclProfileProxyCtrl: return kProxyCtrl;
    default: return kApi;
  }
}

const char* stateName(int32_t s) {
  switch (s) {
    case ncclProfilerProxyStepSendGPUWait: return "SendGPUWait";
    case ncclProfilerProxyStepSendPeerWait_v4: return "SendPeerWait";
    case ncclProfilerProxyStepSendWait: return "SendWait";
    case ncclProfilerProxyStepRecvWait: return "RecvWait";
    case ncclProfilerProxyStepRecvFlushWait: return "RecvFlushWait";
    case ncclProfilerProxyStepRecvGPUWait: return "RecvGPUWait";
    case ncclProfilerProxyCtrlIdle: return "Idle";
    case ncclProfilerProxyCtrlActive: return "Active";
    case ncclProfilerProxyCtrlSleep: return "Sleep";
    case ncclProfilerProxyCtrlWakeup: return "Wakeup";
    case ncclProfilerProxyCtrlAppend: return "Append";
    case ncclProfilerProxyCtrlAppendEnd: return "AppendEnd";
    case ncclProfilerProxyOpInProgress_v4: return "InProgress";
    case ncclProfilerGroupStartApiStop: return "GroupStartApiStop";
    case ncclProfilerGroupEndApiStart: return "GroupEndApiStart";
    default: return "State";
  }
}

// JSON string body: quotes, backslashes and control characters escaped.
void appendEscaped(std::string* out, const char* s) {
  for (; *s; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
}

std::string quoted(const char* s) {
  std::string out = "\"";
  appendEscaped(&out, s);
  out += '"';
  return out;
}

// ns -> "us.fff" without going through a double (keeps ns exact for the nesting check).
std::string usText(int64_t ns) {
  char buf[32];
  const char* sign = ns < 0 ? "-" : "";
  uint64_t a = ns < 0 ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  std::snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
  return buf;
}

std::string sliceName(const Slice& s) {
  if (s.rec == nullptr) return stateName(s.state);
  const Record& r = *s.rec;
  char buf[64];
  switch (r.type) {
    case ncclProfileGroup: return "Group";
    case ncclProfileColl: return r.u.coll.func[0] ? r.u.coll.func : "Coll";
    case ncclProfileP2p: return r.u.p2p.func[0] ? r.u.p2p.func : "P2p";
    case ncclProfileProxyOp:
      std::snprintf(buf, sizeof(buf), "%s peer %d", r.u.proxyOp.isSend ? "ProxySend" : "ProxyRecv",
                    r.u.proxyOp.peer);
      return buf;
    case ncclProfileProxyStep:
      std::snprintf(buf, sizeof(buf), "step %d", r.u.proxyStep.step);
      return buf;
    case ncclProfileProxyCtrl: return "ProxyCtrl";
    case ncclProfileKernelCh: return "KernelCh";
    case ncclProfileNetPlugin: return "NetPlugin";
    case ncclProfileGroupApi: return "GroupApi";
    case ncclProfileCollApi: return std::string(r.u.api.func[0] ? r.u.api.func : "Coll") + " (api)";
    case ncclProfileP2pApi: return std::string(r.u.api.func[0] ? r.u.api.func : "P2p") + " (api)";
    case ncclProfileKernelLaunch: return "KernelLaunch";
    default: return "Event";
  }
}

const char* categoryOf(const Slice& s) {
  if (s.rec == nullptr) return "state";
  switch (s.rec->type) {
    case ncclProfileGroup: return "group";
    case ncclProfileColl: return "coll";
    case ncclProfileP2p: return "p2p";
    case ncclProfileProxyOp: return "proxyop";
    case ncclProfileProxyStep: return "proxystep";
    case ncclProfileProxyCtrl: return "proxyctrl";
    case ncclProfileKernelCh: return "kernelch";
    case ncclProfileNetPlugin: return "netplugin";
    default: return "api";
  }
}

std::string sliceArgs(const Context& ctx, const Slice& s, bool overNet) {
  char buf[512];
  if (s.rec == nullptr) return "{}";
  const Record& r = *s.rec;
  std::string comm = "\"comm\":\"0x" + [&] {
    char h[24];
    std::snprintf(h, sizeof(h), "%016" PRIx64, ctx.commId);
    return std::string(h);
  }() + "\"";
  switch (r.type) {
    case ncclProfileColl:
      std::snprintf(buf, sizeof(buf),
                    "{\"seq\":%" PRIu64 ",\"count\":%" PRIu64 ",\"datatype\":%s,\"root\":%d,\"algo\":%s,"
                    "\"proto\":%s,\"nChannels\":%u,\"nWarps\":%u%s,%s}",
                    r.u.coll.seq, r.u.coll.count, quoted(r.u.coll.datatype).c_str(), r.u.coll.root,
                    quoted(r.u.coll.algo).c_str(), quoted(r.u.coll.proto).c_str(), r.u.coll.nChannels,
                    r.u.coll.nWarps, overNet ? ",\"transport\":\"net\"" : "", comm.c_str());
      return buf;
    case ncclProfileP2p:
      std::snprintf(buf, sizeof(buf),
                    "{\"peer\":%d,\"count\":%" PRIu64 ",\"datatype\":%s,\"nChannels\":%u%s,%s}", r.u.p2p.peer,
                    r.u.p2p.count, quoted(r.u.p2p.datatype).c_str(), r.u.p2p.nChannels,
                    overNet ? ",\"transport\":\"net\"" : "", comm.c_str());
      return buf;
    case ncclProfileProxyOp:
      std::snprintf(buf, sizeof(buf),
                    "{\"channel\":%u,\"peer\":%d,\"nSteps\":%d,\"chunkSize\":%d,\"isSend\":%d,\"pid\":%d}",
                    r.channel, r.u.proxyOp.peer, r.u.proxyOp.nSteps, r.u.proxyOp.chunkSize, r.u.proxyOp.isSend,
                    r.u.proxyOp.pid);
      return buf;
    case ncclProfileProxyStep:
      std::snprintf(buf, sizeof(buf), "{\"step\":%d,\"transSize\":%" PRIu64 "}", r.u.proxyStep.step,
                    r.u.proxyStep.transSize);
      return buf;
    case ncclProfileKernelCh:
      std::snprintf(buf, sizeof(buf), "{\"channel\":%u,\"pTimerStart\":%" PRIu64 ",\"pTimerStop\":%" PRIu64 "}",
                    r.channel, r.u.kernelCh.pTimerStart, r.u.kernelCh.pTimerStop);
      return buf;
    case ncclProfileNetPlugin:
      std::snprintf(buf, sizeof(buf), "{\"id\":%" PRId64 "}", r.u.netPlugin.id);
      return buf;
    case ncclProfileCollApi:
      std::snprintf(buf, sizeof(buf), "{\"count\":%" PRIu64 ",\"datatype\":%s,\"root\":%d}", r.u.api.count,
                    quoted(r.u.api.datatype).c_str(), r.u.api.root);
      return buf;
    case ncclProfileP2pApi:
      std::snprintf(buf, sizeof(buf), "{\"count\":%" PRIu64 ",\"datatype\":%s}", r.u.api.count,
                    quoted(r.u.api.datatype).c_str());
      return buf;
    case ncclProfileGroupApi:
      std::snprintf(buf, sizeof(buf), "{\"groupDepth\":%d}", r.u.api.groupDepth);
      return buf;
    case ncclProfileGroup: return "{" + comm + "}";
    default: return "{}";
  }
}

std::string trackName(int track, int lane) {
  int family = (track >> 8) & 0xff, ch = track & 0xff, dir = track >> 16;
  char buf[64];
  switch (family) {
    case kCollectives: std::snprintf(buf, sizeof(buf), "collectives"); break;
    case kApi: std::snprintf(buf, sizeof(buf), "api"); break;
    case kProxyCtrl: std::snprintf(buf, sizeof(buf), "proxy ctrl"); break;
    case kChannel:
      if (ch == kUnknownChannel) std::snprintf(buf, sizeof(buf), "channel ?");
      else std::snprintf(buf, sizeof(buf), "channel %d", ch);
      break;
    default:
      if (ch == kUnknownChannel) std::snprintf(buf, sizeof(buf), "proxy ch ?");
      else std::snprintf(buf, sizeof(buf), "proxy ch %d", ch);
      break;
  }
  if (family == kProxy && dir != kUnknownDirection) std::snprintf(buf + std::strlen(buf), 8, dir == kSend ? " send" : " recv");
  std::string name = buf;
  if (lane > 0) name += " (" + std::to_string(lane + 1) + ")";
  return name;
}

// tid: stable across ranks so merged timelines line up track by track; lanes count in thousands.
int tidOf(int track, int lane) {
  int family = (track >> 8) & 0xff, ch = track & 0xff, dir = track >> 16;
  int base = family == kChannel ? 100 + ch : family == kProxy ? 400 + 300 * dir + ch : family;
  return base + 1000 * lane;
}

// Perfetto orders a process's tracks by this: collectives, api, proxy ctrl, channels, then proxy rows,
// each channel's send lanes before its receive lanes.
int tidSortIndex(int track, int lane) {
  int family = (track >> 8) & 0xff, ch = track & 0xff, dir = track >> 16;
  return (family << 20) + (ch << 8) + ((2 - dir) << 6) + std::min(lane, 63);
}

// Places every slice of one track (sorted by start, longer first, parents first) in the first lane where
// it nests: its parent's lane if possible, else the lowest one. Each lane keeps a stack of open ends.
void layoutLanes(std::vector<Slice>& slices, const std::vector<int>& order) {
  std::vector<std::vector<int64_t>> lanes;
  auto fits = [&](size_t lane, const Slice& s) {
    auto& stack = lanes[lane];
    while (!stack.empty() && stack.back() <= s.startNs) stack.pop_back();
    return stack.empty() || stack.back() >= s.endNs;
  };
  for (int idx : order) {
    Slice& s = slices[idx];
    int chosen = -1;
    if (s.parent >= 0 && fits(slices[s.parent].lane, s)) chosen = slices[s.parent].lane;
    for (size_t l = 0; chosen < 0 && l < lanes.size(); ++l)
      if (fits(l, s)) chosen = static_cast<int>(l);
    if (chosen < 0) {
      lanes.emplace_back();
      chosen = static_cast<int>(lanes.size()) - 1;
    }
    lanes[chosen].push_back(s.endNs);
    s.lane = chosen;
  }
}

// Paths written by this process: two contexts expanding to one name (a pattern without %r, or two
// communicators of one rank) get "-1", "-2"... instead of overwriting each other.
std::mutex gPathsMutex;
std::set<std::string> gPaths;

std::string claimPath(const std::string& wanted) {
  std::lock_guard<std::mutex> lock(gPathsMutex);
  std::string path = wanted;
  for (int n = 1; gPaths.count(path); ++n) {
    size_t dot = wanted.rfind('.');
    size_t slash = wanted.rfind('/');
    bool hasExt = dot != std::string::npos && (slash == std::string::npos || dot > slash);
    path = hasExt ? wanted.substr(0, dot) + "-" + std::to_string(n) + wanted.substr(dot)
                  : wanted + "-" + std::to_string(n);
  }
  gPaths.insert(path);
  return path;
}

// Send or receive, from the record's proxy op (itself, or the op above a step or net event).
int directionOf(const Record* r) {
  for (int depth = 0; r != nullptr && depth < 3; ++depth, r = r->parent)
    if (r->type == ncclProfileProxyOp) return r->u.proxyOp.isSend ? kSend : kRecv;
  return kUnknownDirection;
}

}  // namespace

std::string expandPattern(const std::string& pattern, int rank, int pid, const std::string& host,
                          uint64_t commId) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    char hex[24];
    switch (c) {
      case 'r': out += std::to_string(rank); break;
      case 'p': out += std::to_string(pid); break;
      case 'h': out += host; break;
      case 'c':
        std::snprintf(hex, sizeof(hex), "%016" PRIx64, commId);
        out += hex;
        break;
      case '%': out += '%'; break;
      default: out += '%'; out += c; break;
    }
  }
  return out;
}

bool writeTrace(const Context& ctx, std::string* pathOut, std::string* error) {
  const size_t n = ctx.pool.used();
  std::vector<Slice> slices;
  slices.reserve(n + n / 2);
  std::vector<int> sliceOf(n, -1);
  std::vector<char> overNet(n, 0);  // a Coll/P2p whose proxy ops show it crossed the network
  uint64_t unfinished = 0;
  for (size_t i = 0; i < n; ++i) {
    const Record* r = ctx.pool.at(i);
    if (r == nullptr || r->startNs == 0) continue;
    if (r->type == ncclProfileProxyOp && r->parent && r->parent->index < n) overNet[r->parent->index] = 1;
    int64_t end = r->stopNs;
    if (r->type == ncclProfileKernelCh && r->u.kernelCh.chStopNs != 0) end = r->u.kernelCh.chStopNs;
    if (end == 0) {
      ++unfinished;  // never stopped: no end to draw
      continue;
    }
    const int family = familyOf(r->type);
    int track = family << 8;
    if (family == kChannel) track |= r->channel;
    if (family == kProxy) track |= r->channel | (directionOf(r) << 16);
    Slice s{r->startNs, std::max(end, r->startNs), track, -1, 0, 0, r};
    sliceOf[i] = static_cast<int>(slices.size());
    slices.push_back(s);
  }
  // Parents (records precede their children in the pool: a parent is started first).
  for (size_t k = 0; k < slices.size(); ++k) {
    Slice& s = slices[k];
    const Record* p = s.rec->parent;
    if (p == nullptr || p->index >= n || sliceOf[p->index] < 0) continue;
    int pi = sliceOf[p->index];
    if (slices[pi].track != s.track) continue;
    s.parent = pi;
    s.depth = slices[pi].depth + 1;
    // Clocks are read a few ns apart on different threads: keep a child inside its parent.
    s.startNs = std::clamp(s.startNs, slices[pi].startNs, slices[pi].endNs);
    s.endNs = std::clamp(s.endNs, s.startNs, slices[pi].endNs);
  }
  // Step / ctrl states become sub-slices: each lasts until the next state or the event's end.
  const size_t nEvents = slices.size();
  for (size_t k = 0; k < nEvents; ++k) {
    const Record& r = *slices[k].rec;
    if (r.type != ncclProfileProxyStep && r.type != ncclProfileProxyCtrl) continue;
    for (int j = 0; j < r.nStates; ++j) {
      int64_t b = std::clamp(r.states[j].ns, slices[k].startNs, slices[k].endNs);
      int64_t e = j + 1 < r.nStates ? r.states[j + 1].ns : slices[k].endNs;
      e = std::clamp(e, b, slices[k].endNs);
      Slice st{b, e, slices[k].track, static_cast<int>(k), slices[k].depth + 1, 0, nullptr, r.states[j].state};
      slices.push_back(st);
    }
  }
  std::vector<int> order(slices.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Slice &x = slices[a], &y = slices[b];
    if (x.track != y.track) return x.track < y.track;
    if (x.startNs != y.startNs) return x.startNs < y.startNs;
    if (x.endNs != y.endNs) return x.endNs > y.endNs;
    if (x.depth != y.depth) return x.depth < y.depth;
    return a < b;
  });
  // Lay out each track's run of slices.
  for (size_t b = 0; b < order.size();) {
    size_t e = b;
    std::vector<int> run;
    while (e < order.size() && slices[order[e]].track == slices[order[b]].track) run.push_back(order[e++]);
    layoutLanes(slices, run);
    b = e;
  }
  // Times relative to a base on a 1000 s grid of CLOCK_REALTIME: ranks started close together share it,
  // so raw files already line up, and the numbers stay small enough for exact us.fff doubles.
  const int64_t gridNs = 1000ll * 1000000000ll;
  const int64_t baseNs = (ctx.initNs / gridNs) * gridNs;

  std::string wanted = expandPattern(ctx.options.filePattern, ctx.rank, ctx.pid, ctx.host, ctx.commId);
  std::string path = claimPath(wanted);
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot write " + path + " (TUTTI_TRACE_FILE=\"" + ctx.options.filePattern + "\"): " +
             std::strerror(errno);
    return false;
  }
  char hex[24];
  std::snprintf(hex, sizeof(hex), "0x%016" PRIx64, ctx.commId);
  std::string out;
  out.reserve(1 << 20);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"tutti profiler-trace\",\"format\":1,";
  out += "\"rank\":" + std::to_string(ctx.rank) + ",\"nRanks\":" + std::to_string(ctx.nRanks) +
         ",\"nNodes\":" + std::to_string(ctx.nNodes) + ",\"commId\":\"" + hex + "\",\"commName\":" +
         quoted(ctx.commName.c_str()) + ",\"host\":" + quoted(ctx.host.c_str()) +
         ",\"pid\":" + std::to_string(ctx.pid) + ",\"clock\":\"CLOCK_REALTIME\",\"clockBaseUs\":" +
         std::to_string(baseNs / 1000) + ",\"events\":" + std::to_string(nEvents) +
         ",\"maxEvents\":" + std::to_string(ctx.pool.capacity()) +
         ",\"droppedEvents\":" + std::to_string(ctx.pool.dropped()) +
         ",\"unfinishedEvents\":" + std::to_string(unfinished) + ",\"mask\":" + std::to_string(ctx.options.mask) +
         "},\n\"traceEvents\":[\n";
  const std::string pid = std::to_string(ctx.rank);
  std::string label = "rank " + pid + " (" + ctx.host + ")";
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":" +
         quoted(label.c_str()) + "}},\n";
  out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid +
         "}}";
  if (ctx.pool.dropped() > 0 || unfinished > 0) {
    std::string note = "dropped " + std::to_string(ctx.pool.dropped()) + " events over TUTTI_TRACE_MAX_EVENTS=" +
                       std::to_string(ctx.pool.capacity()) + ", " + std::to_string(unfinished) + " unfinished";
    out += ",\n{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":" + pid + ",\"args\":{\"labels\":" +
           quoted(note.c_str()) + "}}";
  }
  std::set<std::pair<int, int>> tracks;
  for (const Slice& s : slices) tracks.insert({s.track, s.lane});
  for (auto [track, lane] : tracks) {
    std::string tid = std::to_string(tidOf(track, lane));
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + tid + ",\"args\":{\"name\":" +
           quoted(trackName(track, lane).c_str()) + "}}";
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + std::to_string(tidSortIndex(track, lane)) +
           "}}";
  }
  for (int idx : order) {
    const Slice& s = slices[idx];
    bool net = s.rec && s.rec->index < n && overNet[s.rec->index];
    out += ",\n{\"ph\":\"X\",\"name\":" + quoted(sliceName(s).c_str()) + ",\"cat\":\"" + categoryOf(s) +
           "\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tidOf(s.track, s.lane)) +
           ",\"ts\":" + usText(s.startNs - baseNs) + ",\"dur\":" + usText(s.endNs - s.startNs) +
           ",\"args\":" + sliceArgs(ctx, s, net) + "}";
    if (out.size() > (1u << 20)) {
      if (std::fwrite(out.data(), 1, out.size(), f) != out.size()) break;
      out.clear();
    }
  }
  out += "\n]}\n";
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    *error = "writing " + path + " failed: " + std::strerror(errno);
    return false;
  }
  *pathOut = path;
  return true;
}

}  // namespace tutti::profilertrace
