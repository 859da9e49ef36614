// The trace contract: every fact that the parts of fpscope must agree on, each stated once.
//
//   number_formats.h    element types, the counted cast formats and their limits, histogram range
//   tensor_role.h       tensor roles and slots, and the one byte that packs them in records
//   memory_categories.h what an allocation holds (weight, gradient, workspace, ...)
//   nvtx.h              the trainer's NVTX domain, categories and phase names
//   loss_scaler.h       the loss scaler's kernels, whose launches carry loss-scale events
//   collectives.h       kernels that combine tensors over ranks, and who made a NaN they return
//   allow_rules.h       rules for intended NaN/Inf (an attention mask's -inf), their syntax and match
//   environment.h       the variables `fpscope run` sets for the injector
//   run_end.h           how a run ended, its meta word, its label, whether it is a failure; how a
//                       trap's message begins
//   process_identity.h  which `fpscope run` wrote a trace or owns a ring, and whether it still runs
//   launcher_rank.h     a process's rank in a multi-process run, from its launcher's environment
//   tensor_names.h      how the PyTorch front ends name what an operator makes
//
// Beside these headers: fpscope/wire.h (the records in the ring), fpscope/ring.h (the ring's
// layout) and collector/schema/*.sql (the trace's tables and views, compiled in once as
// fpscope/embedded_sql.h). The injector, the collector, the analyzer, the GUI, the tools and the
// reference trainer include these instead of restating any of it (docs/architecture.md has the map).
#pragma once

#include "fpscope/contract/allow_rules.h"
#include "fpscope/contract/collectives.h"
#include "fpscope/contract/environment.h"
#include "fpscope/contract/launcher_rank.h"
#include "fpscope/contract/loss_scaler.h"
#include "fpscope/contract/memory_categories.h"
#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/nvtx.h"
#include "fpscope/contract/process_identity.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/contract/tensor_names.h"
#include "fpscope/contract/tensor_role.h"
