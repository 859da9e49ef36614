// The wire format between the injector (inside the traced program) and the collector (in the
// `fpscope run` process): the records the injector writes into the shared-memory ring.
//
// The ring is an array of 64-byte slots. A record occupies one or more consecutive slots and
// starts with a RecordHeader that gives its type and slot count. Records are plain structs with no
// pointers; strings travel once as String records and are referred to by a 32-bit id afterwards.
// The injector only fills structs and publishes them; naming, formatting and SQL happen in the
// collector. Every size is asserted below: changing a struct changes kProtocolVersion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/contract/tensor_role.h"

namespace fpscope::wire {

inline constexpr uint32_t kProtocolVersion = 5;
inline constexpr std::size_t kSlotBytes = 64;

enum class RecordType : uint16_t {
  Pad = 0,            // filler up to the end of the ring; the reader skips it
  String = 1,         // an interned string: id and bytes (multi-slot)
  Process = 2,        // the traced process announces itself (first record)
  NvtxPush = 3,       // a range opened
  NvtxPop = 4,        // the innermost range of a thread closed
  Launch = 5,         // one kernel launch: name, time, attribution
  TensorStats = 6,    // one tensor of a launch: the basic statistics
  TensorFormats = 7,  // the same tensor: counts per narrower format (full statistics only)
  TensorHistogram = 8,// the same tensor: exponent histogram, sparse (full statistics only)
  Nonfinite = 9,      // the first NaN/Inf of an output tensor and whether this kernel made it
  Alloc = 10,
  Free = 11,
  LossScale = 12,     // read off amp_update_scale
  Scalar = 13,        // mpt_log_scalar
  Text = 14,          // mpt_log_text: key and value string ids
  Dump = 15,          // a tensor written to an .npy file
  Trap = 16,          // the injector stopped the program at a non-finite origin
  CudaKernel = 17,    // device activity from CUPTI (libfpscope_gpu.so): one kernel execution
  CudaMemcpy = 18,    //   one memory copy
  CudaMemset = 19,    //   one memset
  CudaMemory = 20,    //   one device allocation or release
  Relabel = 21,       // an allocation's category and name, learnt after its Alloc
  ProcessExit = 22,   // the traced process is exiting normally (its last record)
  TensorRecipes = 23, // an fp8 operand: what each scaling recipe would do to it
  TensorStore = 24,   // an output: what the kernel's narrowing store did to its fp32 results
  ParamUpdate = 25,   // an optimizer launch: its parameter's update, changed and lost elements
  Count
};

struct RecordHeader {
  RecordType type;
  uint16_t slots;      // slots this record occupies, >= 1
  uint32_t thread;     // small per-process thread number, from 1
};
static_assert(sizeof(RecordHeader) == 8);

// Tensor roles and the role_slot byte: fpscope/contract/tensor_role.h.
using contract::Role;

// Narrower formats whose cast outcome is counted: fpscope/contract/number_formats.h.
using Format = contract::CastFormat;
inline constexpr int kFormatCount = contract::kCastFormatCount;

// Non-finite kinds.
enum class NonfiniteKind : uint8_t { NaN = 0, PosInf = 1, NegInf = 2 };

// String: `length` bytes of UTF-8 follow the fixed part, spilling into further slots. Not
// NUL-terminated; at most kMaxStringBytes (longer strings are cut by the injector).
struct StringRecord {
  RecordHeader h;
  uint32_t id;         // from 1; 0 means "no string"
  uint32_t length;
  char bytes[48];      // first bytes; the rest continue in the following slots
};
static_assert(sizeof(StringRecord) == 64);
inline constexpr uint32_t kMaxStringBytes = 4096;

struct ProcessRecord {
  RecordHeader h;
  uint32_t protocol;   // kProtocolVersion
  int32_t pid;
  int64_t start_ns;    // CLOCK_REALTIME at injector start
  int64_t mono_ns;     // CLOCK_MONOTONIC at the same moment; every other time is monotonic
  uint32_t exe;        // string id: /proc/self/exe
  uint32_t options;    // string id: the selection options the injector runs with
  int32_t rank;        // from the launcher's environment (contract/launcher_rank.h); 0 if none
  int32_t local_rank;  // -1 if the launcher gave none
  int32_t world_size;  // -1 if the launcher gave none
  uint32_t host;       // string id: the host name
  uint32_t rank_source;// string id: the variable the rank came from, 0 if none
  uint8_t reserved[4];
};
static_assert(sizeof(ProcessRecord) == 64);

struct NvtxPushRecord {
  RecordHeader h;
  int64_t t_ns;
  uint32_t message;    // string id
  uint32_t domain;     // string id, 0 for the default domain
  uint32_t category;   // NVTX category (contract::NvtxCategory for the trainer's domain), 0 if none
  uint32_t payload_kind; // 0 none, 1 int64, 2 double
  int64_t payload_i;
  double payload_f;
  uint8_t reserved[16];
};
static_assert(sizeof(NvtxPushRecord) == 64);

struct NvtxPopRecord {
  RecordHeader h;
  int64_t t_ns;
  uint32_t domain;
  uint8_t reserved[44];
};
static_assert(sizeof(NvtxPopRecord) == 64);

struct LaunchRecord {
  RecordHeader h;
  uint64_t seq;        // launch number in the process, from 1; tensor records refer to it
  int64_t start_ns;    // mpt_launch entered (monotonic)
  int64_t end_ns;      // the real kernel returned
  uint32_t kernel;     // string id
  uint32_t layer;      // string id of the innermost layer range, 0 if none
  uint32_t phase;      // string id of the innermost phase range, 0 if none
  int32_t status;      // what the real mpt_launch returned
  int64_t step;        // innermost step range's payload, -1 if none
  uint8_t n_inputs;
  uint8_t n_outputs;
  uint8_t device;      // mpt_device
  uint8_t sampled;     // 1 if its tensors were measured, 0 if selection skipped them
  uint8_t reserved[4];
};
static_assert(sizeof(LaunchRecord) == 64);

// Statistics of one tensor. min/max/absmax/min_nonzero/mean/rms are over finite values; they are
// NaN when the tensor has no finite value (min_nonzero: no finite nonzero value).
struct TensorStatsRecord {
  RecordHeader h;
  uint64_t seq;        // the launch
  uint64_t tensor_id;  // allocation id (mpt_tensor.id)
  uint32_t name;       // string id
  Role role;
  uint8_t slot;        // index among the launch's inputs or outputs
  uint8_t dtype;       // contract::Dtype (= mpt_dtype)
  uint8_t ndim;
  int64_t shape[6];
  uint64_t count;
  uint64_t nan, pos_inf, neg_inf, zero, subnormal;
  double min, max, absmax, min_nonzero, mean, rms;
  uint8_t reserved[80];
};
static_assert(sizeof(TensorStatsRecord) == 4 * kSlotBytes);

struct FormatCounts {
  uint64_t overflow;   // finite values that would exceed the largest finite value when rounded
  uint64_t underflow;  // nonzero finite values that would round to zero
  uint64_t subnormal;  // nonzero finite values that would round to a nonzero subnormal
  uint64_t near_max;   // finite values with max_finite/2 <= |x| that do not overflow
};
static_assert(sizeof(FormatCounts) == 32);

struct TensorFormatsRecord {
  RecordHeader h;
  uint64_t seq;
  uint8_t role_slot;   // contract::pack_role_slot(role, slot)
  uint8_t reserved[47];
  FormatCounts formats[kFormatCount];  // indexed by Format
};
static_assert(sizeof(TensorFormatsRecord) == 3 * kSlotBytes);

// Exponent histogram of the finite nonzero values: bin e counts values with 2^e <= |x| < 2^(e+1),
// e in [kMinExponent, kMaxExponent] (fp32's range, subnormals included). Sparse: `bins` entries of
// (exponent, count) follow the fixed part.
inline constexpr int kMinExponent = contract::kHistMinExponent;
inline constexpr int kMaxExponent = contract::kHistMaxExponent;
struct HistogramBin {
  int32_t exponent;
  uint32_t reserved;
  uint64_t count;
};
static_assert(sizeof(HistogramBin) == 16);
struct TensorHistogramRecord {
  RecordHeader h;
  uint64_t seq;
  uint8_t role_slot;
  uint8_t reserved[3];
  uint32_t bins;       // number of HistogramBin entries following this struct
  uint64_t below;      // fp64 values beyond the bins' range: |x| < 2^kMinExponent
  uint64_t above;      // and |x| >= 2^(kMaxExponent + 1); 0 for the narrower types
  uint8_t reserved2[24];
  // HistogramBin entries[bins] follow, filling this record's remaining slots.
};
static_assert(sizeof(TensorHistogramRecord) == kSlotBytes);

struct NonfiniteRecord {
  RecordHeader h;
  uint64_t seq;
  uint64_t first_index; // flat index of the first NaN/Inf in the tensor
  uint32_t first_bits;  // its bit pattern in the tensor's dtype (zero-extended for 16-bit), low half
  uint8_t role_slot;
  NonfiniteKind kind;   // of the first one
  uint8_t origin;       // 1: every input of the launch was finite, so this kernel made it
  uint8_t dtype;
  uint8_t allowed;      // 1: an allow rule covers every non-finite kind it holds (intended)
  uint8_t reserved0[3];
  uint32_t first_bits_high;  // the pattern's high half: nonzero for fp64 only
  uint8_t reserved[24];
};
static_assert(sizeof(NonfiniteRecord) == 64);
static_assert(offsetof(NonfiniteRecord, first_bits_high) % 4 == 0);

struct AllocRecord {
  RecordHeader h;
  int64_t t_ns;
  uint64_t id;          // allocation id
  uint64_t bytes;
  uint64_t address;
  uint32_t name;        // string id
  uint8_t category;     // mpt_category
  uint8_t device;       // mpt_device
  uint8_t reserved[18];
};
static_assert(sizeof(AllocRecord) == 64);

struct FreeRecord {
  RecordHeader h;
  int64_t t_ns;
  uint64_t id;
  uint64_t bytes;
  uint8_t reserved[32];
};
static_assert(sizeof(FreeRecord) == 64);

// What an allocation holds, learnt after its Alloc record went out: a front end sees memory as it
// is made and learns its purpose later (an op's output that autograd makes a parameter's gradient,
// a buffer the optimizer keeps as its state). The allocation keeps its id; its Alloc row and its
// Free read the new category and name, as if they had been known from the start.
struct RelabelRecord {
  RecordHeader h;
  uint64_t id;          // allocation id
  uint32_t name;        // string id
  uint8_t category;     // mpt_category
  uint8_t reserved[43];
};
static_assert(sizeof(RelabelRecord) == 64);

// Written while the process exits through exit() or a return from main; a process killed by a
// signal, or one that crashed, never sends it.
struct ProcessExitRecord {
  RecordHeader h;
  int64_t t_ns;
  uint8_t reserved[48];
};
static_assert(sizeof(ProcessExitRecord) == 64);

// Read off one amp_update_scale launch.
enum class ScaleEvent : uint8_t { Unchanged = 0, Growth = 1, Backoff = 2 };
struct LossScaleRecord {
  RecordHeader h;
  uint64_t seq;         // the amp_update_scale launch
  int64_t t_ns;
  int64_t step;
  double scale_before;
  double scale_after;
  int32_t growth_tracker; // after the call
  uint8_t found_inf;      // 1: the step's gradients held NaN/Inf, so it was skipped
  ScaleEvent event;
  uint8_t reserved[10];
};
static_assert(sizeof(LossScaleRecord) == 64);

struct ScalarRecord {
  RecordHeader h;
  int64_t t_ns;
  int64_t step;
  double value;
  uint32_t name;
  uint8_t reserved[28];
};
static_assert(sizeof(ScalarRecord) == 64);

struct TextRecord {
  RecordHeader h;
  int64_t t_ns;
  uint32_t key;
  uint32_t value;
  uint8_t reserved[40];
};
static_assert(sizeof(TextRecord) == 64);

struct DumpRecord {
  RecordHeader h;
  uint64_t seq;
  uint32_t path;        // string id: the .npy file, relative to the trace's folder
  uint8_t role_slot;
  uint8_t reserved[43];
};
static_assert(sizeof(DumpRecord) == 64);

struct TrapRecord {
  RecordHeader h;
  uint64_t seq;         // the launch that made the first non-finite value
  int64_t t_ns;
  uint32_t reason;      // string id: the message the injector printed
  uint8_t reserved[36];
};
static_assert(sizeof(TrapRecord) == 64);

// Device activity reported by CUPTI (see docs/gpu.md). Times are the traced process's monotonic
// clock: the injector shifts CUPTI's timestamps by the offset it measured when collection began.
// correlation_id is CUPTI's, shared by an activity and the runtime call that caused it.
struct CudaKernelRecord {
  RecordHeader h;
  int64_t start_ns;
  int64_t end_ns;
  uint32_t name;         // string id: the kernel's (mangled) name
  uint32_t correlation_id;
  uint32_t device;
  uint32_t stream;
  int32_t grid[3];
  int32_t block[3];
};
static_assert(sizeof(CudaKernelRecord) == 64);

struct CudaMemcpyRecord {
  RecordHeader h;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
  uint32_t correlation_id;
  uint32_t device;
  uint32_t stream;
  uint8_t copy_kind;     // CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP, ...
  uint8_t src_kind;      // CUpti_ActivityMemoryKind of each side
  uint8_t dst_kind;
  uint8_t reserved[17];
};
static_assert(sizeof(CudaMemcpyRecord) == 64);

struct CudaMemsetRecord {
  RecordHeader h;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
  uint32_t correlation_id;
  uint32_t device;
  uint32_t stream;
  uint32_t value;
  uint8_t reserved[16];
};
static_assert(sizeof(CudaMemsetRecord) == 64);

struct CudaMemoryRecord {
  RecordHeader h;
  int64_t t_ns;
  uint64_t bytes;
  uint64_t address;
  uint32_t device;
  uint32_t stream;
  uint8_t operation;     // 1 allocation, 2 release (CUpti_ActivityMemoryOperationType)
  uint8_t memory_kind;   // CUpti_ActivityMemoryKind
  uint8_t reserved[22];
};
static_assert(sizeof(CudaMemoryRecord) == 64);

// Slots needed for a record of `fixed` bytes followed by `tail` bytes.
constexpr uint16_t slots_for(std::size_t fixed, std::size_t tail) {
  return static_cast<uint16_t>((fixed + tail + kSlotBytes - 1) / kSlotBytes);
}

// What one scaling recipe would do to a tensor (fpscope/fp8_recipes.h, RecipeOutcome).
struct RecipeCounts {
  uint64_t values, underflow, subnormal, saturated, blocks;
  uint32_t blocks_lost, blocks_nonfinite;
  double sse, signal;
  double scale;        // the per-tensor recipes' scale; NaN for the block recipes
};
static_assert(sizeof(RecipeCounts) == 72);

// An operand that fp8 training quantizes (contract::kQuantizedOperands): every recipe's outcome,
// indexed by contract::Recipe. Follows the tensor's TensorStats record.
struct TensorRecipesRecord {
  RecordHeader h;
  uint64_t seq;
  uint8_t role_slot;
  uint8_t operand;     // contract::Operand
  uint8_t reserved[6];
  double amax;         // the largest finite |x|, +Inf when the tensor holds NaN or Inf
  RecipeCounts recipes[contract::kRecipeCount];
  uint8_t reserved2[56];
};
static_assert(sizeof(TensorRecipesRecord) == 16 * kSlotBytes);

// What the kernel's narrowing store did to one output's fp32 results (mpt_store_counts of the
// launch report, mpt/abi.h): nonzero finite results, and of those the ones rounded to zero, to a
// subnormal and to an infinity. Follows the output's TensorStats record.
struct TensorStoreRecord {
  RecordHeader h;
  uint64_t seq;
  uint8_t role_slot;
  uint8_t reserved[7];
  uint64_t results, flushed, subnormal, overflowed;
  uint8_t reserved2[8];
};
static_assert(sizeof(TensorStoreRecord) == 64);

// One optimizer step of one parameter (mpt_update_counts of the launch report, or a front end's
// comparison of the parameter before and after its optimizer's step).
enum class NonzeroFrom : uint8_t {
  Unknown = 0,   // nonzero and lost are not known
  Update = 1,    // the kernel's computed update was nonzero (mptrain's optimizer kernels)
  Gradient = 2,  // the element's gradient was nonzero (a front end, which sees no computed update)
};
struct ParamUpdateRecord {
  RecordHeader h;
  uint64_t seq;         // the optimizer launch; 0 for a front end's step, which is no one launch
  uint64_t tensor_id;   // the parameter's allocation id, 0 if none
  uint32_t name;        // string id: the parameter's name
  uint8_t dtype;        // the parameter's element type
  uint8_t computed_known;  // 1: the computed sums are the kernel's; 0: unknown
  NonzeroFrom nonzero_from;
  uint8_t reserved;
  uint64_t elements, nonzero, changed, lost;
  double computed_abs_sum, computed_sq_sum, applied_abs_sum, applied_sq_sum, weight_sq_sum;
  int64_t step;         // the optimizer step, -1 if none
  uint8_t reserved2[16];
};
static_assert(sizeof(ParamUpdateRecord) == 2 * kSlotBytes);

// [SECTION] The record list ------------------------------------------------------------------------
//
// Every record type, its struct, and whether it continues the tensor its thread sent last (a
// tensor's row is complete once its thread sends a record that does not). This list is the one
// place a record type is tied to its layout: the injector's writer takes the type from the struct
// (record_type_v), and the collector's dispatch is generated from it (X(Type, Struct, continues)).
#define FPSCOPE_WIRE_RECORDS(X)                       \
  X(String, StringRecord, true)                       \
  X(Process, ProcessRecord, false)                    \
  X(NvtxPush, NvtxPushRecord, false)                  \
  X(NvtxPop, NvtxPopRecord, false)                    \
  X(Launch, LaunchRecord, false)                      \
  X(TensorStats, TensorStatsRecord, false)            \
  X(TensorFormats, TensorFormatsRecord, true)         \
  X(TensorHistogram, TensorHistogramRecord, true)     \
  X(Nonfinite, NonfiniteRecord, true)                 \
  X(Alloc, AllocRecord, false)                        \
  X(Free, FreeRecord, false)                          \
  X(LossScale, LossScaleRecord, false)                \
  X(Scalar, ScalarRecord, false)                      \
  X(Text, TextRecord, false)                          \
  X(Dump, DumpRecord, true)                           \
  X(Trap, TrapRecord, false)                          \
  X(CudaKernel, CudaKernelRecord, false)              \
  X(CudaMemcpy, CudaMemcpyRecord, false)              \
  X(CudaMemset, CudaMemsetRecord, false)              \
  X(CudaMemory, CudaMemoryRecord, false)              \
  X(Relabel, RelabelRecord, false)                    \
  X(ProcessExit, ProcessExitRecord, false)            \
  X(TensorRecipes, TensorRecipesRecord, true)         \
  X(TensorStore, TensorStoreRecord, true)             \
  X(ParamUpdate, ParamUpdateRecord, false)

// A record struct: plain bytes, a whole number of slots, its header first.
template <typename R>
inline constexpr bool kIsWireRecord = std::is_trivially_copyable_v<R> && std::is_standard_layout_v<R> &&
                                      sizeof(R) % kSlotBytes == 0 && offsetof(R, h) == 0 &&
                                      std::is_same_v<decltype(R::h), RecordHeader>;

// The record type of a struct: record_type_v<LaunchRecord> is RecordType::Launch.
template <typename R>
struct RecordTypeOf;
#define FPSCOPE_WIRE_RECORD_TYPE_OF(type, Struct, continues)                       \
  template <>                                                                      \
  struct RecordTypeOf<Struct> {                                                    \
    static constexpr RecordType value = RecordType::type;                          \
    static constexpr bool continues_tensor = continues;                            \
    static_assert(kIsWireRecord<Struct>, #Struct " is not a valid wire record");   \
  };
FPSCOPE_WIRE_RECORDS(FPSCOPE_WIRE_RECORD_TYPE_OF)
#undef FPSCOPE_WIRE_RECORD_TYPE_OF
template <typename R>
inline constexpr RecordType record_type_v = RecordTypeOf<R>::value;

// Every type but Pad is in the list, once.
#define FPSCOPE_WIRE_COUNT_ONE(type, Struct, continues) +1
static_assert(0 FPSCOPE_WIRE_RECORDS(FPSCOPE_WIRE_COUNT_ONE) == static_cast<int>(RecordType::Count) - 1,
              "a record type is missing from FPSCOPE_WIRE_RECORDS");
#undef FPSCOPE_WIRE_COUNT_ONE

// Whether a record of this type continues its thread's tensor (see the list).
constexpr bool continues_tensor(RecordType type) {
  switch (type) {
#define FPSCOPE_WIRE_CONTINUES(t, Struct, continues) \
  case RecordType::t:                                \
    return continues;
    FPSCOPE_WIRE_RECORDS(FPSCOPE_WIRE_CONTINUES)
#undef FPSCOPE_WIRE_CONTINUES
    case RecordType::Pad:
    case RecordType::Count:
      break;
  }
  return false;
}

}  // namespace fpscope::wire
