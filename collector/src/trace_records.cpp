// The trace writer's record handlers: one switch from record type to handler, generated from the
// wire's record list (FPSCOPE_WIRE_RECORDS), and what each record becomes in the trace. A tensor's
// records are assembled per producer thread (records of one thread arrive in order; threads
// interleave), and written as one `tensors` row. The handlers of what a launch's numerics lost (fp8
// forecast, narrowing stores, parameter updates) are in trace_records_numerics.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "fpscope/contract/nvtx.h"
#include "trace_writer_impl.h"

namespace fpscope {
namespace {

// The record viewed as R, or nullptr if its slots cannot hold an R.
template <typename R>
const R* view(const wire::RecordHeader* h) {
  return h->slots * wire::kSlotBytes >= sizeof(R) ? reinterpret_cast<const R*>(h) : nullptr;
}

uint8_t role_slot_of(const wire::TensorStatsRecord& s) { return contract::pack_role_slot(s.role, s.slot); }

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

std::string shape_json(const wire::TensorStatsRecord& s) {
  std::string out = "[";
  const int ndim = s.ndim < 6 ? s.ndim : 6;
  for (int i = 0; i < ndim; ++i) {
    if (i) out += ',';
    append_int(out, s.shape[i]);
  }
  out += ']';
  return out;
}

const char* range_kind_name(RangeKind k) {
  switch (k) {
    case RangeKind::Step: return "step";
    case RangeKind::Phase: return "phase";
    case RangeKind::Layer: return "layer";
    case RangeKind::Range: break;
  }
  return "range";
}

const char* nonfinite_kind_name(wire::NonfiniteKind k) {
  switch (k) {
    case wire::NonfiniteKind::NaN: return "nan";
    case wire::NonfiniteKind::PosInf: return "+inf";
    case wire::NonfiniteKind::NegInf: return "-inf";
  }
  return "nan";
}

// CUpti_ActivityMemcpyKind's names, by value.
const char* memcpy_kind_name(uint8_t kind) {
  static const char* const kNames[] = {"unknown", "htod", "dtoh", "htoa", "atoh", "atoa",
                                       "atod",    "dtoa", "dtod", "htoh", "ptop"};
  return kind < sizeof kNames / sizeof kNames[0] ? kNames[kind] : "unknown";
}

const char* scale_event_name(wire::ScaleEvent e) {
  switch (e) {
    case wire::ScaleEvent::Growth: return "growth";
    case wire::ScaleEvent::Backoff: return "backoff";
    case wire::ScaleEvent::Unchanged: break;
  }
  return "unchanged";
}

void bind_step(sql::Statement& st, int i, int64_t step) { step < 0 ? st.bind_null(i) : st.bind(i, step); }

}  // namespace

// [SECTION] Dispatch --------------------------------------------------------------------------------

void TraceWriter::Impl::dispatch(const wire::RecordHeader* h) {
  using T = wire::RecordType;
  // A thread's tensor is complete once that thread sends anything but the tensor's own records.
  if (h->type != T::Pad && !wire::continues_tensor(h->type)) {
    ThreadState& ts = thread_state(h->thread);
    if (ts.tensor.active) flush_tensor(ts.tensor);
  }
  // One case per entry of the wire's record list: the record viewed as its struct, to its handler.
  bool ok = true;
  switch (h->type) {
    case T::Pad: break;
#define FPSCOPE_DISPATCH(type, Struct, continues)            \
  case T::type:                                              \
    if (const auto* record = view<wire::Struct>(h)) {        \
      handle(*record);                                       \
    } else {                                                 \
      ok = false;                                            \
    }                                                        \
    break;
    FPSCOPE_WIRE_RECORDS(FPSCOPE_DISPATCH)
#undef FPSCOPE_DISPATCH
    default: ++counts.unknown_records; break;
  }
  if (!ok) ++counts.malformed_records;
  // Work of the process's own: anything but its start, its configuration, its ranges and its exit.
  if (src != nullptr && !src->active && h->type != T::Pad && h->type != T::String && h->type != T::Process &&
      h->type != T::Text && h->type != T::NvtxPush && h->type != T::NvtxPop && h->type != T::ProcessExit) {
    src->active = true;
    src->ranges_while_idle.clear();
  }
}

ThreadState& TraceWriter::Impl::thread_state(uint32_t thread) {
  Source& s = *src;
  if (s.last_thread_state && s.last_thread == thread) return *s.last_thread_state;
  s.last_thread = thread;
  s.last_thread_state = &s.threads[thread];  // unordered_map keeps element addresses stable
  return *s.last_thread_state;
}

// [SECTION] Sources ---------------------------------------------------------------------------------

void TraceWriter::Impl::select_source(uint32_t index) {
  if (src != nullptr && src->index == index) return;
  if (sources.size() <= index) sources.resize(index + 1);
  if (!sources[index]) {
    sources[index] = std::make_unique<Source>();
    sources[index]->index = index;
    sources[index]->id_base = int64_t{index} << kSourceIdShift;
  }
  src = sources[index].get();
}

int64_t TraceWriter::Impl::sid(uint32_t wire_string) {
  if (wire_string == 0) return kEmptyStringId;
  std::vector<int64_t>& ids = src->string_ids;
  if (wire_string < ids.size() && ids[wire_string] != 0) return ids[wire_string];
  // Referred to before (or without) its String record: an id of its own, named at finish if the
  // text never comes (add_missing_strings).
  const int64_t id = next_string_id++;
  awaiting_text.insert(id);
  if (wire_string >= (1u << 24)) return id;
  ids.resize(std::max<std::size_t>(ids.size(), wire_string + 1));
  return ids[wire_string] = id;
}

// [SECTION] Strings, process, meta ------------------------------------------------------------------

void TraceWriter::Impl::handle(const wire::StringRecord& r) {
  const std::size_t room = r.h.slots * wire::kSlotBytes - offsetof(wire::StringRecord, bytes);
  if (r.id == 0 || r.length > room || r.length > wire::kMaxStringBytes) {
    ++counts.malformed_records;
    return;
  }
  const std::string_view value(r.bytes, r.length);
  Source& s = *src;
  if (r.id < (1u << 24)) {
    if (s.strings.size() <= r.id) s.strings.resize(r.id + 1);
    s.strings[r.id] = value;
    if (s.string_ids.size() <= r.id) s.string_ids.resize(r.id + 1);
  }
  // One id per text in the whole trace: a text another process sent already keeps its id.
  auto [known, added] = string_by_text.try_emplace(std::string(value), 0);
  int64_t* mapped = r.id < s.string_ids.size() ? &s.string_ids[r.id] : nullptr;
  if (!added && (mapped == nullptr || *mapped == 0 || *mapped == known->second)) {
    if (mapped) *mapped = known->second;
  } else {
    // A new text, or one whose wire id was referred to before it arrived (its id is taken).
    const int64_t id = mapped && *mapped != 0 ? *mapped : next_string_id++;
    if (mapped) *mapped = id;
    if (added) known->second = id;
    insert_string.bind(1, id);
    insert_string.bind(2, value);
    insert_string.run();
    awaiting_text.erase(id);
    row_written();
    ++counts.strings;
  }
  if (value == contract::kTrainerNvtxDomain) s.mptrain_domain = r.id;
}

void TraceWriter::Impl::handle(const wire::ProcessRecord& r) {
  src->rank = r.rank;
  src->announced = true;
  sql::Statement& st = *insert_process;
  st.bind(1, src->index);
  st.bind(2, r.rank);
  r.local_rank >= 0 ? st.bind(3, r.local_rank) : st.bind_null(3);
  r.world_size >= 0 ? st.bind(4, r.world_size) : st.bind_null(4);
  st.bind(5, r.pid);
  st.bind(6, string_value(r.host));
  r.rank_source ? st.bind(7, string_value(r.rank_source)) : st.bind_null(7);
  st.bind(8, string_value(r.exe));
  st.bind(9, string_value(r.options));
  st.bind(10, r.start_ns);
  st.bind(11, r.mono_ns);
  st.run();
  row_written();
  if (src->index != 0) return;  // meta describes the first traced process; `processes` all of them
  set_meta("traced_protocol_version", std::to_string(r.protocol));
  describe_first_process();
}

// The program's own Text records are its configuration (config.<key>); those the injector sends
// about itself carry keys beginning "injector." (injector.cupti_status) and are stored as they are,
// for the first traced process; another process's under injector.<name>.process<N>, N its
// processes.id, since each process has its own.
void TraceWriter::Impl::handle(const wire::TextRecord& r) {
  const std::string key = string_value(r.key);
  if (key.rfind("injector.", 0) != 0) {
    set_meta("config." + key, string_value(r.value));
  } else {
    set_meta(src == nullptr || src->index == 0 ? key : key + ".process" + std::to_string(src->index), string_value(r.value));
  }
}

void TraceWriter::Impl::handle(const wire::TrapRecord& r) {
  trap.seen = true;
  trap.kernel_id = static_cast<uint64_t>(kernel_id(r.seq));
  trap.t_ns = r.t_ns;
  trap.message = string_value(r.reason);
  set_meta("trap.kernel_id", std::to_string(trap.kernel_id));
  set_meta("trap.rank", std::to_string(src->rank));
  set_meta("trap.t_ns", std::to_string(r.t_ns));
  set_meta("trap.message", trap.message);
}

// [SECTION] Kernels and tensors ---------------------------------------------------------------------

void TraceWriter::Impl::handle(const wire::LaunchRecord& r) {
  const int64_t id = kernel_id(r.seq), name_id = sid(r.kernel);
  const std::optional<int64_t> layer_id = r.layer ? std::optional(sid(r.layer)) : std::nullopt;
  const std::optional<int64_t> phase_id = r.phase ? std::optional(sid(r.phase)) : std::nullopt;
  const std::optional<int64_t> step = r.step < 0 ? std::nullopt : std::optional<int64_t>(r.step);
  kernel_rows.add()
      .set(1, id)
      .set(2, r.start_ns)
      .set(3, r.end_ns)
      .set(4, name_id)
      .set(5, layer_id)
      .set(6, phase_id)
      .set(7, step)
      .set(8, r.h.thread)
      .set(9, uint32_t{r.device})
      .set(10, r.status)
      .set(11, uint32_t{r.sampled})
      .set(12, src->rank);
  tensor_rollup.add_kernel(id, name_id, layer_id, phase_id, step);
  run_rollup.add_kernel(src->rank, r.start_ns, r.end_ns, step, r.sampled == 1);
  ++counts.kernels;
  if (kernel_rows.full()) flush_batch(kernel_rows, counts.kernels);
}

void TraceWriter::Impl::handle(const wire::TensorStatsRecord& r) {
  PendingTensor& t = thread_state(r.h.thread).tensor;
  if (t.active) flush_tensor(t);
  if (r.role != wire::Role::Input && r.role != wire::Role::Output) {
    ++counts.malformed_records;  // no row can say what it is; the records that follow it find none
    return;
  }
  t.active = true;
  t.row_id = next_tensor_id++;
  t.stats = r;
  t.kernel_id = kernel_id(r.seq);
  t.name_id = sid(r.name);
  t.uid = alloc_id(r.tensor_id);
  t.rank = src->rank;
  t.has_formats = false;
  t.has_histogram = false;
  t.intended = false;
  src->recent_tensors.remember(r.seq, role_slot_of(r), t.row_id);
}

void TraceWriter::Impl::flush_tensor(PendingTensor& t) {
  t.active = false;
  // Swapping keeps both histogram buffers alive for reuse.
  std::swap(ready_tensors[ready_count++], t);
  if (ready_count == kTensorsPerInsert) insert_ready_tensors();
}

// A full batch in one statement, fewer a row at a time (run_batch, write_rows_singly: a row SQLite
// refuses is a record that could not be written, as in flush_batch); the batch is empty again
// whatever happened but a failure of the storage.
void TraceWriter::Impl::insert_ready_tensors() {
  bool refused[kTensorsPerInsert] = {};
  const auto refuse = [&](int r) {
    refused[r] = true;
    ++counts.malformed_records;
    give_up_rollups("a record that could not be written");
  };
  const auto write_one = [&](int r) {
    bind_tensor(*insert_tensor, 1, ready_tensors[r]);
    insert_tensor->run();
  };
  if (ready_count == kTensorsPerInsert) {
    const bool undone_whole = near_full();
    sql::Statement& batch = undone_whole ? *insert_tensor_batch_undone_whole : *insert_tensor_batch;
    for (int r = 0; r < ready_count; ++r) bind_tensor(batch, 1 + r * kTensorColumns, ready_tensors[r]);
    run_batch(db, batch, ready_count, undone_whole, write_one, refuse);
  } else {
    write_rows_singly(0, ready_count, write_one, refuse);
  }
  for (int r = 0; r < ready_count; ++r) {
    if (refused[r]) continue;
    const PendingTensor& t = ready_tensors[r];
    tensor_rollup.add_tensor(t.row_id, t.kernel_id, t.stats, t.has_formats ? t.formats : nullptr, t.intended);
    run_rollup.add_tensor();
    row_written();
    ++counts.tensors;
  }
  ready_count = 0;
}

// Binds one tensor row at parameters first .. first + kTensorColumns - 1. Text is bound without a
// copy: the shape lives in a per-slot buffer and the histogram in the tensor, both until run().
void TraceWriter::Impl::bind_tensor(sql::Statement& st, int first, const PendingTensor& t) {
  const wire::TensorStatsRecord& s = t.stats;
  const int at = first - 1;
  st.bind(at + 1, t.row_id);
  st.bind(at + 2, t.kernel_id);
  st.bind_static(at + 3, contract::role_name(s.role));
  st.bind(at + 4, uint32_t{s.slot});
  t.uid ? st.bind(at + 5, t.uid) : st.bind_null(at + 5);
  st.bind(at + 6, t.name_id);
  st.bind(at + 7, uint32_t{s.dtype});
  st.bind(at + 8, shape_json(s));
  const uint64_t counters[] = {s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.subnormal};
  for (int i = 0; i < 6; ++i) st.bind(at + 9 + i, counters[i]);
  const double values[] = {s.min, s.max, s.absmax, s.min_nonzero, s.mean, s.rms};
  for (int i = 0; i < 6; ++i) st.bind(at + 15 + i, values[i]);  // NaN (no finite value) binds NULL
  for (int f = 0; f < wire::kFormatCount; ++f) {
    const wire::FormatCounts& c = t.formats[f];
    const uint64_t per_format[] = {c.overflow, c.underflow, c.subnormal, c.near_max};
    for (int i = 0; i < 4; ++i) {
      if (t.has_formats) st.bind(at + 21 + 4 * f + i, per_format[i]);
      else st.bind_null(at + 21 + 4 * f + i);
    }
  }
  if (t.has_histogram) {
    st.bind_static(at + 37, t.histogram);
    st.bind(at + 38, t.hist_below);
    st.bind(at + 39, t.hist_above);
  } else {
    for (int i = 37; i <= 39; ++i) st.bind_null(at + i);
  }
  st.bind(at + 40, t.rank);
}

void TraceWriter::Impl::flush_all_tensors() {
  for (auto& source : sources) {
    if (!source) continue;
    for (auto& [thread, ts] : source->threads)
      if (ts.tensor.active) flush_tensor(ts.tensor);
  }
  insert_ready_tensors();
}

std::optional<int64_t> TraceWriter::Impl::tensor_row(uint64_t seq, uint8_t role_slot) const {
  return src->recent_tensors.find(seq, role_slot);
}

// The thread's tensor in assembly if the record belongs to it, else nullptr.
static PendingTensor* pending_for(ThreadState& ts, uint64_t seq, uint8_t role_slot) {
  PendingTensor& t = ts.tensor;
  return t.active && t.stats.seq == seq && role_slot_of(t.stats) == role_slot ? &t : nullptr;
}

void TraceWriter::Impl::handle(const wire::TensorFormatsRecord& r) {
  if (PendingTensor* t = pending_for(thread_state(r.h.thread), r.seq, r.role_slot)) {
    std::memcpy(t->formats, r.formats, sizeof t->formats);
    t->has_formats = true;
    return;
  }
  auto row = tensor_row(r.seq, r.role_slot);  // its tensor left assembly already: update its row
  if (!row) {
    ++counts.unmatched_events;
    return;
  }
  insert_ready_tensors();
  update_tensor_formats->bind(1, *row);
  for (int f = 0; f < wire::kFormatCount; ++f) {
    const wire::FormatCounts& c = r.formats[f];
    const uint64_t per_format[] = {c.overflow, c.underflow, c.subnormal, c.near_max};
    for (int i = 0; i < 4; ++i) update_tensor_formats->bind(2 + 4 * f + i, per_format[i]);
  }
  update_tensor_formats->run();
  tensor_rollup.add_late_formats(*row, r.formats);
}

void TraceWriter::Impl::handle(const wire::TensorHistogramRecord& r) {
  const std::size_t room = r.h.slots * wire::kSlotBytes - sizeof(wire::TensorHistogramRecord);
  if (r.bins > room / sizeof(wire::HistogramBin)) {
    ++counts.malformed_records;
    return;
  }
  PendingTensor* pending = pending_for(thread_state(r.h.thread), r.seq, r.role_slot);
  std::string late_json;
  std::string& json = pending ? pending->histogram : late_json;
  // Formatted in place: the bins are bounded by the record's slots, 40 characters each at most.
  json.resize(2 + static_cast<std::size_t>(r.bins) * 40);
  char* out = json.data();
  char* const end = out + json.size();
  *out++ = '{';
  const unsigned char* at = reinterpret_cast<const unsigned char*>(&r) + sizeof r;
  for (uint32_t i = 0; i < r.bins; ++i) {
    wire::HistogramBin bin;
    std::memcpy(&bin, at + i * sizeof bin, sizeof bin);
    if (i) *out++ = ',';
    *out++ = '"';
    out = std::to_chars(out, end, bin.exponent).ptr;
    *out++ = '"';
    *out++ = ':';
    out = std::to_chars(out, end, bin.count).ptr;
  }
  *out++ = '}';
  json.resize(static_cast<std::size_t>(out - json.data()));
  if (pending) {
    pending->has_histogram = true;
    pending->hist_below = r.below;
    pending->hist_above = r.above;
    return;
  }
  auto row = tensor_row(r.seq, r.role_slot);
  if (!row) {
    ++counts.unmatched_events;
    return;
  }
  insert_ready_tensors();
  update_tensor_histogram->bind(1, *row);
  update_tensor_histogram->bind(2, json);
  update_tensor_histogram->bind(3, r.below);
  update_tensor_histogram->bind(4, r.above);
  update_tensor_histogram->run();
}

void TraceWriter::Impl::handle(const wire::NonfiniteRecord& r) {
  auto row = tensor_row(r.seq, r.role_slot);
  if (!row) {
    ++counts.unmatched_events;
    return;
  }
  sql::Statement& st = *insert_nonfinite;
  st.bind(1, *row);
  st.bind(2, kernel_id(r.seq));
  st.bind(3, std::string_view(nonfinite_kind_name(r.kind)));
  st.bind(4, r.first_index);
  // The whole pattern, fp64's 64 bits as SQLite's signed integer (two's complement).
  st.bind(5, static_cast<int64_t>(uint64_t{r.first_bits_high} << 32 | r.first_bits));
  st.bind(6, uint32_t{r.origin});
  st.bind(7, uint32_t{r.allowed});
  st.bind(8, src->rank);
  st.run();
  row_written();
  ++counts.nonfinite;
  run_rollup.add_nonfinite(src->rank, r.allowed);
  // The statements take `allowed = 1` for a rule's cover.
  if (r.allowed != 1) return;
  // Its values count as intended in the tensor summaries: still in assembly, or already rolled up.
  if (PendingTensor* t = pending_for(thread_state(r.h.thread), r.seq, r.role_slot)) {
    t->intended = true;
    return;
  }
  insert_ready_tensors();
  tensor_rollup.add_late_intended(*row);
}

void TraceWriter::Impl::handle(const wire::DumpRecord& r) {
  auto row = tensor_row(r.seq, r.role_slot);
  const std::string& file = string_value(r.path);
  if (!row || file.empty()) {
    ++counts.unmatched_events;
    return;
  }
  // The injector names the file inside the dump folder; the trace stores it from the trace's folder.
  const std::string prefix = dump_folder.empty() ? std::string() : dump_folder + "/";
  const bool already_relative_to_trace = !prefix.empty() && file.compare(0, prefix.size(), prefix) == 0;
  insert_dump->bind(1, *row);
  insert_dump->bind(2, already_relative_to_trace || file[0] == '/' ? file : prefix + file);
  insert_dump->run();
  row_written();
  ++counts.dumps;
}

// [SECTION] NVTX ranges -----------------------------------------------------------------------------

void TraceWriter::Impl::handle(const wire::NvtxPushRecord& r) {
  ThreadState& ts = thread_state(r.h.thread);
  RangeKind kind = RangeKind::Range;
  if (src->mptrain_domain != 0 && r.domain == src->mptrain_domain) {
    switch (static_cast<contract::NvtxCategory>(r.category)) {
      case contract::NvtxCategory::Step: kind = RangeKind::Step; break;
      case contract::NvtxCategory::Phase: kind = RangeKind::Phase; break;
      case contract::NvtxCategory::Layer: kind = RangeKind::Layer; break;
      default: break;
    }
  }
  std::optional<int64_t> step;
  if (kind == RangeKind::Step && r.payload_kind == 1) step = r.payload_i;
  if (kind == RangeKind::Step && r.payload_kind == 2 && std::isfinite(r.payload_f))
    step = static_cast<int64_t>(r.payload_f);
  ts.ranges.push_back({next_range_id++, r.t_ns, static_cast<int32_t>(ts.ranges.size()), kind, sid(r.message),
                       r.domain, r.domain ? sid(r.domain) : 0, step});
}

void TraceWriter::Impl::handle(const wire::NvtxPopRecord& r) {
  auto& ranges = thread_state(r.h.thread).ranges;
  // A pop closes the innermost open range of its domain on this thread.
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    if (it->domain != r.domain) continue;
    insert_range(*it, r.t_ns, r.h.thread, src->rank);
    if (!src->active) src->ranges_while_idle.push_back(it->row_id);
    ranges.erase(std::next(it).base());
    return;
  }
  ++counts.unmatched_events;
}

void TraceWriter::Impl::insert_range(const OpenRange& range, std::optional<int64_t> end_ns, uint32_t thread,
                                     int32_t rank) {
  range_rows.add()
      .set(1, range.row_id)
      .set(2, range.start_ns)
      .set(3, end_ns)
      .set(4, thread)
      .set(5, range.depth)
      .set_static(6, range_kind_name(range.kind))
      .set(7, range.name_id)
      .set(8, range.domain_id ? std::optional<int64_t>(range.domain_id) : std::nullopt)
      .set(9, range.step)
      .set(10, rank);
  const RangeRow row{rank, range.start_ns, end_ns, range.kind == RangeKind::Step, range.kind == RangeKind::Phase,
                     range.name_id, range.step};
  steps_rollup.add_range(row);
  run_rollup.add_range(row);
  ++counts.nvtx_ranges;
  if (range_rows.full()) flush_batch(range_rows, counts.nvtx_ranges);
}

// Ranges the program never closed (it ended inside them) are written with end_ns NULL.
void TraceWriter::Impl::close_open_ranges() {
  for (auto& source : sources) {
    if (!source) continue;
    for (auto& [thread, ts] : source->threads) {
      for (const OpenRange& r : ts.ranges) insert_range(r, std::nullopt, thread, source->rank);
      ts.ranges.clear();
    }
  }
}

// The innermost open step range on the thread, else on any thread.
std::optional<int64_t> TraceWriter::Impl::current_step(uint32_t thread) const {
  auto innermost_step = [](const ThreadState& ts) -> std::optional<int64_t> {
    for (auto it = ts.ranges.rbegin(); it != ts.ranges.rend(); ++it)
      if (it->kind == RangeKind::Step) return it->step;
    return std::nullopt;
  };
  if (auto own = src->threads.find(thread); own != src->threads.end())
    if (auto s = innermost_step(own->second)) return s;
  for (const auto& [t, ts] : src->threads)
    if (auto s = innermost_step(ts)) return s;
  return std::nullopt;
}

// [SECTION] Memory, loss scale, scalars -------------------------------------------------------------

void TraceWriter::Impl::handle(const wire::AllocRecord& r) {
  Allocation& a = src->live_allocations[r.id];
  a = {r.bytes, sid(r.name), r.category, r.device};
  const std::optional<int64_t> step = current_step(r.h.thread);
  a.row = next_memory_id++;
  memory_rows.add()
      .set(1, a.row)
      .set(2, r.t_ns)
      .set_static(3, "alloc")
      .set(4, alloc_id(r.id))
      .set(5, r.bytes)
      .set(6, uint32_t{r.category})
      .set(7, a.name_id)
      .set(8, uint32_t{r.device})
      .set(9, step)
      .set(10, src->rank);
  memory_rollup.add({a.row, src->rank, r.t_ns, step, r.category, true, static_cast<int64_t>(r.bytes), alloc_id(r.id),
                     a.name_id});
  run_rollup.add_memory_event(r.t_ns);
  ++counts.memory_events;
  if (memory_rows.full()) flush_batch(memory_rows, counts.memory_events);
}

void TraceWriter::Impl::handle(const wire::RelabelRecord& r) {
  auto it = src->live_allocations.find(r.id);
  if (it == src->live_allocations.end()) {
    ++counts.unmatched_events;
    return;
  }
  it->second.category = r.category;
  it->second.name_id = sid(r.name);
  if (std::optional<RowBatch::Row> row = memory_rows.pending_with_id(it->second.row)) {
    row->set(6, uint32_t{r.category}).set(7, it->second.name_id);  // not written yet
  } else {
    relabel_memory->bind(1, it->second.row).bind(2, uint32_t{r.category}).bind(3, it->second.name_id);
    relabel_memory->run();
  }
  memory_rollup.relabel(it->second.row, r.category, it->second.name_id);
}

void TraceWriter::Impl::handle(const wire::FreeRecord& r) {
  auto it = src->live_allocations.find(r.id);
  if (it == src->live_allocations.end()) {
    ++counts.unmatched_events;  // its Alloc was never received: nothing to attribute it to
    return;
  }
  const Allocation a = it->second;
  src->live_allocations.erase(it);
  const std::optional<int64_t> step = current_step(r.h.thread);
  const int64_t row = next_memory_id++;
  const uint64_t bytes = r.bytes ? r.bytes : a.bytes;
  memory_rows.add()
      .set(1, row)
      .set(2, r.t_ns)
      .set_static(3, "free")
      .set(4, alloc_id(r.id))
      .set(5, bytes)
      .set(6, uint32_t{a.category})
      .set(7, a.name_id)
      .set(8, uint32_t{a.device})
      .set(9, step)
      .set(10, src->rank);
  memory_rollup.add({row, src->rank, r.t_ns, step, a.category, false, static_cast<int64_t>(bytes), alloc_id(r.id),
                     a.name_id});
  run_rollup.add_memory_event(r.t_ns);
  ++counts.memory_events;
  if (memory_rows.full()) flush_batch(memory_rows, counts.memory_events);
}

void TraceWriter::Impl::handle(const wire::LossScaleRecord& r) {
  sql::Statement& st = *insert_loss_scale;
  st.bind(1, kernel_id(r.seq));
  st.bind(2, r.t_ns);
  bind_step(st, 3, r.step);
  st.bind(4, r.scale_before);
  st.bind(5, r.scale_after);
  st.bind(6, uint32_t{r.found_inf});
  st.bind(7, uint32_t{r.found_inf ? 1u : 0u});
  st.bind(8, std::string_view(scale_event_name(r.event)));
  st.bind(9, r.growth_tracker);
  st.bind(10, src->rank);
  st.run();
  row_written();
  ++counts.loss_scale;
}

void TraceWriter::Impl::handle(const wire::ScalarRecord& r) {
  sql::Statement& st = *insert_scalar;
  st.bind(1, r.t_ns);
  bind_step(st, 2, r.step);
  st.bind(3, sid(r.name));
  st.bind(4, r.value);  // NaN binds NULL
  st.bind(5, src->rank);
  st.run();
  row_written();
  ++counts.scalars;
}

// [SECTION] CUDA activity (CUPTI) -----------------------------------------------------------------

void TraceWriter::Impl::handle(const wire::CudaKernelRecord& r) {
  sql::Statement& st = *insert_cuda_kernel;
  st.bind(1, r.start_ns);
  st.bind(2, r.end_ns);
  st.bind(3, sid(r.name));
  st.bind(4, r.correlation_id);
  st.bind(5, r.device);
  st.bind(6, r.stream);
  for (int i = 0; i < 3; ++i) st.bind(7 + i, r.grid[i]);
  for (int i = 0; i < 3; ++i) st.bind(10 + i, r.block[i]);
  st.bind(13, src->rank);
  st.run();
  row_written();
  ++counts.cuda_activity;
}

void TraceWriter::Impl::handle(const wire::CudaMemcpyRecord& r) {
  sql::Statement& st = *insert_cuda_memcpy;
  st.bind(1, r.start_ns);
  st.bind(2, r.end_ns);
  st.bind(3, r.bytes);
  st.bind(4, std::string_view(memcpy_kind_name(r.copy_kind)));
  st.bind(5, uint32_t{r.src_kind});
  st.bind(6, uint32_t{r.dst_kind});
  st.bind(7, r.correlation_id);
  st.bind(8, r.device);
  st.bind(9, r.stream);
  st.bind(10, src->rank);
  st.run();
  row_written();
  ++counts.cuda_activity;
}

void TraceWriter::Impl::handle(const wire::CudaMemsetRecord& r) {
  sql::Statement& st = *insert_cuda_memset;
  st.bind(1, r.start_ns);
  st.bind(2, r.end_ns);
  st.bind(3, r.bytes);
  st.bind(4, r.value);
  st.bind(5, r.correlation_id);
  st.bind(6, r.device);
  st.bind(7, r.stream);
  st.bind(8, src->rank);
  st.run();
  row_written();
  ++counts.cuda_activity;
}

void TraceWriter::Impl::handle(const wire::CudaMemoryRecord& r) {
  if (r.operation != 1 && r.operation != 2) {
    ++counts.malformed_records;
    return;
  }
  sql::Statement& st = *insert_cuda_memory;
  st.bind(1, r.t_ns);
  st.bind(2, std::string_view(r.operation == 1 ? "alloc" : "free"));
  st.bind(3, r.bytes);
  st.bind(4, r.address);
  st.bind(5, uint32_t{r.memory_kind});
  st.bind(6, r.device);
  st.bind(7, r.stream);
  st.bind(8, src->rank);
  st.run();
  row_written();
  ++counts.cuda_activity;
}

}  // namespace fpscope
