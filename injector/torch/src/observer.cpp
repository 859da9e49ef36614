// libfpscope_torch-<version>.so: the PyTorch front end's operators, observed in C++ (one library for
// each torch the build finds).
//
// The Python front end (injector/torch/python/fpscope_torch) follows modules, steps, the loss and
// the optimizer; this library follows the operators. It registers a RecordFunction callback on the
// program's thread, so the dispatcher calls it around every operator with the operator's inputs
// and outputs, and hands each operator to the injector's C API (fpscope/inject_api.h) as the Python
// dispatch mode did, without a Python frame per operator. docs/pytorch.md, "How operators are seen",
// says which operators are kept and why; in short:
//   - an operator the dispatcher decomposes above autograd (CompositeImplicitAutograd: linear,
//     conv2d, flatten) is passed through: the operators it calls are seen instead;
//   - an operator that runs a kernel of its own is one launch, and nothing it calls inside that
//     kernel is seen (the Python dispatch mode saw exactly these);
//   - operators run inside intra-op parallel regions belong to the operator that started them.
//
// Memory: a storage is an allocation from the first operator that reads or makes it until the
// storage's memory is freed. Memory of the CPU allocator (nearly all of a CPU program's) has its
// deleter taken over (DataPtr's compare_exchange_deleter), so the free is reported when PyTorch
// frees it, on whatever thread that happens, before the allocator's own deleter runs. Other memory
// (numpy arrays, shared memory, CUDA's caching allocator) keeps its deleter, which PyTorch itself
// recognises in places (MapAllocator::fromDataPtr, stream recording): its storage is held weakly
// and its free is reported at the first operator after the storage is gone.
//
// The C functions at the end are the interface the Python front end loads with ctypes.
#include <Python.h>

#include <ATen/Parallel.h>
#include <ATen/Tensor.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/version.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/tensor_names.h"
#include "fpscope/contract/torch_operators.h"
#include "fpscope/inject_api.h"
#include "observer_memory.h"

#define FPSCOPE_TORCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace fpscope::torch_observer;

// [SECTION] Operators, worked out once each ---------------------------------------------------

struct OpInfo {
  std::string full_name;        // as the dispatcher names it: "aten::convolution"
  std::string name;             // without namespace and overload: "convolution"
  bool pass_through = false;    // decomposed above autograd: its callees are the operators
  bool view = false;            // returns only aliases of its inputs, writes none
  bool unmeasured = false;      // a view, or an operator that leaves its output uninitialised
  bool returns = false;         // the schema returns something (outputs() empty then means it threw)
  bool autocast_cpu = false;    // has an AutocastCPU / AutocastCUDA kernel: under autocast it casts its
  bool autocast_cuda = false;   // inputs and calls itself again, and that inner call is the launch
  std::vector<uint8_t> written; // per schema argument: 1 when the operator writes it
  // Per return in the schema: the name of a Tensor return ("indices" of sort's "(Tensor values,
  // Tensor indices)"), "" for an unnamed one or a return of another type.
  std::vector<std::string> return_names;
};

bool has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key) { return op.hasKernelForDispatchKey(key); }

// "c10d::allreduce_" is in namespace "c10d".
bool in_namespace(std::string_view full_name, std::string_view ns) {
  return full_name.size() > ns.size() + 2 && full_name.starts_with(ns) && full_name.substr(ns.size(), 2) == "::";
}

OpInfo make_info(const at::RecordFunction& fn) {
  OpInfo info;
  info.full_name = fn.name();
  const auto colon = info.full_name.rfind("::");
  info.name = colon == std::string::npos ? info.full_name : info.full_name.substr(colon + 2);
  const c10::optional<c10::OperatorName> name = fn.operator_name();
  c10::optional<c10::OperatorHandle> op;
  if (name) op = c10::Dispatcher::singleton().findOp(*name);
  if (!op) return info;  // not a registered operator: measured as it is
  using c10::DispatchKey;
  // The dispatcher's autograd key for CPU tensors runs an operator's CompositeImplicitAutograd kernel
  // (before any Autograd kernel) unless the operator has a kernel of its own for AutogradCPU, CPU or
  // CompositeExplicitAutograd (OperatorEntry's computeDispatchTableEntry, 1.13).
  info.pass_through = has_kernel(*op, DispatchKey::CompositeImplicitAutograd) &&
                      !has_kernel(*op, DispatchKey::AutogradCPU) && !has_kernel(*op, DispatchKey::CPU) &&
                      !has_kernel(*op, DispatchKey::CompositeExplicitAutograd) &&
                      !has_kernel(*op, DispatchKey::CompositeExplicitAutogradNonFunctional);
  info.autocast_cpu = has_kernel(*op, DispatchKey::AutocastCPU);
  info.autocast_cuda = has_kernel(*op, DispatchKey::AutocastCUDA);
  const c10::FunctionSchema& schema = op->schema();
  for (const c10::Argument& a : schema.arguments())
    info.written.push_back(a.alias_info() != nullptr && a.alias_info()->isWrite() ? 1 : 0);
  const auto& returns = schema.returns();
  info.returns = !returns.empty();
  info.view = info.returns;
  for (const c10::Argument& r : returns)
    if (r.alias_info() == nullptr || r.alias_info()->isWrite()) info.view = false;
  // Only the overloads that write no argument (`_unsafe_view.out` copies into its `out`).
  const bool writes = std::find(info.written.begin(), info.written.end(), 1) != info.written.end();
  for (std::string_view v : fpscope::contract::kUnannotatedViewOperators)
    if (info.name == v && !writes) info.view = true;
  for (const c10::Argument& r : returns)
    info.return_names.push_back(r.type()->kind() == c10::TypeKind::TensorType ? r.name() : std::string());
  info.unmeasured = info.view;
  for (std::string_view u : fpscope::contract::kUninitializedOperators)
    if (info.name == u) info.unmeasured = true;
  for (std::string_view ns : fpscope::contract::kUnmeasuredNamespaces)
    if (in_namespace(info.full_name, ns)) info.unmeasured = true;
  return info;
}

// By the name's address: the dispatcher's RecordFunction names an operator by its schema's string,
// one per overload, for the life of the registration (the name is compared too: a registration
// that ended leaves its address to other strings).
std::unordered_map<const char*, std::unique_ptr<OpInfo>> g_ops;

bool unwatched(std::string_view full_name) {
  for (std::string_view ns : fpscope::contract::kUnwatchedNamespaces)
    if (in_namespace(full_name, ns)) return true;
  return false;
}

// Null for a record that is not an operator (the autograd engine's evaluate_function ranges share
// the operators' scope: those are never kept, their names are the record's own strings) or is one
// left out (contract/torch_operators.h).
const OpInfo* info_of(const at::RecordFunction& fn) {
  const char* name = fn.name();
  auto it = g_ops.find(name);
  if (it != g_ops.end() && it->second->full_name == name) return it->second.get();
  if (!fn.operator_name() || unwatched(name)) return nullptr;
  auto& slot = g_ops[name];
  slot = std::make_unique<OpInfo>(make_info(fn));
  return slot.get();
}

// Under autocast, an operator with an autocast kernel casts its inputs (_to_copy) and calls itself
// again with autocast off for the call: the casts and that inner call are the launches, as a
// dispatch mode below autocast sees them.
bool autocast_passes_through(const OpInfo& info) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return (info.autocast_cpu && at::autocast::is_autocast_enabled(at::kCPU)) ||
         (info.autocast_cuda && at::autocast::is_autocast_enabled(at::kCUDA));
#else  // one function per device type before 2.4
  return (info.autocast_cpu && at::autocast::is_cpu_enabled()) || (info.autocast_cuda && at::autocast::is_enabled());
#endif
}

// [SECTION] The program's place: layer, phase, step ---------------------------------------------

struct Place {
  uint32_t layer = 0;  // index into g_layers; 0 is "no layer"
  int32_t output_category = MPT_CAT_ACTIVATION;
};
Place g_place;
std::vector<std::string> g_layers{""};
std::unordered_map<std::string, uint32_t> g_layer_ids{{"", 0}};

struct PairHash {
  size_t operator()(const std::pair<const void*, uint32_t>& k) const {
    return std::hash<const void*>()(k.first) * 31 + k.second;
  }
};
// The injector's plan for an operator name in a layer, for the current step.
std::unordered_map<std::pair<const void*, uint32_t>, int, PairHash> g_plans;
// What an operator makes in a layer is named after both: "conv1.convolution".
std::unordered_map<std::pair<const void*, uint32_t>, std::string, PairHash> g_made_by;

int plan_of(const OpInfo& info) {
  auto [it, fresh] = g_plans.try_emplace({&info, g_place.layer}, 0);
  if (fresh) it->second = fpscope_op_plan(info.name.c_str());
  return it->second;
}

const std::string& made_by(const OpInfo& info) {
  auto [it, fresh] = g_made_by.try_emplace({&info, g_place.layer});
  if (fresh) {
    const std::string& layer = g_layers[g_place.layer];
    it->second = layer.empty() ? info.name : layer + std::string(fpscope::contract::kNameSeparator) + info.name;
  }
  return it->second;
}

// [SECTION] One operator ------------------------------------------------------------------------------

// Operators the callback handed to the injector and has not ended, on this thread: what runs inside
// one is part of it.
thread_local int t_depth = 0;

PyObject* g_trap_exception = nullptr;  // raised in the program's thread at a trap
std::atomic<unsigned long> g_program_thread{0};  // that thread's Python identity

struct Operator : at::ObserverContext {
  const OpInfo* info = nullptr;
  fpscope_op* op = nullptr;
  bool measured = false;
  std::vector<std::pair<at::Tensor, bool>> inputs;  // (tensor, written)
  std::vector<mpt_tensor> descriptors;
  std::vector<uint8_t> flags;
  std::vector<at::Tensor> keep;  // contiguous copies measured in place of strided tensors
};

int32_t dtype_of(c10::ScalarType s) {
  switch (s) {
    case c10::ScalarType::Float: return MPT_DTYPE_F32;
    case c10::ScalarType::Half: return MPT_DTYPE_F16;
    case c10::ScalarType::BFloat16: return MPT_DTYPE_BF16;
    case c10::ScalarType::Int: return MPT_DTYPE_I32;
    case c10::ScalarType::Long: return MPT_DTYPE_I64;
    case c10::ScalarType::Byte:
    case c10::ScalarType::Bool: return MPT_DTYPE_U8;
    case c10::ScalarType::Double: return MPT_DTYPE_F64;
    // The 8-bit floats, where this torch has them (2.1: e4m3fn and e5m2; 2.2: fnuz; 2.7: e8m0fnu).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    case c10::ScalarType::Float8_e4m3fn: return MPT_DTYPE_E4M3;
    case c10::ScalarType::Float8_e5m2: return MPT_DTYPE_E5M2;
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
    case c10::ScalarType::Float8_e4m3fnuz: return MPT_DTYPE_E4M3FNUZ;
    case c10::ScalarType::Float8_e5m2fnuz: return MPT_DTYPE_E5M2FNUZ;
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
    case c10::ScalarType::Float8_e8m0fnu: return MPT_DTYPE_E8M0;
#endif
    default: return -1;
  }
}

bool measured_dtype(c10::ScalarType s) {
  const int32_t d = dtype_of(s);
  return d >= 0 && fpscope::contract::is_measured(static_cast<fpscope::contract::Dtype>(d));
}

// The mpt_tensor of `t`. A non-contiguous float tensor is measured through a contiguous copy kept
// by the operator; a written tensor the injector does not read where it lies is reported written.
mpt_tensor describe(Operator& o, const at::Tensor& t, const Allocation* entry, bool written) {
  mpt_tensor d{};
  const int32_t dtype = dtype_of(t.scalar_type());
  const int64_t ndim = t.dim();
  const int64_t kept = std::min<int64_t>(ndim, MPT_MAX_DIMS);
  for (int64_t i = 0; i < kept; ++i) d.shape[i] = t.size(i);
  for (int64_t i = MPT_MAX_DIMS; i < ndim; ++i) d.shape[MPT_MAX_DIMS - 1] *= t.size(i);  // fold the rest
  d.ndim = static_cast<int32_t>(kept);
  d.dtype = dtype;
  d.device = t.is_cuda() ? MPT_DEVICE_CUDA : MPT_DEVICE_CPU;
  d.id = entry ? entry->ident : 0;
  d.name = entry ? entry->name.c_str() : nullptr;
  bool copied = false;
  if (entry && entry->uninitialized) {
    // counted, not measured: its values mean nothing yet
  } else if (dtype >= 0 && t.layout() == c10::kStrided && !without_data_of_its_own(t) && t.numel() > 0) {
    if (t.is_contiguous()) {
      d.data = t.data_ptr();
    } else if (measured_dtype(t.scalar_type())) {
      c10::NoGradGuard no_grad;
      o.keep.push_back(t.contiguous());
      d.data = o.keep.back().data_ptr();
      copied = true;
    }
  }
  if (written && (d.data == nullptr || copied)) report_written(t);
  return d;
}

// Each place of `v` that can hold a tensor, in order: one for a single value, one an element for a
// list (Tensor[], Tensor?[]). `fn` gets the tensor, undefined where the place holds none (None, a
// value of another type).
template <typename Fn>
void for_each_place(const c10::IValue& v, Fn&& fn) {
  static const at::Tensor kNone;
  auto one = [&fn](const c10::IValue& e) {
    if (e.isTensor()) fn(e.toTensor());
    else fn(kNone);
  };
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) fn(t);
  } else if (v.isList()) {  // Tensor?[]
    for (const c10::IValue& e : v.toListRef()) one(e);
  } else {
    one(v);
  }
}

// The tensors of `v`. A Python number the program wrote into the call (`x * 0.5`) reaches the
// operator as a 0-dim "wrapped number" tensor: it is not one of the program's tensors, and the
// dispatch mode sees it as the number it is, so it is left out here too.
void collect(const c10::IValue& v, bool written, std::vector<std::pair<at::Tensor, bool>>& out) {
  for_each_place(v, [&](const at::Tensor& t) {
    if (t.defined() && !t.unsafeGetTensorImpl()->is_wrapped_number()) out.emplace_back(t, written);
  });
}

// An operator whose outputs will have no data of their own whatever its inputs: one called while a
// Python dispatch mode is active (torch.compile's FakeTensorMode as it traces a graph, or a mode of
// the program's), whose result is what the mode makes of it; the mode's own call of the operator,
// made with the mode set aside, is the launch if there is one. And a factory operator asked for
// meta tensors (device="meta"), which have no memory.
bool makes_no_data(const at::RecordFunction& fn) {
  if (c10::impl::TorchDispatchModeTLS::stack_len() > 0) return true;
  for (const c10::IValue& v : fn.inputs())
    if (v.isDevice() && v.toDevice().is_meta()) return true;
  return false;
}

void begin_operator(Operator& o);

std::unique_ptr<at::ObserverContext> start_operator(const at::RecordFunction& fn) {
  const OpInfo* known = info_of(fn);
  if (known == nullptr || known->pass_through || autocast_passes_through(*known) || makes_no_data(fn)) return nullptr;
  const OpInfo& info = *known;
  collect_weakly_held();
  ++t_depth;  // from here on, operators this one runs (the copies below too) are its own
  struct Undo {  // an exception before the operator is handed over leaves nothing behind
    bool armed = true;
    ~Undo() {
      if (armed) --t_depth;
    }
  } undo;
  auto o = std::make_unique<Operator>();
  o->info = &info;
  const c10::ArrayRef<const c10::IValue> args = fn.inputs();
  for (size_t i = 0; i < args.size(); ++i) collect(args[i], i < info.written.size() && info.written[i], o->inputs);
  for (const auto& [t, w] : o->inputs)
    if (without_data_of_its_own(t)) return nullptr;
  begin_operator(*o);
  undo.armed = false;
  return o;
}

// Hands `o` (its info and inputs set) to the injector: adopts and describes its inputs.
void begin_operator(Operator& o) {
  const OpInfo& info = *o.info;
  std::vector<Allocation*> entries;
  entries.reserve(o.inputs.size());
  for (const auto& [t, w] : o.inputs)
    entries.push_back(adopt(t, MPT_CAT_DATA, data_name, /*unknown_writes=*/true));
  const int32_t n = static_cast<int32_t>(o.inputs.size());
  const int plan = info.unmeasured ? 0 : plan_of(info);
  if (plan == 0) {
    o.op = fpscope_op_begin(info.name.c_str(), nullptr, n, nullptr, 0);
    return;
  }
  o.measured = true;
  o.descriptors.reserve(o.inputs.size());
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    o.descriptors.push_back(describe(o, o.inputs[i].first, entries[i], o.inputs[i].second));
    o.flags.push_back(o.inputs[i].second ? 1 : 0);
  }
  // A factory operator (randn, zeros) has no input tensor, yet its output is measured: the injector
  // reads a null `inputs` as "counted, not measured", so an empty list is passed as a real address.
  static const mpt_tensor no_inputs{};
  static const uint8_t no_flags = 0;
  o.op = fpscope_op_begin(info.name.c_str(), n ? o.descriptors.data() : &no_inputs, n,
                          n ? o.flags.data() : &no_flags, 1);
}

// The frame that called the operator that trapped: the trap is raised there, at its next instruction.
PyFrameObject* g_trap_frame = nullptr;

// A trace function for one event: the first instruction the trapping frame runs after the
// operator returns raises the trap, so that the traceback ends at the line that holds the operator
// (`y = x / d` as for `torch.log(...)`). An asynchronous exception instead fires where the
// interpreter next looks: after `return x / d` has left the frame, or at the next line's call.
int trap_at_next_instruction(PyObject*, PyFrameObject* frame, int what, PyObject*) {
  if ((what != PyTrace_LINE && what != PyTrace_OPCODE) || frame != g_trap_frame) return 0;
  PyEval_SetTrace(nullptr, nullptr);
  Py_CLEAR(g_trap_frame);
  PyErr_SetNone(g_trap_exception);
  return -1;
}

// The folder of a module's file, with a trailing slash ("" when it cannot be told).
std::string module_folder(const char* module) {
  PyObject* m = PyImport_ImportModule(module);
  PyObject* file = m ? PyObject_GetAttrString(m, "__file__") : nullptr;
  const char* path = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : nullptr;
  std::string folder = path ? std::string(path) : std::string();
  Py_XDECREF(file);
  Py_XDECREF(m);
  PyErr_Clear();
  const size_t slash = folder.rfind('/');
  return slash == std::string::npos ? std::string() : folder.substr(0, slash + 1);
}

// The program's own frame that led to the operator: the innermost one outside PyTorch's and the
// front end's files (a scripted module's operators run under PyTorch's `_call_impl`). Borrowed.
PyFrameObject* programs_frame(PyFrameObject* frame) {
  static const std::string torch_folder = module_folder("torch");
  static const std::string front_end_folder = module_folder("fpscope_torch");
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = code && PyUnicode_Check(code->co_filename) ? PyUnicode_AsUTF8(code->co_filename) : nullptr;
    Py_XDECREF(code);
    const std::string_view path = file ? file : "";
    const auto under = [&](const std::string& folder) { return !folder.empty() && path.rfind(folder, 0) == 0; };
    if (!under(torch_folder) && !under(front_end_folder)) return frame;
    PyFrameObject* back = PyFrame_GetBack(frame);  // a new reference; the chain holds it as well
    Py_XDECREF(back);
    frame = back;
  }
  return nullptr;
}

void raise_trap() {
  if (g_trap_exception == nullptr || !Py_IsInitialized()) return;
  const unsigned long thread = g_program_thread.load();
  if (thread == 0) return;
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyFrameObject* frame = PyThread_get_thread_ident() == thread ? programs_frame(PyEval_GetFrame()) : nullptr;
  // On the program's thread, with no tracer of the program's own (a debugger, coverage): in the
  // calling frame. Otherwise as soon as the program's thread runs Python again.
  if (frame != nullptr && PyThreadState_Get()->c_tracefunc == nullptr &&
      PyObject_SetAttrString(reinterpret_cast<PyObject*>(frame), "f_trace_opcodes", Py_True) == 0) {
    Py_XSETREF(g_trap_frame, reinterpret_cast<PyFrameObject*>(Py_NewRef(frame)));
    PyEval_SetTrace(trap_at_next_instruction, nullptr);
  } else {
    PyErr_Clear();
    PyThreadState_SetAsyncExc(thread, g_trap_exception);
  }
  PyGILState_Release(gil);
}

// Ends the operator `o`, which returned `returned`; returns what fpscope_op_end() said.
int end_operator(Operator& o, const std::vector<c10::IValue>& returned) {
  const OpInfo& info = *o.info;
  if (info.returns && returned.empty()) {  // it threw
    for (const auto& [t, w] : o.inputs)
      if (w) report_written(t);
    fpscope_op* op = std::exchange(o.op, nullptr);
    fpscope_op_end(op, nullptr, 0, 1);
    return 0;
  }
  // What the operator wrote: its written arguments, then what it returned besides.
  std::vector<at::Tensor> outputs;
  for (const auto& [t, w] : o.inputs)
    if (w) outputs.push_back(t);
  // Each returned tensor with its place among the returns (contract/tensor_names.h): a return is
  // one place whether or not it holds a tensor, a list one place an element; and its return in
  // the schema (none for a list's element).
  struct Returned {
    at::Tensor tensor;
    size_t place;
    std::optional<size_t> schema_return;
  };
  std::vector<Returned> made;
  size_t place = 0;
  for (size_t r = 0; r < returned.size(); ++r) {
    const bool list = returned[r].isTensorList() || returned[r].isList();
    for_each_place(returned[r], [&](const at::Tensor& t) {
      if (t.defined()) made.push_back({t, place, list ? std::nullopt : std::optional<size_t>(r)});
      ++place;
    });
  }
  // The outputs' names, by where each was returned; a written argument it did not return is named
  // as the first return would be (it is rarely new: its storage was seen as an input).
  std::vector<const Returned*> returned_as(outputs.size(), nullptr);
  for (const Returned& m : made) {
    size_t i = 0;
    while (i < outputs.size() && outputs[i].unsafeGetTensorImpl() != m.tensor.unsafeGetTensorImpl()) ++i;
    if (i == outputs.size()) {
      outputs.push_back(m.tensor);
      returned_as.push_back(&m);
    } else if (returned_as[i] == nullptr) {
      returned_as[i] = &m;
    }
  }
  const int32_t category = g_place.output_category;
  // A new storage is named after what made it; one the operator returned after its first return
  // also after that return: "norm.native_group_norm" for the output, then
  // "norm.native_group_norm.out1" and ".out2" for the mean and the reciprocal deviation;
  // "sort.indices" where the schema names it.
  auto name_of_output = [&info, &returned_as](size_t i) {
    return [&info, m = returned_as[i]](const at::Tensor&) {
      using namespace fpscope::contract;
      if (m == nullptr || m->place == 0) return made_by(info);
      const std::string& named = m->schema_return && *m->schema_return < info.return_names.size()
                                     ? info.return_names[*m->schema_return]
                                     : std::string();
      return made_by(info) + std::string(kNameSeparator) +
             (named.empty() ? std::string(kUnnamedOutputPrefix) + std::to_string(m->place) : named);
    };
  };
  int result = 0;
  if (!o.measured) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const at::Tensor& t = outputs[i];
      Allocation* entry = adopt(t, category, name_of_output(i), false);
      if (!info.view) {
        if (entry) entry->uninitialized = info.unmeasured;
        report_written(t);  // its tensors are not handed over: what it wrote is reported instead
      }
    }
    result = fpscope_op_end(std::exchange(o.op, nullptr), nullptr, static_cast<int32_t>(outputs.size()), 0);
  } else {
    std::vector<mpt_tensor> descriptors;
    descriptors.reserve(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const at::Tensor& t = outputs[i];
      Allocation* entry = adopt(t, category, name_of_output(i), false);
      if (entry) entry->uninitialized = false;  // the operator wrote it
      descriptors.push_back(describe(o, t, entry, true));
    }
    result = fpscope_op_end(std::exchange(o.op, nullptr), descriptors.data(), static_cast<int32_t>(descriptors.size()), 0);
  }
  return result;
}

// The callbacks' state (the operator table, plans, names, the place) belongs to the program's
// thread; the autograd engine's device threads, which run backward for CUDA tensors while that
// thread waits in backward(), take this lock as well, as do the calls from Python.
std::mutex& operators_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

// Runs `work`; an exception in it must not reach PyTorch (which would log and drop it) or ctypes
// (which would end the program): tracing stops in the process, said once by the injector (meta
// injector.failure), the operators go on untraced, and the caller cleans up.
template <typename Work>
void guarded(Work&& work) {
  try {
    work();
  } catch (const std::exception& e) {
    fpscope_front_end_failed("the PyTorch operator observer", e.what());
  } catch (...) {
    fpscope_front_end_failed("the PyTorch operator observer", "an exception that is not a std::exception");
  }
}

// TorchDynamo is compiling: its operators are not the program's (fpscope_torch_compiling).
std::atomic<bool> g_compiling{false};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (t_depth > 0 || g_compiling.load(std::memory_order_relaxed) || at::in_parallel_region()) return nullptr;
  std::lock_guard<std::mutex> lock(operators_mutex());
  std::unique_ptr<at::ObserverContext> context;
  guarded([&] { context = start_operator(fn); });
  return context;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (context == nullptr) return;
  auto& o = *static_cast<Operator*>(context);
  int result = 0;
  {
    std::lock_guard<std::mutex> lock(operators_mutex());
    guarded([&] { result = end_operator(o, fn.outputs()); });
    // An operator the failure left unended is ended as failed.
    if (o.op != nullptr) fpscope_op_end(std::exchange(o.op, nullptr), nullptr, 0, 1);
    --t_depth;
  }
  if (result == FPSCOPE_TRAPPED) raise_trap();
}

at::CallbackHandle g_handle = 0;

}  // namespace

// [SECTION] The interface the Python front end loads ------------------------------------------------

// The torch version these headers are, "1.13": the library runs only in that torch.
FPSCOPE_TORCH_EXPORT const char* fpscope_torch_built_for(void) {
  return C10_STRINGIZE(TORCH_VERSION_MAJOR) "." C10_STRINGIZE(TORCH_VERSION_MINOR);
}

// Starts (1) or stops (0) observing the operators of the calling thread.
FPSCOPE_TORCH_EXPORT void fpscope_torch_watch(int on) {
  static const bool fork_safe = [] { return pthread_atfork(lock_memory_for_fork, unlock_memory_after_fork,
                                                          unlock_memory_after_fork) == 0; }();
  (void)fork_safe;
  if (on) g_program_thread = PyThread_get_thread_ident();
  if (on && g_handle == 0) {
    g_handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                              .needsInputs(true)
                                              .needsOutputs(true)
                                              .scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
}

// TorchDynamo begins (1) or ends (0) compiling. Operators are not watched meanwhile, on any thread.
// A flag rather than the callback taken off: compilation may run inside the autograd engine (a
// backward compiled when first needed), which puts back the thread's callbacks as they were when
// backward() began once it is done.
FPSCOPE_TORCH_EXPORT void fpscope_torch_compiling(int on) { g_compiling.store(on != 0, std::memory_order_relaxed); }

namespace {

// The tensor at a TensorImpl address Python handed over (`tensor._cdata`), held while in use.
at::Tensor tensor_at(intptr_t impl) {
  return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::unsafe_reclaim_from_nonowning(
      reinterpret_cast<c10::TensorImpl*>(impl)));
}

// What the launches of compiled graphs are, by name ("compiled Net.forward").
std::unordered_map<std::string, std::unique_ptr<OpInfo>> g_graphs;

}  // namespace

// A graph torch.compile made is called, with tensors `inputs` (TensorImpl addresses, `n` of them):
// it is one launch named `name`, its inputs measured now, and what it runs inside (the operators
// Inductor calls between its fused kernels) is its own until fpscope_torch_graph_end() on this
// thread. Returns the launch, or null when nothing is watched (then call the graph alone).
FPSCOPE_TORCH_EXPORT void* fpscope_torch_graph_begin(const char* name, const intptr_t* inputs, int32_t n) {
  if (t_depth > 0 || g_handle == 0 || g_compiling.load(std::memory_order_relaxed) || name == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(operators_mutex());
  Operator* launch = nullptr;
  guarded([&] {
    std::unique_ptr<OpInfo>& info = g_graphs[name];
    if (!info) {
      info = std::make_unique<OpInfo>();
      info->full_name = info->name = name;
      info->returns = true;
    }
    collect_weakly_held();
    auto o = std::make_unique<Operator>();
    o->info = info.get();
    for (int32_t i = 0; i < n; ++i) collect(tensor_at(inputs[i]), false, o->inputs);
    for (const auto& [t, w] : o->inputs)
      if (without_data_of_its_own(t)) return;
    begin_operator(*o);
    ++t_depth;
    launch = o.release();
  });
  return launch;
}

// The graph begun as `graph` returned `outputs` (`n` TensorImpl addresses; none when it raised).
FPSCOPE_TORCH_EXPORT void fpscope_torch_graph_end(void* graph, const intptr_t* outputs, int32_t n) {
  if (graph == nullptr) return;
  std::unique_ptr<Operator> o(static_cast<Operator*>(graph));
  int result = 0;
  {
    std::lock_guard<std::mutex> lock(operators_mutex());
    --t_depth;
    guarded([&] {
      std::vector<c10::IValue> returned;
      for (int32_t i = 0; i < n; ++i) returned.emplace_back(tensor_at(outputs[i]));
      result = end_operator(*o, returned);
    });
    if (o->op != nullptr) fpscope_op_end(std::exchange(o->op, nullptr), nullptr, 0, 1);
  }
  if (result == FPSCOPE_TRAPPED) raise_trap();
}

// The innermost layer open ("" for none) and the category of what operators make now.
FPSCOPE_TORCH_EXPORT void fpscope_torch_place(const char* layer, int32_t output_category) {
  std::lock_guard<std::mutex> lock(operators_mutex());
  guarded([&] {
    const std::string name = layer ? layer : "";
    auto [it, fresh] = g_layer_ids.try_emplace(name, static_cast<uint32_t>(g_layers.size()));
    if (fresh) g_layers.push_back(name);
    g_place.layer = it->second;
  });
  g_place.output_category = output_category;
}

// A new optimizer step: the injector's plans are asked again.
FPSCOPE_TORCH_EXPORT void fpscope_torch_new_step(void) {
  std::lock_guard<std::mutex> lock(operators_mutex());
  g_plans.clear();
}

// The front end reports writes (fpscope_report_writes() said 1), or stopped doing so.
FPSCOPE_TORCH_EXPORT void fpscope_torch_reports_writes(int on) { g_reports_writes = on != 0; }

// Operators ran unwatched: no storage is known to be uninitialised any more.
FPSCOPE_TORCH_EXPORT void fpscope_torch_initialized_all(void) {
  std::lock_guard<std::mutex> lock(memory_mutex());
  for (auto& [context, entry] : live()) entry.uninitialized = false;
}

// Says what the storage of the tensor at `impl` (a Tensor's _cdata) holds, relabelling it when it
// was first seen as something else.
FPSCOPE_TORCH_EXPORT void fpscope_torch_label(intptr_t impl, int32_t category, const char* name) {
  if (impl == 0) return;
  std::lock_guard<std::mutex> lock(operators_mutex());
  guarded([&] {
    const at::Tensor t = tensor_at(impl);
    const std::string wanted = name ? name : "";
    Allocation* entry = adopt(t, category, [&wanted](const at::Tensor&) { return wanted; }, false);
    if (entry == nullptr || (entry->category == category && entry->name == wanted)) return;
    entry->category = category;
    entry->name = wanted;
    fpscope_relabel(entry->ident, category, wanted.c_str());
  });
}

// The exception class raised in the program at a trap (called with no arguments); holds a reference.
FPSCOPE_TORCH_EXPORT void fpscope_torch_trap_exception(PyObject* exception) {
  Py_XINCREF(exception);
  Py_XDECREF(g_trap_exception);
  g_trap_exception = exception;
}
