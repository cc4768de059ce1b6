// NCCL's parameter API (ncclParam*) over Tutti's one table of parameters (plugin/params.def): the keys are
// the environment variable names, which are also the keys of the YAML config's `params:`, and a value is
// the effective one (environment, else config, else default), as every other reader of a parameter sees it.
//
// A handle is the address of the parameter's entry in that table, valid for the life of the library.
// Int parameters are 64-bit: the typed getters convert with a range check, and a value the requested
// type cannot hold, or a string parameter read as an integer, fails with ncclInvalidArgument. Every
// Tutti parameter is documented (configs/REFERENCE.md), so the key list does not depend on
// NCCL_PARAM_DUMP_ALL.
#include "api/api.h"
#include "api/argcheck.h"
#include "plugin/config.h"
#include "plugin/params.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

namespace {

using tutti::ParamInfo;
using tutti::ParamType;

// The table entry behind a handle, or nullptr for anything that is not one (a garbage handle fails
// cleanly instead of being dereferenced).
const ParamInfo* entryOf(ncclParamHandle_t h) {
  auto table = tutti::paramTable();
  for (const ParamInfo& p : table)
    if (reinterpret_cast<const void*>(&p) == reinterpret_cast<const void*>(h)) return &p;
  return nullptr;
}

std::string valueText(const ParamInfo& p) {
  return p.type == ParamType::Int ? std::to_string(tutti::paramInt(p.name)) : tutti::paramString(p.name);
}

template <typename T>
ncclResult_t getInteger(const char* call, ncclParamHandle_t h, T* out) {
  const ParamInfo* p = entryOf(h);
  if (p == nullptr) TUTTI_FAIL(ncclInvalidArgument, "{}: the handle is not one ncclParamBind returned", call);
  TUTTI_CHECK(tutti::argCheckPtr(out, "out", call));
  if (p->type != ParamType::Int)
    TUTTI_FAIL(ncclInvalidArgument, "{}: {} is a string parameter (read it with ncclParamGetStr)", call, p->name);
  const int64_t v = tutti::paramInt(p->name);
  bool fits;
  if constexpr (std::is_signed_v<T>) {
    fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
  } else {
    fits = v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
  }
  if (!fits) TUTTI_FAIL(ncclInvalidArgument, "{}: {}={} does not fit the requested type", call, p->name, v);
  *out = static_cast<T>(v);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  return tutti::apiGuard("ncclParamBind", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckPtr(out, "out", "ncclParamBind"));
    TUTTI_CHECK(tutti::argCheckPtr(key, "key", "ncclParamBind"));
    const ParamInfo* p = tutti::paramFind(key);
    if (p == nullptr)
      TUTTI_FAIL(ncclInvalidArgument, "ncclParamBind: no parameter '{}' (tutti-info lists them)", key);
    *out = reinterpret_cast<ncclParamHandle_t>(const_cast<ParamInfo*>(p));
    return ncclSuccess;
  });
}

#define TUTTI_PARAM_GETTER(suffix, type)                                                  \
  NCCL_API(ncclResult_t, ncclParamGet##suffix, ncclParamHandle_t h, type* out) {          \
    return tutti::apiGuard("ncclParamGet" #suffix,                                        \
                           [&]() { return getInteger("ncclParamGet" #suffix, h, out); }); \
  }
TUTTI_PARAM_GETTER(I8, int8_t)
TUTTI_PARAM_GETTER(I16, int16_t)
TUTTI_PARAM_GETTER(I32, int32_t)
TUTTI_PARAM_GETTER(I64, int64_t)
TUTTI_PARAM_GETTER(U8, uint8_t)
TUTTI_PARAM_GETTER(U16, uint16_t)
TUTTI_PARAM_GETTER(U32, uint32_t)
TUTTI_PARAM_GETTER(U64, uint64_t)
#undef TUTTI_PARAM_GETTER

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  return tutti::apiGuard("ncclParamGetStr", [&]() -> ncclResult_t {
    const ParamInfo* p = entryOf(h);
    if (p == nullptr) TUTTI_FAIL(ncclInvalidArgument, "ncclParamGetStr: the handle is not one ncclParamBind returned");
    TUTTI_CHECK(tutti::argCheckPtr(out, "out", "ncclParamGetStr"));
    thread_local std::string text;  // valid until this thread's next ncclParamGetStr
    text = valueText(*p);
    *out = text.c_str();
    return ncclSuccess;
  });
}

// Raw bytes: an Int parameter is its int64_t, a string parameter its characters and terminating NUL.
NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return tutti::apiGuard("ncclParamGet", [&]() -> ncclResult_t {
    const ParamInfo* p = entryOf(h);
    if (p == nullptr) TUTTI_FAIL(ncclInvalidArgument, "ncclParamGet: the handle is not one ncclParamBind returned");
    TUTTI_CHECK(tutti::argCheckPtr(out, "out", "ncclParamGet"));
    TUTTI_CHECK(tutti::argCheckPtr(len, "len", "ncclParamGet"));
    std::string bytes;
    if (p->type == ParamType::Int) {
      const int64_t v = tutti::paramInt(p->name);
      bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
    } else {
      bytes = tutti::paramString(p->name);
      bytes.push_back('\0');
    }
    *len = static_cast<int>(bytes.size());
    if (maxLen < 0 || bytes.size() > static_cast<size_t>(maxLen))
      TUTTI_FAIL(ncclInvalidArgument, "ncclParamGet: {} needs {} bytes, maxLen is {}", p->name, bytes.size(), maxLen);
    std::memcpy(out, bytes.data(), bytes.size());
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  return tutti::apiGuard("ncclParamGetParameter", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckPtr(key, "key", "ncclParamGetParameter"));
    TUTTI_CHECK(tutti::argCheckPtr(value, "value", "ncclParamGetParameter"));
    TUTTI_CHECK(tutti::argCheckPtr(valueLen, "valueLen", "ncclParamGetParameter"));
    const ParamInfo* p = tutti::paramFind(key);
    if (p == nullptr) {
      *value = nullptr;
      *valueLen = 0;
      TUTTI_FAIL(ncclInvalidArgument, "ncclParamGetParameter: no parameter '{}' (tutti-info lists them)", key);
    }
    thread_local std::string text;  // valid until this thread's next ncclParamGetParameter
    text = valueText(*p);
    *value = text.c_str();
    *valueLen = static_cast<int>(text.size());
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  return tutti::apiGuard("ncclParamGetAllParameterKeys", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckPtr(table, "table", "ncclParamGetAllParameterKeys"));
    TUTTI_CHECK(tutti::argCheckPtr(tableLen, "tableLen", "ncclParamGetAllParameterKeys"));
    thread_local std::vector<const char*> keys;  // the names are static; the array is per thread
    keys.clear();
    for (const ParamInfo& p : tutti::paramTable()) keys.push_back(p.name);
    *table = keys.data();
    *tableLen = static_cast<int>(keys.size());
    return ncclSuccess;
  });
}

// Every parameter with its value and where the value came from, on stdout.
NCCL_API(void, ncclParamDumpAll) {
  try {
    std::string text = "Tutti parameters (value, origin):\n";
    for (const ParamInfo& p : tutti::paramTable())
      text += fmt::format("  {}={} ({})\n", p.name, valueText(p), tutti::originText(tutti::paramOrigin(p.name)));
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  } catch (const std::exception& e) {
    TUTTI_WARN("ncclParamDumpAll: {}", e.what());
  }
}
