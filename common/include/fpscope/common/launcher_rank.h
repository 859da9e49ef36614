// A traced process's rank in a multi-process run, as its launcher tells it through the environment.
// The injector reads it, docs/multirank.md lists the variables, and the trace stores what was found
// (processes.rank, .local_rank, .world_size).
//
// Launchers and the variables they set, first match wins:
//   Open MPI's mpirun      OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE
//   MPICH / Hydra, Intel   PMI_RANK, MPI_LOCALRANKID, PMI_SIZE
//   PyTorch (torchrun, by hand)  RANK, LOCAL_RANK, WORLD_SIZE
//   Slurm's srun           SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS
// A process with none of them is rank 0, with no local rank and no world size (-1).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace fpscope::common {

struct LauncherRank {
  int32_t rank = 0;
  int32_t local_rank = -1;
  int32_t world_size = -1;
  const char* source = nullptr;  // the variable the rank came from; nullptr: none was set
};

struct LauncherVariables {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

inline constexpr LauncherVariables kLauncherVariables[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

// A non-negative decimal int32, or -1 when the text is absent or not one.
inline int32_t parse_rank_number(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  int64_t v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
    if (v > INT32_MAX) return -1;
  }
  return static_cast<int32_t>(v);
}

// The rank from the first launcher whose rank variable holds a number. `lookup` is getenv or a
// stand-in (tests).
template <class Lookup>
LauncherRank launcher_rank(Lookup&& lookup) {
  LauncherRank found;
  for (const LauncherVariables& v : kLauncherVariables) {
    const int32_t rank = parse_rank_number(lookup(v.rank));
    if (rank < 0) continue;
    found.rank = rank;
    found.local_rank = parse_rank_number(lookup(v.local_rank));
    found.world_size = parse_rank_number(lookup(v.world_size));
    found.source = v.rank;
    return found;
  }
  return found;
}

inline LauncherRank launcher_rank() { return launcher_rank([](const char* name) { return std::getenv(name); }); }

}  // namespace fpscope::common
