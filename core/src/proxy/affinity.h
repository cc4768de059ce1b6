// Where the proxy thread runs (TUTTI_PROXY_AFFINITY).
//
// In the host backend a rank's own thread does what a GPU kernel does elsewhere: it copies, reduces and
// polls its connections. The proxy thread feeds those connections from the network, so when it shares the
// rank's core the two take turns: the rank spins waiting for data that only the proxy, descheduled on the
// same core, can deliver. A rank bound to a single CPU (mpirun --bind-to core, taskset, all_reduce_perf
// --bind) therefore gets a proxy on the other online CPUs, the way a GPU's proxy runs on host cores while
// the kernel runs on the device. Measured on 2 cores, AllReduce 64 B over sockets, 2 ranks bound to one
// core each: 16-17 us with the proxy off the rank's core, 40-50 us on it, 18-44 us unbound.
//
//   auto     (default) a creating thread bound to exactly one CPU: every other online CPU; otherwise the
//            creating thread's CPUs (unbound ranks are left to the scheduler)
//   inherit  the creating thread's CPUs, whatever they are
//   <list>   the online CPUs of a Linux CPU list ("0-3,8,10-11"); none online: inherit
//
// The pure functions here are unit-tested; proxy.cc applies the result when it starts the thread.
#pragma once

#include <sched.h>

#include <string>
#include <string_view>

namespace tutti {

// Parses a Linux CPU list ("0-3,8"; ranges inclusive, ascending, CPUs below CPU_SETSIZE). On failure
// returns false and *why says what is wrong.
bool parseCpuList(std::string_view text, cpu_set_t* out, std::string* why);
// "0-3,8"; "none" for an empty set.
std::string formatCpuList(const cpu_set_t& set);

struct ProxyAffinity {
  enum class Mode { Auto, Inherit, List } mode = Mode::Auto;
  cpu_set_t cpus{};  // Mode::List
};

// Parses a TUTTI_PROXY_AFFINITY value (case-insensitive keywords; "" means auto).
bool parseProxyAffinity(std::string_view text, ProxyAffinity* out, std::string* why);

// The proxy thread's CPUs for a thread created by one bound to `creator`, with `online` the CPUs online.
// *reason says why, for the log.
cpu_set_t proxyCpus(const ProxyAffinity& policy, const cpu_set_t& creator, const cpu_set_t& online,
                    std::string* reason);

// The online CPUs (/sys/devices/system/cpu/online; without it, 0 .. nprocs-1).
cpu_set_t onlineCpus();

}  // namespace tutti
