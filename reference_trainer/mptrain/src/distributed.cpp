// MPI start-up and the kernels' communicator (see distributed.h).
#include "distributed.h"

#include "errors.h"

#include <mpt/abi.h>

#include <climits>
#include <cstdlib>

#if defined(MPTRAIN_HAVE_MPI)
// The C interface only: Open MPI's and MPICH's C++ bindings would need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mptrain {

#if defined(MPTRAIN_HAVE_MPI)
namespace {

int mpi_allgather(void* /*context*/, const void* send, void* recv, size_t bytes) {
  // MPI counts are int: a rank's share of more than INT_MAX bytes (a 2 GiB tensor) is refused,
  // and the collective kernel reports a communication error (MPT_ERR_COMMUNICATION).
  if (bytes <= static_cast<size_t>(INT_MAX)) {
    return MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                         MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : 1;
  }
  return 1;
}

}  // namespace

DataParallel::DataParallel(TrainConfig& config) {
  if (!config.data_parallel) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw UsageError("--data-parallel: MPI_Init failed");
  started_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &config.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &config.world_size);
  if (config.batch_size < config.world_size) {
    throw UsageError("--batch-size " + std::to_string(config.batch_size) + " is smaller than the " +
                     std::to_string(config.world_size) + " ranks: each rank needs an image of every batch");
  }
  if (config.fault_rank && *config.fault_rank >= config.world_size) {
    throw UsageError("--fault-rank " + std::to_string(*config.fault_rank) + " is not a rank of this run (0 to " +
                     std::to_string(config.world_size - 1) + ")");
  }
  mpt_communicator comm{config.rank, config.world_size, nullptr, mpi_allgather};
  mpt_set_communicator(&comm);
}

DataParallel::~DataParallel() {
  if (!started_) return;
  mpt_set_communicator(nullptr);
  MPI_Finalize();
}

void DataParallel::abort(int status) const {
  if (started_) MPI_Abort(MPI_COMM_WORLD, status);
}

#else

DataParallel::DataParallel(TrainConfig& config) {
  if (config.data_parallel)
    throw UsageError("--data-parallel: this mptrain was built without MPI (install libopenmpi-dev and rebuild)");
}
DataParallel::~DataParallel() = default;
void DataParallel::abort(int) const {}

#endif

}  // namespace mptrain
