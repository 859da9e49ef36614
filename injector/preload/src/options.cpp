// Parsing and matching of the injector's selection options (see options.h, docs/injector.md).
#include "options.h"

#include "fpscope/common/allow_rules.h"
#include "fpscope/contract/environment.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <string_view>
#include <utility>

namespace fpscope::inject {
namespace {

bool glob_matches(const std::string& glob, const char* text) {
  return text != nullptr && fnmatch(glob.c_str(), text, 0) == 0;
}

bool parse_int(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// "A-B", "A" or "A-" (from A on), with 0 <= A <= B.
bool parse_step_range(std::string_view text, StepRange* out) {
  size_t dash = text.find('-');
  StepRange r;
  if (dash == std::string_view::npos) {
    if (!parse_int(text, &r.first)) return false;
    r.last = r.first;
  } else {
    if (!parse_int(text.substr(0, dash), &r.first)) return false;
    std::string_view rest = text.substr(dash + 1);
    if (!rest.empty() && !parse_int(rest, &r.last)) return false;
  }
  if (r.first < 0 || r.last < r.first) return false;
  *out = r;
  return true;
}

std::string bad_value(const char* var, const char* value, const char* accepted) {
  return std::string(var) + "='" + value + "' is not valid: expected " + accepted;
}

bool parse_every(const char* v, Options* o, std::string* error) {
  if (!parse_int(v, &o->every) || o->every < 1) {
    *error = bad_value(contract::env::kEvery, v, "a positive integer N (measure steps divisible by N)");
    return false;
  }
  return true;
}

bool parse_steps(const char* v, Options* o, std::string* error) {
  StepRange r;
  if (!parse_step_range(v, &r)) {
    *error = bad_value(contract::env::kSteps, v, "A-B (inclusive, 0 <= A <= B), A, or A-");
    return false;
  }
  o->steps = r;
  return true;
}

bool parse_ops(const char* v, Options* o, std::string* error) {
  for (std::string_view glob : split(v, ',')) {
    if (glob.empty()) {
      *error = bad_value(contract::env::kOps, v, "comma-separated globs without empty entries");
      return false;
    }
    o->ops.emplace_back(glob);
  }
  return true;
}

// One of a few named values: each accepted spelling in `choices` stands for its value.
template <typename Value, size_t N>
bool parse_choice(const char* var, const char* v, const std::pair<std::string_view, Value> (&choices)[N],
                  const char* accepted, Value* out, std::string* error) {
  for (const auto& [name, value] : choices) {
    if (name == v) {
      *out = value;
      return true;
    }
  }
  *error = bad_value(var, v, accepted);
  return false;
}

bool parse_tensors(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, TensorRoles> kRoles[] = {
      {"in", TensorRoles::Inputs}, {"out", TensorRoles::Outputs}, {"both", TensorRoles::Both}};
  return parse_choice(contract::env::kTensors, v, kRoles, "in, out or both", &o->tensors, error);
}

bool parse_stats(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, StatsLevel> kLevels[] = {{"full", StatsLevel::Full},
                                                                        {"basic", StatsLevel::Basic}};
  return parse_choice(contract::env::kStats, v, kLevels, "full or basic", &o->stats, error);
}

bool parse_recipes(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, RecipeTensors> kValues[] = {
      {"operands", RecipeTensors::Operands}, {"all", RecipeTensors::All}, {"none", RecipeTensors::None}};
  return parse_choice(contract::env::kRecipes, v, kValues, "operands, all or none", &o->recipes, error);
}

bool parse_updates(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, bool> kValues[] = {{"on", true}, {"off", false}};
  return parse_choice(contract::env::kUpdates, v, kValues, "on or off", &o->updates, error);
}

bool parse_stats_threads(const char* v, Options* o, std::string* error) {
  int64_t n = 0;
  if (!parse_int(v, &n) || n < 0 || n > 64) {
    *error = bad_value(contract::env::kStatsThreads, v,
                       "a number of threads from 1 to 64 (0: one per hardware thread, at most 4)");
    return false;
  }
  o->stats_threads = static_cast<int>(n);
  return true;
}

bool parse_rescan_inputs(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, bool> kValues[] = {{"1", true}, {"0", false}};
  return parse_choice(contract::env::kRescanInputs, v, kValues, "1 or 0", &o->rescan_inputs, error);
}

bool parse_trap(const char* v, Options* o, std::string* error) {
  static constexpr std::pair<std::string_view, TrapKind> kTraps[] = {
      {"nonfinite", TrapKind::Nonfinite}, {"nan", TrapKind::NaN}, {"inf", TrapKind::Inf}};
  return parse_choice(contract::env::kTrap, v, kTraps, "nonfinite, nan or inf", &o->trap, error);
}

bool parse_allow(const char* v, Options* o, std::string* error) {
  std::string why;
  if (common::parse_allow_rules(v, &o->allow, &why)) {
    o->allow_text = v;
    return true;
  }
  *error = std::string(contract::env::kAllow) + ": " + why;
  return false;
}

bool parse_dump_entry(std::string_view entry, DumpSpec* d, std::string* why) {
  size_t eq = entry.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == entry.size()) {
    *why = "'" + std::string(entry) + "' is not key=value";
    return false;
  }
  std::string_view key = entry.substr(0, eq), value = entry.substr(eq + 1);
  if (key == "op") d->op = value;
  else if (key == "layer") d->layer = value;
  else if (key == "tensor") d->tensor = value;
  else if (key == "step") {
    StepRange r;
    if (!parse_step_range(value, &r)) {
      *why = "step '" + std::string(value) + "' is not N or A-B";
      return false;
    }
    d->steps = r;
  } else {
    *why = "unknown key '" + std::string(key) + "' (keys: op, layer, step, tensor)";
    return false;
  }
  return true;
}

bool parse_dump(const char* v, Options* o, std::string* error) {
  std::string why;
  for (std::string_view entry : split(v, ',')) {
    if (!parse_dump_entry(entry, &o->dump, &why)) {
      *error = "FPSCOPE_DUMP='" + std::string(v) + "' is not valid: " + why +
               "; expected e.g. op=conv2d_backward_data,step=120";
      return false;
    }
  }
  o->dump.enabled = true;
  return true;
}

bool check_dump_dir(const char* dir, Options* o, std::string* error) {
  if (dir == nullptr || dir[0] != '/') {
    *error = std::string("FPSCOPE_DUMP is set but FPSCOPE_DUMP_DIR='") + (dir ? dir : "") +
             "' is not an absolute folder";
    return false;
  }
  struct stat st {};
  if (stat(dir, &st) != 0 && mkdir(dir, 0777) != 0 && errno != EEXIST) {
    *error = std::string("FPSCOPE_DUMP_DIR='") + dir + "' does not exist and cannot be created";
    return false;
  }
  o->dump_dir = dir;
  return true;
}

const char* roles_name(TensorRoles r) {
  return r == TensorRoles::Inputs ? "in" : r == TensorRoles::Outputs ? "out" : "both";
}
const char* trap_name(TrapKind t) {
  switch (t) {
    case TrapKind::Nonfinite: return "nonfinite";
    case TrapKind::NaN: return "nan";
    case TrapKind::Inf: return "inf";
    default: return "off";
  }
}

}  // namespace

bool DumpSpec::matches_launch(const char* kernel, const char* layer_name, int64_t step) const {
  if (!enabled) return false;
  if (!op.empty() && !glob_matches(op, kernel)) return false;
  if (!layer.empty() && !glob_matches(layer, layer_name)) return false;
  if (steps && !steps->contains(step)) return false;
  return true;
}

bool DumpSpec::matches_tensor(const char* name) const {
  return tensor.empty() || glob_matches(tensor, name);
}

bool Options::watches_step(int64_t step) const {
  if (dump.enabled && (!dump.steps || dump.steps->contains(step))) return true;
  if (!filters_steps()) return true;
  return step >= 0 && step % every == 0 && (!steps || steps->contains(step));
}

bool Options::selects(const char* kernel, const char* layer, int64_t step) const {
  if (filters_steps()) {
    if (step < 0) return false;
    if (step % every != 0) return false;
    if (steps && !steps->contains(step)) return false;
  }
  if (ops.empty()) return true;
  for (const std::string& glob : ops)
    if (glob_matches(glob, kernel) || glob_matches(glob, layer)) return true;
  return false;
}

std::string Options::describe() const {
  std::string s = "every=" + std::to_string(every) + " steps=";
  s += steps ? std::to_string(steps->first) + "-" +
                   (steps->last == std::numeric_limits<int64_t>::max() ? "" : std::to_string(steps->last))
             : "all";
  s += " ops=";
  if (ops.empty()) s += "*";
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? "," : "") + ops[i];
  s += std::string(" tensors=") + roles_name(tensors);
  s += std::string(" stats=") + (stats == StatsLevel::Full ? "full" : "basic");
  s += std::string(" recipes=") +
       (recipes == RecipeTensors::Operands ? "operands" : recipes == RecipeTensors::All ? "all" : "none");
  s += std::string(" updates=") + (updates ? "on" : "off");
  s += " stats_threads=" + (stats_threads == 0 ? std::string("auto") : std::to_string(stats_threads));
  if (rescan_inputs) s += " rescan_inputs=1";
  s += std::string(" trap=") + trap_name(trap);
  s += " dump=" + std::string(dump.enabled ? "on" : "off");
  s += " allow=" + allow_text;
  return s;
}

bool parse_options(const EnvLookup& env, Options* out, std::string* error) {
  Options o;
  std::string unused;
  common::parse_allow_rules(contract::kDefaultAllowRules, &o.allow, &unused);
  if (const char* v = env(contract::env::kRing)) o.ring_name = v;
  using Parser = bool (*)(const char*, Options*, std::string*);
  struct Field { const char* var; Parser parse; };
  static const Field fields[] = {
      {contract::env::kEvery, parse_every},     {contract::env::kSteps, parse_steps},
      {contract::env::kOps, parse_ops},         {contract::env::kTensors, parse_tensors},
      {contract::env::kStats, parse_stats},     {contract::env::kTrap, parse_trap},
      {contract::env::kDump, parse_dump},       {contract::env::kStatsThreads, parse_stats_threads},
      {contract::env::kAllow, parse_allow},     {contract::env::kRescanInputs, parse_rescan_inputs},
      {contract::env::kRecipes, parse_recipes}, {contract::env::kUpdates, parse_updates},
  };
  for (const Field& f : fields) {
    const char* v = env(f.var);  // an empty value means "not set", as `fpscope run` may pass one
    if (v != nullptr && *v != '\0' && !f.parse(v, &o, error)) return false;
  }
  if (o.dump.enabled && !check_dump_dir(env(contract::env::kDumpDir), &o, error)) return false;
  *out = std::move(o);
  return true;
}

}  // namespace fpscope::inject
