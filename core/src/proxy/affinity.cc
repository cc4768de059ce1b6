#include "proxy/affinity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

namespace tutti {
namespace {

bool parseCpu(std::string_view text, int* cpu, std::string* why) {
  int v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    *why = fmt::format("'{}' is not a CPU number", text);
    return false;
  }
  if (v < 0 || v >= CPU_SETSIZE) {
    *why = fmt::format("CPU {} is out of range (0..{})", v, CPU_SETSIZE - 1);
    return false;
  }
  *cpu = v;
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool parseCpuList(std::string_view text, cpu_set_t* out, std::string* why) {
  CPU_ZERO(out);
  if (text.empty()) {
    *why = "the CPU list is empty";
    return false;
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) {
      *why = "the CPU list ends with ','";
      return false;
    }
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (!parseCpu(item.substr(0, dash), &first, why)) return false;
    last = first;
    if (dash != std::string_view::npos && !parseCpu(item.substr(dash + 1), &last, why)) return false;
    if (last < first) {
      *why = fmt::format("range '{}' runs backwards", item);
      return false;
    }
    for (int c = first; c <= last; ++c) CPU_SET(c, out);
  }
  return true;
}

std::string formatCpuList(const cpu_set_t& set) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    out += out.empty() ? "" : ",";
    out += last == c ? fmt::format("{}", c) : fmt::format("{}-{}", c, last);
    c = last;
  }
  return out.empty() ? "none" : out;
}

bool parseProxyAffinity(std::string_view text, ProxyAffinity* out, std::string* why) {
  const std::string word = lower(text);
  if (word.empty() || word == "auto") {
    out->mode = ProxyAffinity::Mode::Auto;
    return true;
  }
  if (word == "inherit") {
    out->mode = ProxyAffinity::Mode::Inherit;
    return true;
  }
  out->mode = ProxyAffinity::Mode::List;
  if (parseCpuList(text, &out->cpus, why)) return true;
  *why = fmt::format("'{}': expected auto, inherit or a CPU list such as 0-3,8 ({})", text, *why);
  return false;
}

cpu_set_t proxyCpus(const ProxyAffinity& policy, const cpu_set_t& creator, const cpu_set_t& online,
                    std::string* reason) {
  cpu_set_t result;
  switch (policy.mode) {
    case ProxyAffinity::Mode::Inherit:
      *reason = "inherited (TUTTI_PROXY_AFFINITY=inherit)";
      return creator;
    case ProxyAffinity::Mode::List:
      CPU_AND(&result, &policy.cpus, &online);
      if (CPU_COUNT(&result) == 0) {
        *reason = fmt::format("inherited: no CPU of TUTTI_PROXY_AFFINITY={} is online",
                              formatCpuList(policy.cpus));
        return creator;
      }
      *reason = "TUTTI_PROXY_AFFINITY";
      return result;
    case ProxyAffinity::Mode::Auto:
      break;
  }
  if (CPU_COUNT(&creator) != 1) {
    *reason = "inherited: the creating thread is not bound to one CPU";
    return creator;
  }
  CPU_XOR(&result, &online, &creator);
  CPU_AND(&result, &result, &online);
  if (CPU_COUNT(&result) == 0) {
    *reason = "inherited: no other CPU is online";
    return creator;
  }
  *reason = fmt::format("off CPU {}, the one the creating rank is bound to", formatCpuList(creator));
  return result;
}

cpu_set_t onlineCpus() {
  cpu_set_t set;
  std::ifstream f("/sys/devices/system/cpu/online");
  std::string line, why;
  if (f && std::getline(f, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (parseCpuList(line, &set, &why)) return set;
  }
  CPU_ZERO(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < std::min<long>(std::max<long>(n, 1), CPU_SETSIZE); ++c) CPU_SET(static_cast<int>(c), &set);
  return set;
}

}  // namespace tutti
