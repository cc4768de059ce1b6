// Input generators and host references for the collectives.
//
// Inputs are a pure function of (type, op, rank, index, seed), so any rank can recompute what every peer
// sent without sharing memory. Values are chosen so reductions are exact whatever order the library
// reduces in: small integers for sums (partial sums stay inside the type's exactly representable
// integers), {1,2,3} / {1,-1,2} for products, and unsigned sums that wrap (wrap-around is associative and
// commutative). Only avg and pre-multiplied sums on floating types round; those compare with a bound
// derived from the type's epsilon (see reducedTolerance).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tutti::itest {

enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulHost, kPreMulDevice };

inline constexpr OpKind kAllOps[] = {OpKind::kSum, OpKind::kProd,       OpKind::kMax,         OpKind::kMin,
                                     OpKind::kAvg, OpKind::kPreMulHost, OpKind::kPreMulDevice};

// The scalar of every ncclRedOpCreatePreMulSum the tests create. Not a power of two, so a library that
// ignores it or applies it twice is caught.
inline constexpr int kPreMulScalar = 3;

const char* opName(OpKind op);
bool isPreMul(OpKind op);
// The built-in ncclRedOp_t for the first five kinds.
ncclRedOp_t builtinOp(OpKind op);

// Input element `idx` of rank `rank` for a reduction, as an integer (stored exactly in any type).
int64_t reductionInput(ncclDataType_t type, OpKind op, int rank, size_t idx, uint32_t seed);
// Byte `byteIdx` of rank `rank`'s input for a data-movement collective: every bit pattern may occur, so
// a misplaced element is noticed, and the library must move bytes without interpreting them.
unsigned char movementByte(int rank, size_t byteIdx, uint32_t seed);
// Bytes [firstByte, firstByte + n) of that input into dst (what movementByte gives for each, one hash per 8).
void movementBytes(int rank, size_t firstByte, size_t n, uint32_t seed, unsigned char* dst);

// Checks the reduced element `got[idx]` of type `type` against the reduction by `op` of `inputs`
// (one contribution per rank). On mismatch returns false and describes it in `why`.
bool checkReduced(ncclDataType_t type, OpKind op, const std::vector<int64_t>& inputs, const void* got,
                  size_t idx, std::string* why);

// Allowed |got - exact| for avg / pre-multiplied sums on floating types. Each of the n products and
// n-1 additions (and the final rounding) may round by half an ulp of a value bounded by `sumAbs` (the sum
// of |scaled contributions|), so the error is at most (2n+1) * eps/2 * sumAbs; we allow (n+1) * eps *
// sumAbs. Zero for exact ops and integer types.
double reducedTolerance(ncclDataType_t type, OpKind op, int nranks, double sumAbs);

// A host buffer whose user area starts `offset` bytes (0..63) after a 64-byte boundary, with guard
// bytes on both sides so writes outside the area the library was given are detected.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  GuardedBuffer(size_t bytes, size_t offset);
  // A valid pointer even for 0 bytes (users pass real buffers with count 0 too).
  unsigned char* data() { return storage_.data() + start_; }
  const unsigned char* data() const { return storage_.data() + start_; }
  size_t bytes() const { return bytes_; }
  // Fills the user area with a pattern the library must overwrite (distinct from the guard pattern).
  void fillGarbage();
  // True when no byte outside the user area changed; otherwise describes the first change in `why`.
  bool guardsIntact(std::string* why) const;

 private:
  static constexpr size_t kGuard = 64;
  std::vector<unsigned char> storage_;
  size_t start_ = 0;
  size_t bytes_ = 0;
};

}  // namespace tutti::itest
