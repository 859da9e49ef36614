// Data parallelism over MPI: starts MPI for --data-parallel, learns the rank and the world size,
// and hands libmpt_kernels a communicator whose allgather is MPI_Allgather, so allreduce_sum runs
// through mpt_launch like any kernel (and a tool sees its inputs and outputs).
#pragma once

#include "config.h"

namespace mptrain {

// Started for a --data-parallel run (MPI_Init; config.rank and world_size filled), stopped on
// destruction (MPI_Finalize). Without --data-parallel it does nothing. Throws UsageError when the
// build has no MPI.
class DataParallel {
 public:
  explicit DataParallel(TrainConfig& config);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Ends every rank of the run after a failure on this one (MPI_Abort): the others would wait in
  // the next collective for ever.
  void abort(int status) const;

 private:
  bool started_ = false;
};

}  // namespace mptrain
