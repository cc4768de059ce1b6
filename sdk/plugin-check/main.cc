// tutti-plugin-check: conformance checks for net and tuner plugins. The checks run in a worker process;
// this process (the guard) prints each result, notices a worker that crashes or stops making progress
// (a plugin call that blocks or faults) and turns that into a FAIL naming the check, writes the JSON
// summary and sets the exit status.
#include "common.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tutti::check {

const char* statusName(Status s) { return s == Status::Pass ? "PASS" : s == Status::Fail ? "FAIL" : "SKIP"; }

void Out::send(const std::string& line) {
  std::string l = line.size() > 3000 ? line.substr(0, 3000) : line;
  for (char& c : l)
    if (c == '\n') c = ' ';
  l += '\n';
  // Short lines to a pipe are written in one piece; retry only on EINTR.
  while (write(fd_, l.data(), l.size()) < 0 && errno == EINTR) {
  }
}
void Out::begin(const std::string& name) { send("B " + name); }
void Out::result(Status s, const std::string& name, const std::string& reason) {
  send(std::string("R ") + statusName(s) + " " + name + "\t" + reason);
}
void Out::info(const std::string& text) { send("I " + text); }
void Out::meta(const std::string& key, const std::string& value) { send("M " + key + "\t" + value); }

static bool gVerbose = false;
void setPluginLogVerbose(bool verbose) { gVerbose = verbose; }
extern "C" void pluginLogger(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt,
                             ...) {
  if (level > NCCL_LOG_WARN && !gVerbose) return;
  if (level == NCCL_LOG_NONE) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* lvl = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  fprintf(stderr, "  [plugin %s %s:%d] %s\n", lvl, file ? file : "?", line, msg);
}

const char* resultName(ncclResult_t r) {
  static const char* names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
  return r >= 0 && r < ncclNumResults ? names[r] : "unknown ncclResult_t";
}

void pollPause(int iteration) {
  if (iteration > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  else if (iteration > 100) std::this_thread::yield();
}

std::string toHex(const void* data, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i++) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}
bool fromHex(const std::string& hex, void* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto* p = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    if (sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    p[i] = static_cast<unsigned char>(v);
  }
  return true;
}

namespace {

struct Record {
  Status status;
  std::string name, reason;
};

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += static_cast<char>(c);
  }
  return o;
}

class Guard {
 public:
  explicit Guard(const Options& opt) : opt_(opt) {}

  void record(Status s, const std::string& name, const std::string& reason) {
    records_.push_back({s, name, reason});
    printf("%s %s%s%s\n", statusName(s), name.c_str(), reason.empty() ? "" : " ", reason.c_str());
    fflush(stdout);
    if (name == pending_) pending_.clear();
  }

  void handle(const std::string& line) {
    if (line.size() < 2) return;
    std::string body = line.substr(2);
    switch (line[0]) {
      case 'B': pending_ = body; break;
      case 'I': printf("  %s\n", body.c_str()); fflush(stdout); break;
      case 'M': {
        auto tab = body.find('\t');
        if (tab != std::string::npos) meta_.push_back({body.substr(0, tab), body.substr(tab + 1)});
        break;
      }
      case 'R': {
        auto sp = body.find(' ');
        auto tab = body.find('\t');
        if (sp == std::string::npos || tab == std::string::npos) break;
        std::string st = body.substr(0, sp);
        Status s = st == "PASS" ? Status::Pass : st == "FAIL" ? Status::Fail : Status::Skip;
        record(s, body.substr(sp + 1, tab - sp - 1), body.substr(tab + 1));
        break;
      }
    }
  }

  // Runs `body` in a worker process and relays its messages until it exits.
  int run(int (*body)(const Options&, Out&)) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("pipe");
      return 2;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 2;
    }
    if (pid == 0) {
      setpgid(0, 0);  // own group: the guard can stop the worker and any peer process it forked
      close(fds[0]);
      Out out(fds[1]);
      int rc = body(opt_, out);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    setpgid(pid, pid);
    close(fds[1]);
    // The worker reports at least once per wait it does; silence longer than that means a plugin call blocked.
    const int watchdogMs = (opt_.timeoutSec * 2 + 15) * 1000;
    std::string buf;
    bool hung = false;
    for (;;) {
      pollfd p{fds[0], POLLIN, 0};
      int n = poll(&p, 1, watchdogMs);
      if (n == 0) {
        hung = true;
        kill(-pid, SIGKILL);
        break;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      char tmp[4096];
      ssize_t r = read(fds[0], tmp, sizeof tmp);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      buf.append(tmp, static_cast<size_t>(r));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        handle(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    std::string where = pending_.empty() ? std::string("worker") : pending_;
    if (hung) {
      record(Status::Fail, where, "no progress for " + std::to_string(watchdogMs / 1000) +
                                      " s: a plugin call did not return (net calls must never block)");
    } else if (WIFSIGNALED(status)) {
      record(Status::Fail, where, std::string("the process crashed in this check: signal ") +
                                      std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")");
    } else if (!pending_.empty()) {
      record(Status::Fail, where, "the worker exited (status " + std::to_string(WEXITSTATUS(status)) +
                                      ") before finishing this check; a plugin must never call exit()");
    }
    return finish(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }

 private:
  int finish(int workerRc) {
    int pass = 0, fail = 0, skip = 0;
    for (auto& r : records_) (r.status == Status::Pass ? pass : r.status == Status::Fail ? fail : skip)++;
    std::string plugin;
    for (auto& [k, v] : meta_) plugin += " " + k + "=" + v;
    printf("SUMMARY %s %s: %d passed, %d failed, %d skipped%s\n", opt_.kind.c_str(), opt_.path.c_str(), pass,
           fail, skip, plugin.c_str());
    if (!opt_.jsonPath.empty()) writeJson(pass, fail, skip);
    if (fail > 0) return 1;
    return workerRc == 2 ? 2 : 0;
  }

  void writeJson(int pass, int fail, int skip) {
    FILE* f = fopen(opt_.jsonPath.c_str(), "w");
    if (!f) {
      fprintf(stderr, "tutti-plugin-check: cannot write %s: %s\n", opt_.jsonPath.c_str(), strerror(errno));
      return;
    }
    fprintf(f, "{\n  \"tool\": \"tutti-plugin-check\",\n  \"kind\": \"%s\",\n  \"plugin\": \"%s\",\n",
            opt_.kind.c_str(), jsonEscape(opt_.path).c_str());
    for (auto& [k, v] : meta_) fprintf(f, "  \"%s\": \"%s\",\n", jsonEscape(k).c_str(), jsonEscape(v).c_str());
    fprintf(f, "  \"summary\": {\"pass\": %d, \"fail\": %d, \"skip\": %d, \"ok\": %s},\n  \"checks\": [\n", pass,
            fail, skip, fail ? "false" : "true");
    for (size_t i = 0; i < records_.size(); i++) {
      auto& r = records_[i];
      fprintf(f, "    {\"name\": \"%s\", \"status\": \"%s\", \"reason\": \"%s\"}%s\n", jsonEscape(r.name).c_str(),
              statusName(r.status), jsonEscape(r.reason).c_str(), i + 1 < records_.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
  }

  const Options& opt_;
  std::vector<Record> records_;
  std::vector<std::pair<std::string, std::string>> meta_;
  std::string pending_;
};

int usage(const char* msg) {
  if (msg) fprintf(stderr, "tutti-plugin-check: %s\n", msg);
  fprintf(stderr,
          "usage: tutti-plugin-check net <plugin.so> [--abi N] [--dev D] [--peer process|thread] [--json F]\n"
          "                          [--timeout S] [-v]\n"
          "       tutti-plugin-check tuner <plugin.so> [--abi N] [--json F] [-v]\n"
          "Prints PASS|FAIL|SKIP <check> [reason] per check and a SUMMARY line; exit 0 when nothing failed,\n"
          "1 when a check failed, 2 on a usage error. See sdk/plugin-check/README.md.\n");
  return 2;
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace
}  // namespace tutti::check

int main(int argc, char** argv) {
  using namespace tutti::check;
  Options opt;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)what;
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(nullptr);
      return 0;
    }
    if (a == "-v" || a == "--verbose") opt.verbose = true;
    else if (a == "--abi") {
      const char* v = value("--abi");
      if (!v || !parseInt(v, 2, 12, &opt.abi)) return usage("--abi takes a version number (net 6..12, tuner 2..6)");
    } else if (a == "--dev") {
      const char* v = value("--dev");
      if (!v || !parseInt(v, 0, 1 << 20, &opt.dev)) return usage("--dev takes a device index >= 0");
    } else if (a == "--timeout") {
      const char* v = value("--timeout");
      if (!v || !parseInt(v, 1, 3600, &opt.timeoutSec)) return usage("--timeout takes seconds (1..3600)");
    } else if (a == "--json") {
      const char* v = value("--json");
      if (!v) return usage("--json takes a file name");
      opt.jsonPath = v;
    } else if (a == "--peer") {
      const char* v = value("--peer");
      if (!v || (strcmp(v, "thread") != 0 && strcmp(v, "process") != 0))
        return usage("--peer takes 'process' (default) or 'thread'");
      opt.threadPeer = strcmp(v, "thread") == 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2) return usage("expected a kind (net or tuner) and a plugin file");
  opt.kind = pos[0];
  opt.path = pos[1];
  if (opt.kind == "net") {
    if (opt.abi && (opt.abi < 6 || opt.abi > 12)) return usage("net plugins have ABI versions 6..12");
  } else if (opt.kind == "tuner") {
    if (opt.abi && opt.abi > 6) return usage("tuner plugins have ABI versions 2..6");
    if (opt.dev >= 0 || opt.threadPeer) return usage("--dev and --peer apply to net plugins only");
  } else {
    return usage(("unknown kind '" + opt.kind + "' (net or tuner)").c_str());
  }
  setPluginLogVerbose(opt.verbose);
  signal(SIGPIPE, SIG_IGN);  // a dead peer shows up as a write error, not a signal
  Guard guard(opt);
  return guard.run(opt.kind == "net" ? runNetChecks : runTunerChecks);
}
