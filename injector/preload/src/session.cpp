// Session: the process announcement, allocations, logged values and NVTX ranges. The launch path
// is launch.cpp and the files beside it (launch_path.h).
#include "session.h"

#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "fpscope/common/allow_rules.h"
#include "fpscope/common/launcher_rank.h"

namespace fpscope::inject {

namespace {
std::atomic<uint32_t> g_next_thread_number{1};
}  // namespace

uint32_t this_thread_number() {
  thread_local uint32_t number = new_thread_number();
  return number;
}

uint32_t new_thread_number() { return g_next_thread_number.fetch_add(1, std::memory_order_relaxed); }

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

namespace {

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string executable_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

}  // namespace

Session::Session(Options options, std::unique_ptr<RecordSink> sink)
    : options_(std::move(options)),
      intended_kinds_(common::allowed_kinds(options_.allow)),
      sink_(std::move(sink)),
      stats_workers_(options_.stats_threads > 0 ? options_.stats_threads : default_stats_threads(),
                     options_.stats_threads == 0),
      writer_(sink_.get()) {
  // A hit needs measured outputs to remember and measured inputs to recall.
  memo_on_.store(!options_.rescan_inputs && options_.measures_inputs() && options_.measures_outputs(),
                 std::memory_order_relaxed);
}

namespace {
std::mutex g_rank_mutex;
std::optional<common::LauncherRank> g_set_rank;
std::string g_set_rank_source;  // what g_set_rank.source points into
}  // namespace

common::LauncherRank process_rank() {
  {
    std::lock_guard lock(g_rank_mutex);
    if (g_set_rank) return *g_set_rank;
  }
  return common::launcher_rank();
}

void set_process_rank(const common::LauncherRank& rank, std::string source) {
  std::lock_guard lock(g_rank_mutex);
  g_set_rank_source = std::move(source);
  g_set_rank = rank;
  g_set_rank->source = g_set_rank_source.c_str();
}

void Session::announce() {
  const std::string exe = executable_path();
  const std::string described = options_.describe();
  const std::string host = host_name();
  const common::LauncherRank rank = process_rank();
  std::lock_guard lock(mutex_);
  wire::ProcessRecord r{};
  r.protocol = wire::kProtocolVersion;
  r.pid = getpid();
  r.start_ns = realtime_ns();
  r.mono_ns = monotonic_ns();
  r.exe = intern_locked(exe);
  r.options = intern_locked(described);
  r.rank = rank.rank;
  r.local_rank = rank.local_rank;
  r.world_size = rank.world_size;
  r.host = intern_locked(host);
  r.rank_source = rank.source ? intern_locked(rank.source) : 0;
  writer_.put(r, this_thread_number());
}

void Session::exiting() {
  if (memo_on_.load(std::memory_order_relaxed) && launches() > 0)
    injector_status("reused_input_stats", std::to_string(reused_inputs()));
  if (const uint64_t lent = stats_workers_.lent_scans()) injector_status("scans_on_program_threads", std::to_string(lent));
  if (const uint64_t helped = stats_workers_.helped_scans())
    injector_status("scans_on_helper_threads", std::to_string(helped));
  if (launches() > 0) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", static_cast<double>(own_ns()) / 1e6);
    injector_status("own_time_ms", ms);
  }
  wire::ProcessExitRecord r{};
  r.t_ns = monotonic_ns();
  std::lock_guard lock(mutex_);
  writer_.put(r, this_thread_number());
}

void Session::allocated(void* ptr, size_t bytes, int32_t device, int32_t category, const char* name,
                        uint64_t id, bool remembered, std::optional<bool> made_in_backward) {
  wire::AllocRecord r{};
  r.t_ns = monotonic_ns();
  r.id = id;
  r.bytes = bytes;
  r.address = reinterpret_cast<uintptr_t>(ptr);
  r.category = static_cast<uint8_t>(category);
  r.device = static_cast<uint8_t>(device);
  // Host and device memory alike: the address space is one (CUDA's unified addressing).
  if (memo_on_.load(std::memory_order_relaxed)) memo_.allocated(ptr, bytes, remembered);
  std::lock_guard lock(mutex_);
  r.name = intern_locked(name ? name : "");
  live_[ptr] = Allocation{id, bytes};
  // Under the same lock as live_: a free or a relabel from another thread finds it.
  if (made_in_backward) origins_[id] = Origin{category, *made_in_backward};
  writer_.put(r, this_thread_number());
}

uint64_t Session::allocation_seen(const void* ptr, uint64_t bytes, int32_t device, int32_t category,
                                  const char* name) {
  const uint64_t id = next_seen_id_.fetch_add(1, std::memory_order_relaxed);
  std::optional<bool> made_in_backward;
  if (options_.forecasts_recipes()) {
    thread_local std::string phase, layer;
    const Attribution where = front_end_attribution(&phase, &layer);
    made_in_backward = where.phase != nullptr && std::string_view(where.phase) == contract::kPhaseBackward;
  }
  // A front end's data (a batch it did not see made, numpy's memory) may be written behind its back.
  allocated(const_cast<void*>(ptr), bytes, device, category, name, id, category != MPT_CAT_DATA, made_in_backward);
  return id;
}

void Session::inherit_origin(uint64_t from, const std::vector<mpt_tensor>& outputs) {
  std::lock_guard lock(mutex_);
  const auto source = origins_.find(from);
  if (source == origins_.end()) return;
  if (!source->second.holds_weight()) return;
  for (const mpt_tensor& t : outputs)
    if (const auto it = origins_.find(t.id); it != origins_.end() && t.id != from) it->second.weight_copy = true;
}

contract::Operand Session::operand_of(uint64_t id) {
  std::lock_guard lock(mutex_);
  const auto it = origins_.find(id);
  if (it == origins_.end()) return contract::Operand::Activation;
  if (it->second.holds_weight()) return contract::Operand::Weight;
  return it->second.made_in_backward ? contract::Operand::Gradient : contract::Operand::Activation;
}

void Session::relabel(uint64_t id, int32_t category, const char* name) {
  wire::RelabelRecord r{};
  r.id = id;
  r.category = static_cast<uint8_t>(category);
  std::lock_guard lock(mutex_);
  if (const auto it = origins_.find(id); it != origins_.end()) it->second.category = category;
  r.name = intern_locked(name ? name : "");
  writer_.put(r, this_thread_number());
}

bool Session::watches_step(int64_t step) const { return options_.watches_step(step); }

uint64_t Session::reused_inputs() {
  std::lock_guard lock(mutex_);
  return memo_.hits() + device_inputs_followed_;
}

void Session::host_written(const void* data, size_t bytes) {
  if (memo_on_.load(std::memory_order_relaxed)) memo_.written(data, bytes);
}

void Session::written_anywhere() {
  if (memo_on_.load(std::memory_order_relaxed)) memo_.written_anywhere();
}

void Session::stop_reuse() {
  memo_on_.store(false, std::memory_order_relaxed);
  memo_.written_anywhere();
}

void Session::freed(void* ptr) {
  const int64_t t = monotonic_ns();
  if (memo_on_.load(std::memory_order_relaxed)) memo_.freed(ptr);
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours to report: allocated before tracing began
  wire::FreeRecord r{};
  r.t_ns = t;
  r.id = it->second.id;
  r.bytes = it->second.bytes;
  origins_.erase(it->second.id);
  live_.erase(it);
  writer_.put(r, this_thread_number());
}

void Session::log_scalar(const char* name, double value, int64_t step) {
  wire::ScalarRecord r{};
  r.t_ns = monotonic_ns();
  r.step = step;
  r.value = value;
  std::lock_guard lock(mutex_);
  r.name = intern_locked(name ? name : "");
  writer_.put(r, this_thread_number());
}

void Session::log_text(const char* key, const char* value) {
  wire::TextRecord r{};
  r.t_ns = monotonic_ns();
  std::lock_guard lock(mutex_);
  r.key = intern_locked(key ? key : "");
  r.value = intern_locked(value ? value : "");
  writer_.put(r, this_thread_number());
}

void Session::param_update(const char* name, int32_t dtype, int64_t step, uint64_t elements, uint64_t changed,
                           int64_t nonzero, int64_t lost, double applied_abs_sum, double applied_sq_sum,
                           double weight_sq_sum) {
  wire::ParamUpdateRecord r{};
  r.dtype = static_cast<uint8_t>(dtype);
  r.step = step;
  r.elements = elements;
  r.changed = changed;
  if (nonzero >= 0 && lost >= 0) {
    r.nonzero_from = wire::NonzeroFrom::Gradient;
    r.nonzero = static_cast<uint64_t>(nonzero);
    r.lost = static_cast<uint64_t>(lost);
  }
  r.applied_abs_sum = applied_abs_sum;
  r.applied_sq_sum = applied_sq_sum;
  r.weight_sq_sum = weight_sq_sum;
  std::lock_guard lock(mutex_);
  r.name = intern_locked(name ? name : "");
  writer_.put(r, this_thread_number());
}

void Session::injector_status(const std::string& name, const std::string& value) {
  wire::TextRecord r{};
  r.t_ns = monotonic_ns();
  std::lock_guard lock(mutex_);
  r.key = intern_locked(std::string(kInjectorStatusPrefix) + name);
  r.value = intern_locked(value);
  writer_.put(r, this_thread_number());
}

uint32_t Session::intern_string(std::string_view text, uint32_t thread) {
  std::lock_guard lock(mutex_);
  return writer_.intern(text, thread);
}

// The record arrives framed (cupti_wire.h sets type, slots and thread); the writer frames it again
// with the same values while it copies it into the ring.
void Session::publish_framed(const wire::RecordHeader* record) {
  if (record == nullptr || record->slots == 0) return;
  std::lock_guard lock(mutex_);
  writer_.put_framed(record);
}

uint32_t Session::domain_id_locked(const NvtxDomainInfo* domain) {
  return domain ? intern_locked(domain->name) : 0;
}

int Session::range_push(const NvtxDomainInfo* domain, const RangeEvent& event) {
  return push_range(this_thread_ranges(), this_thread_number(), domain, event);
}

int Session::range_pop(const NvtxDomainInfo* domain) {
  bool collect = false;
  const int depth = pop_range(this_thread_ranges(), this_thread_number(), domain, &collect);
  if (collect) poll_device(true);
  return depth;
}

int Session::front_end_range_push(const NvtxDomainInfo* domain, const RangeEvent& event) {
  std::lock_guard lock(front_end_mutex_);
  if (front_end_thread_ == 0) front_end_thread_ = this_thread_number();
  return push_range(front_end_ranges_, front_end_thread_, domain, event);
}

int Session::front_end_range_pop(const NvtxDomainInfo* domain) {
  bool collect = false;
  int depth;
  {
    std::lock_guard lock(front_end_mutex_);
    depth = pop_range(front_end_ranges_, front_end_thread_, domain, &collect);
  }
  if (collect) poll_device(true);
  return depth;
}

Attribution Session::front_end_attribution(std::string* phase, std::string* layer) {
  std::lock_guard lock(front_end_mutex_);
  const RangeStack& stack = front_end_ranges_.depth() > 0 ? front_end_ranges_ : this_thread_ranges();
  Attribution where = stack.attribution();
  if (where.phase) where.phase = (*phase = where.phase).c_str();
  if (where.layer) where.layer = (*layer = where.layer).c_str();
  return where;
}

int Session::push_range(RangeStack& stack, uint32_t thread, const NvtxDomainInfo* domain, const RangeEvent& event) {
  wire::NvtxPushRecord r{};
  r.t_ns = monotonic_ns();
  r.category = event.category;
  r.payload_kind = event.payload_kind;
  r.payload_i = event.payload_i;
  r.payload_f = event.payload_f;
  {
    std::lock_guard lock(mutex_);
    r.message = intern_locked(event.message);
    r.domain = domain_id_locked(domain);
    writer_.put(r, thread);
  }
  OpenRange range;
  range.domain = domain;
  range.trainer_domain = domain != nullptr && domain->trainer;
  range.category = event.category;
  if (event.payload_kind == 1) range.step = event.payload_i;
  else if (event.payload_kind == 2) range.step = static_cast<int64_t>(event.payload_f);
  range.message_id = r.message;
  range.message = std::string(event.message);
  return stack.push(std::move(range));
}

int Session::pop_range(RangeStack& stack, uint32_t thread, const NvtxDomainInfo* domain, bool* collect) {
  OpenRange closed;
  const int depth = stack.pop(domain, &closed);
  if (depth < 0) return depth;  // unbalanced pop: nothing was open in that domain
  wire::NvtxPopRecord r{};
  r.t_ns = monotonic_ns();
  {
    std::lock_guard lock(mutex_);
    r.domain = domain_id_locked(domain);
    writer_.put(r, thread);
  }
  // The end of a step or phase collects the device measurements queued in it.
  *collect = closed.trainer_domain && (closed.category == kStepCategory || closed.category == kPhaseCategory);
  return depth;
}

// A mark is an instant: a range that opens and closes at the same time, outside the stack.
void Session::mark(const NvtxDomainInfo* domain, const RangeEvent& event) {
  wire::NvtxPushRecord push{};
  push.t_ns = monotonic_ns();
  push.category = event.category;
  push.payload_kind = event.payload_kind;
  push.payload_i = event.payload_i;
  push.payload_f = event.payload_f;
  wire::NvtxPopRecord pop{};
  pop.t_ns = push.t_ns;
  std::lock_guard lock(mutex_);
  push.message = intern_locked(event.message);
  push.domain = pop.domain = domain_id_locked(domain);
  writer_.put(push, this_thread_number());
  writer_.put(pop, this_thread_number());
}

}  // namespace fpscope::inject
