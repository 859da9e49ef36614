// The injector exports its hooks and nothing else: no statistics, ring or C++ runtime symbols of
// its own leak into the traced program's symbol namespace.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>

namespace {

std::set<std::string> defined_dynamic_symbols(const std::string& library) {
  const std::string cmd = "nm -D --defined-only " + library;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::set<std::string> names;
  char line[1024];
  while (pipe && fgets(line, sizeof line, pipe.get())) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    const size_t space = s.rfind(' ');
    const std::string name = s.substr(space + 1);
    const char kind = space >= 1 ? s[space - 1] : '?';
    if (kind == 'T' || kind == 'W' || kind == 'D' || kind == 'B' || kind == 'V' || kind == 'i')
      names.insert(name.substr(0, name.find('@')));
  }
  return names;
}

TEST(Exports, OnlyTheHooksAndTheFrontEndApi) {
  const std::set<std::string> expected = {
      "mpt_launch", "mpt_alloc", "mpt_free", "mpt_host_written", "mpt_log_scalar", "mpt_log_text",
      "InitializeInjectionNvtx2", "InitializeInjectionNvtx2Preinject", "InitializeInjection",
      // fpscope/inject_api.h
      "fpscope_api_version", "fpscope_tracing", "fpscope_step_watched", "fpscope_range_push",
      "fpscope_range_pop", "fpscope_op_plan", "fpscope_op_begin", "fpscope_op_end",
      "fpscope_trap_message", "fpscope_alloc_seen", "fpscope_free_seen", "fpscope_relabel",
      "fpscope_report_writes", "fpscope_set_rank", "fpscope_memory_written", "fpscope_stop_reuse", "fpscope_log_scalar",
      "fpscope_log_text", "fpscope_front_end_failed", "fpscope_param_update", "fpscope_update_before",
      "fpscope_update_after", "fpscope_update_prune"};
  EXPECT_EQ(defined_dynamic_symbols(FPSCOPE_INJECT_LIBRARY), expected);
}

}  // namespace
