#include "reference.h"

#include "dtypes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tutti::itest {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(int rank, size_t idx, uint32_t seed) {
  return mix((static_cast<uint64_t>(seed) << 40) ^ (static_cast<uint64_t>(rank) << 32) ^ mix(idx));
}

// h's top 32 bits scaled to [0, m): a multiplication where a modulo would divide (these run for every element of
// every case, millions per large one).
uint64_t below(uint64_t h, uint64_t m) { return ((h >> 32) * m) >> 32; }

int64_t inRange(uint64_t h, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(below(h, static_cast<uint64_t>(hi - lo + 1)));
}

int64_t pick(uint64_t h, std::initializer_list<int64_t> set) { return set.begin()[below(h, set.size())]; }

bool isFp8(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2; }

// Unsigned inputs near the top of the type's range, so sums wrap.
int64_t wrappingUnsigned(ncclDataType_t type, uint64_t h) {
  switch (type) {
    case ncclUint8: return static_cast<int64_t>(h & 0xff);
    case ncclUint32: return static_cast<int64_t>(0xffffff00ull + (h & 0xff));
    default: return static_cast<int64_t>(0xffffffffffffff00ull + (h & 0xff));
  }
}

}  // namespace

const char* opName(OpKind op) {
  switch (op) {
    case OpKind::kSum: return "sum";
    case OpKind::kProd: return "prod";
    case OpKind::kMax: return "max";
    case OpKind::kMin: return "min";
    case OpKind::kAvg: return "avg";
    case OpKind::kPreMulHost: return "premulsum-host";
    case OpKind::kPreMulDevice: return "premulsum-device";
  }
  return "badop";
}

bool isPreMul(OpKind op) { return op == OpKind::kPreMulHost || op == OpKind::kPreMulDevice; }

ncclRedOp_t builtinOp(OpKind op) {
  switch (op) {
    case OpKind::kSum: return ncclSum;
    case OpKind::kProd: return ncclProd;
    case OpKind::kMax: return ncclMax;
    case OpKind::kMin: return ncclMin;
    default: return ncclAvg;
  }
}

int64_t reductionInput(ncclDataType_t type, OpKind op, int rank, size_t idx, uint32_t seed) {
  const uint64_t h = hash3(rank, idx, seed);
  const bool fp = isFloatType(type);
  switch (op) {
    case OpKind::kProd:
      // |product| <= 3^8 for unsigned (wraps harmlessly), 2^8 otherwise: exact in every float type.
      if (!fp && !isSignedInt(type)) return pick(h, {1, 2, 3});
      return pick(h, {1, -1, 2});
    case OpKind::kMax:
    case OpKind::kMin:
      if (!fp) return isSignedInt(type) ? inRange(h, -100, 100) : wrappingUnsigned(type, h);
      return isFp8(type) ? inRange(h, -8, 8) : inRange(h, -100, 100);
    case OpKind::kAvg:
      // Non-negative integers so an integer average cannot depend on how a negative sum is truncated.
      if (!fp) return inRange(h, 0, 20);
      return isFp8(type) ? inRange(h, -2, 2) : inRange(h, -4, 4);
    case OpKind::kSum:
    case OpKind::kPreMulHost:
    case OpKind::kPreMulDevice:
      if (!fp) {
        if (!isSignedInt(type)) return wrappingUnsigned(type, h);
        // Signed overflow is not wrap-around in C++, so signed sums stay in range: 8 * 3 * 4 < 128.
        return type == ncclInt8 ? inRange(h, -4, 4) : inRange(h, -1000, 1000);
      }
      // Partial sums of 8 values in [-1, 1] are integers in [-8, 8], exact in both fp8 formats.
      return isFp8(type) ? inRange(h, -1, 1) : inRange(h, -4, 4);
  }
  return 0;
}

// Byte i of a group of 8 is byte i of the group's hash.
static uint64_t movementGroup(int rank, size_t group, uint32_t seed) { return hash3(rank, group, seed ^ 0x5bd1e995u); }

unsigned char movementByte(int rank, size_t byteIdx, uint32_t seed) {
  return static_cast<unsigned char>(movementGroup(rank, byteIdx >> 3, seed) >> ((byteIdx & 7) * 8));
}

void movementBytes(int rank, size_t firstByte, size_t n, uint32_t seed, unsigned char* dst) {
  size_t i = 0;
  while (i < n) {
    const size_t at = firstByte + i;
    const uint64_t bits = movementGroup(rank, at >> 3, seed);
    for (size_t b = at & 7; b < 8 && i < n; ++b, ++i) dst[i] = static_cast<unsigned char>(bits >> (b * 8));
  }
}

double reducedTolerance(ncclDataType_t type, OpKind op, int nranks, double sumAbs) {
  if (!isFloatType(type) || (op != OpKind::kAvg && !isPreMul(op))) return 0.0;
  return (nranks + 1) * typeEpsilon(type) * sumAbs;
}

bool checkReduced(ncclDataType_t type, OpKind op, const std::vector<int64_t>& inputs, const void* got,
                  size_t idx, std::string* why) {
  const int n = static_cast<int>(inputs.size());
  if (!isFloatType(type)) {
    uint64_t acc = 0;
    switch (op) {
      case OpKind::kSum:
        for (int64_t v : inputs) acc += static_cast<uint64_t>(v);
        break;
      case OpKind::kPreMulHost:
      case OpKind::kPreMulDevice:
        for (int64_t v : inputs) acc += static_cast<uint64_t>(v) * kPreMulScalar;
        break;
      case OpKind::kProd:
        acc = 1;
        for (int64_t v : inputs) acc *= static_cast<uint64_t>(v);
        break;
      case OpKind::kAvg: {
        // NCCL sums in the element type (wrapping) and divides the wrapped sum at the end.
        uint64_t sum = 0;
        for (int64_t v : inputs) sum += static_cast<uint64_t>(v);
        sum = normaliseInt(type, sum);
        acc = isSignedInt(type) ? static_cast<uint64_t>(static_cast<int64_t>(sum) / n) : sum / static_cast<uint64_t>(n);
        break;
      }
      case OpKind::kMax:
      case OpKind::kMin: {
        // Compare as the type does: signed types sign-extended, unsigned ones as unsigned.
        auto less = [&](uint64_t a, uint64_t b) {
          a = normaliseInt(type, a);
          b = normaliseInt(type, b);
          return isSignedInt(type) ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
        };
        acc = static_cast<uint64_t>(inputs[0]);
        for (int64_t v : inputs) {
          const uint64_t u = static_cast<uint64_t>(v);
          if (op == OpKind::kMax ? less(acc, u) : less(u, acc)) acc = u;
        }
        break;
      }
    }
    const uint64_t want = normaliseInt(type, acc);
    const uint64_t have = loadInt(type, got, idx);
    if (want == have) return true;
    unsigned char tmp[8];
    storeInt(type, tmp, 0, want);
    *why = "expected " + elementString(type, tmp, 0) + " got " + elementString(type, got, idx);
    return false;
  }

  double exact = 0.0;
  double sumAbs = 0.0;
  switch (op) {
    case OpKind::kSum:
      for (int64_t v : inputs) exact += static_cast<double>(v);
      break;
    case OpKind::kPreMulHost:
    case OpKind::kPreMulDevice:
      for (int64_t v : inputs) {
        exact += static_cast<double>(v) * kPreMulScalar;
        sumAbs += std::fabs(static_cast<double>(v) * kPreMulScalar);
      }
      break;
    case OpKind::kAvg:
      for (int64_t v : inputs) {
        exact += static_cast<double>(v) / n;
        sumAbs += std::fabs(static_cast<double>(v) / n);
      }
      break;
    case OpKind::kProd:
      exact = 1.0;
      for (int64_t v : inputs) exact *= static_cast<double>(v);
      break;
    case OpKind::kMax: exact = static_cast<double>(*std::max_element(inputs.begin(), inputs.end())); break;
    case OpKind::kMin: exact = static_cast<double>(*std::min_element(inputs.begin(), inputs.end())); break;
  }
  const double have = loadFloat(type, got, idx);
  const double tol = reducedTolerance(type, op, n, sumAbs);
  if (tol == 0.0 ? have == roundToType(type, exact) : std::fabs(have - exact) <= tol) return true;
  *why = "expected " + std::to_string(exact) + (tol > 0 ? " +- " + std::to_string(tol) : std::string()) +
         " got " + std::to_string(have);
  return false;
}

GuardedBuffer::GuardedBuffer(size_t bytes, size_t offset) : bytes_(bytes) {
  storage_.assign(bytes + offset + 2 * kGuard + 64, 0xa5);
  // Place the user area `offset` bytes past a 64-byte boundary that lies at least kGuard into storage.
  const uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data());
  const uintptr_t aligned = (base + kGuard + 63) & ~static_cast<uintptr_t>(63);
  start_ = (aligned - base) + offset % 64;
}

void GuardedBuffer::fillGarbage() {
  if (bytes_) std::memset(data(), 0x5a, bytes_);
}

bool GuardedBuffer::guardsIntact(std::string* why) const {
  // The guard bytes only: before the user area, then after it (the area itself can be megabytes).
  auto intact = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (storage_[i] == 0xa5) continue;
      const long rel = static_cast<long>(i) - static_cast<long>(start_);
      *why = "byte at offset " + std::to_string(rel) + " relative to a " + std::to_string(bytes_) +
             "-byte buffer was overwritten";
      return false;
    }
    return true;
  };
  return intact(0, start_) && intact(start_ + bytes_, storage_.size());
}

}  // namespace tutti::itest
