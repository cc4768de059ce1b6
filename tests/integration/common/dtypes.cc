#include "dtypes.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

namespace tutti::itest {

const char* typeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "half";
    case ncclFloat32: return "float";
    case ncclFloat64: return "double";
    case ncclBfloat16: return "bf16";
    case ncclFloat8e4m3: return "e4m3";
    case ncclFloat8e5m2: return "e5m2";
    default: return "badtype";
  }
}


double typeEpsilon(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return std::ldexp(1.0, -10);
    case ncclBfloat16: return std::ldexp(1.0, -7);
    case ncclFloat32: return std::ldexp(1.0, -23);
    case ncclFloat64: return std::ldexp(1.0, -52);
    case ncclFloat8e4m3: return std::ldexp(1.0, -3);
    case ncclFloat8e5m2: return std::ldexp(1.0, -2);
    default: return 0.0;
  }
}

namespace {

uint32_t encodeGeneral(double v, MiniFloat f) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.expBits + f.manBits) : 0u;
  const double a = std::fabs(v);
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t maxExpField = f.ieeeSpecials ? (1u << f.expBits) - 2 : (1u << f.expBits) - 1;
  const uint32_t maxMantissa = f.ieeeSpecials ? (1u << f.manBits) - 1 : (1u << f.manBits) - 2;
  const uint32_t maxFinite = (maxExpField << f.manBits) | maxMantissa;
  if (std::isnan(v)) return sign | (((1u << f.expBits) - 1) << f.manBits) | ((1u << f.manBits) - 1);
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  int exponent = e - 1;  // a = 1.m * 2^exponent
  if (exponent < 1 - bias) {
    // Subnormal range: fixed quantum. A result of 2^manBits is the smallest normal, which the bit
    // pattern (exponent field 1, mantissa 0) represents exactly.
    const double quantum = std::ldexp(1.0, 1 - bias - f.manBits);
    return sign | static_cast<uint32_t>(std::nearbyint(a / quantum));
  }
  double m = std::nearbyint(std::ldexp(a, f.manBits - exponent));  // in [2^manBits, 2^(manBits+1)]
  if (m >= std::ldexp(1.0, f.manBits + 1)) {
    m /= 2;
    exponent++;
  }
  const int64_t expField = exponent + bias;
  if (expField > static_cast<int64_t>(maxExpField)) return sign | maxFinite;
  const uint32_t bits =
      (static_cast<uint32_t>(expField) << f.manBits) | (static_cast<uint32_t>(m) - (1u << f.manBits));
  return sign | (bits > maxFinite ? maxFinite : bits);
}

double decodeGeneral(uint32_t bits, MiniFloat f) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const bool negative = (bits >> (f.expBits + f.manBits)) & 1u;
  const uint32_t expField = (bits >> f.manBits) & ((1u << f.expBits) - 1);
  const uint32_t mantissa = bits & ((1u << f.manBits) - 1);
  double v;
  if (expField == 0) {
    v = std::ldexp(static_cast<double>(mantissa), 1 - bias - f.manBits);
  } else if (f.ieeeSpecials && expField == (1u << f.expBits) - 1) {
    v = mantissa ? NAN : INFINITY;
  } else if (!f.ieeeSpecials && expField == (1u << f.expBits) - 1 && mantissa == (1u << f.manBits) - 1) {
    v = NAN;
  } else {
    v = std::ldexp(static_cast<double>(mantissa | (1u << f.manBits)),
                   static_cast<int>(expField) - bias - f.manBits);
  }
  return negative ? -v : v;
}

// The four formats of the element types, in the order of the tables below.
constexpr MiniFloat kFormats[] = {kHalfFormat, kBf16Format, kE4m3Format, kE5m2Format};

// Which of them `f` is (-1: another one).
int formatIndex(MiniFloat f) {
  for (int i = 0; i < 4; ++i)
    if (f.expBits == kFormats[i].expBits && f.manBits == kFormats[i].manBits &&
        f.ieeeSpecials == kFormats[i].ieeeSpecials)
      return i;
  return -1;
}

// The tests write and expect small integers almost everywhere (reference.cc), millions of them per large case:
// the encodings of the nonzero integers up to kSmallInt in magnitude, and the value of every bit pattern, are
// made once per format by the general code above and looked up after.
constexpr int kSmallInt = 256;

struct Codes {
  uint32_t smallInts[2 * kSmallInt + 1];
  std::vector<double> values;  // indexed by the pattern's bits
};

const Codes& codes(int index) {
  static const auto all = [] {
    std::array<Codes, 4> c{};
    for (int i = 0; i < 4; ++i) {
      const MiniFloat f = kFormats[i];
      for (int v = -kSmallInt; v <= kSmallInt; ++v) c[i].smallInts[v + kSmallInt] = encodeGeneral(v, f);
      c[i].values.resize(size_t{1} << (1 + f.expBits + f.manBits));
      for (size_t b = 0; b < c[i].values.size(); ++b) c[i].values[b] = decodeGeneral(static_cast<uint32_t>(b), f);
    }
    return c;
  }();
  return all[index];
}

// `index`: formatIndex(f).
uint32_t encodeIndexed(double v, MiniFloat f, int index) {
  // Zero keeps its sign through the general path; NaN is not an integer.
  if (index >= 0 && v != 0.0 && std::fabs(v) <= kSmallInt && std::trunc(v) == v)
    return codes(index).smallInts[static_cast<int>(v) + kSmallInt];
  return encodeGeneral(v, f);
}

double decodeIndexed(uint32_t bits, MiniFloat f, int index) {
  if (index >= 0 && bits < codes(index).values.size()) return codes(index).values[bits];
  return decodeGeneral(bits, f);
}

}  // namespace

uint32_t encodeMiniFloat(double v, MiniFloat f) { return encodeIndexed(v, f, formatIndex(f)); }
double decodeMiniFloat(uint32_t bits, MiniFloat f) { return decodeIndexed(bits, f, formatIndex(f)); }

namespace {

const MiniFloat* miniFormat(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return &kFormats[0];
    case ncclBfloat16: return &kFormats[1];
    case ncclFloat8e4m3: return &kFormats[2];
    case ncclFloat8e5m2: return &kFormats[3];
    default: return nullptr;
  }
}

template <typename T>
void put(void* base, size_t idx, T v) {
  std::memcpy(static_cast<char*>(base) + idx * sizeof(T), &v, sizeof(T));
}
template <typename T>
T get(const void* base, size_t idx) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + idx * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

uint64_t normaliseInt(ncclDataType_t type, uint64_t v) {
  switch (type) {
    case ncclInt8: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(v)));
    case ncclUint8: return static_cast<uint8_t>(v);
    case ncclInt32: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v)));
    case ncclUint32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

void storeInt(ncclDataType_t type, void* base, size_t idx, uint64_t v) {
  switch (typeSize(type)) {
    case 1: put<uint8_t>(base, idx, static_cast<uint8_t>(v)); break;
    case 4: put<uint32_t>(base, idx, static_cast<uint32_t>(v)); break;
    default: put<uint64_t>(base, idx, v); break;
  }
}

uint64_t loadInt(ncclDataType_t type, const void* base, size_t idx) {
  switch (typeSize(type)) {
    case 1: return normaliseInt(type, get<uint8_t>(base, idx));
    case 4: return normaliseInt(type, get<uint32_t>(base, idx));
    default: return get<uint64_t>(base, idx);
  }
}

void storeFloat(ncclDataType_t type, void* base, size_t idx, double v) {
  if (type == ncclFloat32) return put<float>(base, idx, static_cast<float>(v));
  if (type == ncclFloat64) return put<double>(base, idx, v);
  const MiniFloat* f = miniFormat(type);
  const uint32_t bits = encodeIndexed(v, *f, static_cast<int>(f - kFormats));
  if (typeSize(type) == 2)
    put<uint16_t>(base, idx, static_cast<uint16_t>(bits));
  else
    put<uint8_t>(base, idx, static_cast<uint8_t>(bits));
}

double loadFloat(ncclDataType_t type, const void* base, size_t idx) {
  if (type == ncclFloat32) return get<float>(base, idx);
  if (type == ncclFloat64) return get<double>(base, idx);
  const MiniFloat* f = miniFormat(type);
  const uint32_t bits = typeSize(type) == 2 ? get<uint16_t>(base, idx) : get<uint8_t>(base, idx);
  return decodeIndexed(bits, *f, static_cast<int>(f - kFormats));
}

double roundToType(ncclDataType_t type, double v) {
  unsigned char tmp[8];
  storeFloat(type, tmp, 0, v);
  return loadFloat(type, tmp, 0);
}

void storeValue(ncclDataType_t type, void* base, size_t idx, int64_t v) {
  if (isFloatType(type))
    storeFloat(type, base, idx, static_cast<double>(v));
  else
    storeInt(type, base, idx, static_cast<uint64_t>(v));
}

std::string elementString(ncclDataType_t type, const void* base, size_t idx) {
  if (isFloatType(type)) return std::to_string(loadFloat(type, base, idx));
  const uint64_t v = loadInt(type, base, idx);
  return isSignedInt(type) ? std::to_string(static_cast<int64_t>(v)) : std::to_string(v);
}

}  // namespace tutti::itest
