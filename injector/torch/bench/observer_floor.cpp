// What a C++ observer of PyTorch's dispatcher costs before it measures anything: a global
// RecordFunction callback that asks for every operator's inputs and outputs (forward and
// backward), walks them and touches each tensor's data pointer and size. Loaded into the example
// CNN by observer_floor.sh, which compares its wall time with the plain program's; the counterpart
// of dispatch_floor.py for the Python dispatch mode. Not part of the build: it needs libtorch-dev.
#include <ATen/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cstdio>

namespace {

std::atomic<long> g_calls{0}, g_tensors{0}, g_elements{0};

template <typename Values>
void touch_tensors(const Values& values) {
  for (const c10::IValue& v : values) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) continue;
    g_tensors.fetch_add(1, std::memory_order_relaxed);
    g_elements.fetch_add(t.numel(), std::memory_order_relaxed);
    volatile const void* data = t.data_ptr();  // what a front end hands to the statistics
    (void)data;
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  touch_tensors(fn.inputs());
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) { touch_tensors(fn.outputs()); }

}  // namespace

extern "C" void observer_floor_install() {
  at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                            .needsInputs(true)
                            .needsOutputs(true)
                            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

extern "C" void observer_floor_report() {
  std::fprintf(stderr, "observer: %ld operator calls, %ld tensors, %ld elements\n", g_calls.load(), g_tensors.load(),
               g_elements.load());
}
