// Shared pieces of tutti-plugin-check: options, the result channel from a worker to the guard, the logger
// handed to plugins, and small helpers. The tool depends on the SDK headers only (no Tutti internals), so
// a vendor can build it next to an installed SDK.
#pragma once

#include <tutti/common.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tutti::check {

struct Options {
  std::string kind;        // "net" or "tuner"
  std::string path;        // the plugin file
  int abi = 0;             // 0: newest symbol found
  int dev = -1;            // -1: device 0 for data checks
  std::string jsonPath;    // empty: no JSON
  bool threadPeer = false; // --peer thread: both ends of a connection in one process (in-process plugins)
  int timeoutSec = 20;     // per wait (connect, a request to complete)
  bool verbose = false;    // plugin INFO logs too
};

enum class Status { Pass, Fail, Skip };
const char* statusName(Status s);

// What a worker reports to the guard process. Each message is one write() of one line, so lines from a
// worker are never torn; the guard keeps the check in progress to name it if the worker dies or hangs.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  void begin(const std::string& name);
  void result(Status s, const std::string& name, const std::string& reason = "");
  void pass(const std::string& name) { result(Status::Pass, name); }
  void fail(const std::string& name, const std::string& why) { result(Status::Fail, name, why); }
  void skip(const std::string& name, const std::string& why) { result(Status::Skip, name, why); }
  // Result from an error text: empty means pass.
  void verdict(const std::string& name, const std::string& err) { err.empty() ? pass(name) : fail(name, err); }
  void info(const std::string& text);
  void meta(const std::string& key, const std::string& value);

 private:
  void send(const std::string& line);
  int fd_;
};

// Logger handed to plugins in init: prints to stderr with a prefix (WARN always, INFO/TRACE with -v).
void setPluginLogVerbose(bool verbose);
extern "C" void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

const char* resultName(ncclResult_t r);

// Deadline for a polling loop.
class Deadline {
 public:
  explicit Deadline(int seconds) : end_(std::chrono::steady_clock::now() + std::chrono::seconds(seconds)) {}
  bool expired() const { return std::chrono::steady_clock::now() > end_; }

 private:
  std::chrono::steady_clock::time_point end_;
};

// Sleeps a little between polls once a loop has spun for a while (2 shared cores: don't starve the peer).
void pollPause(int iteration);

std::string toHex(const void* data, size_t n);
bool fromHex(const std::string& hex, void* out, size_t n);

int runNetChecks(const Options& opt, Out& out);    // worker body for `net`
int runTunerChecks(const Options& opt, Out& out);  // worker body for `tuner`

}  // namespace tutti::check
