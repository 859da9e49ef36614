// The trace contract: every fact that the parts of fpscope must agree on, each stated once.
//
//   number_formats.h    element types, the counted cast formats and their limits, histogram range
//   tensor_role.h       tensor roles and slots, and the one byte that packs them in records
//   scaling_recipes.h   the fp8 and microscaling recipes forecast, and the operands they quantize
//   memory_categories.h what an allocation holds (weight, gradient, workspace, ...)
//   nvtx.h              the trainer's NVTX domain, categories and phase names
//   loss_scaler.h       the loss scaler's kernels, whose launches carry loss-scale events
//   collectives.h       kernels that combine tensors over ranks, and who made a NaN they return
//   allow_rules.h       rules for intended NaN/Inf (an attention mask's -inf): their kinds and syntax
//   environment.h       the variables `fpscope run` sets for the injector
//   run_end.h           how a run ended, its meta word, its label, whether it is a failure; how a
//                       trap's message begins
//   tensor_names.h      how the PyTorch front ends name what an operator makes
//   wire.h              the records in the ring, each bound to its struct with its layout asserted
//   ring_layout.h       the ring's header, limits and sibling names
//
// Beside them, contract/schema/*.sql (the trace's tables and views, compiled in once as
// fpscope/contract/embedded_sql.h). The contract is header-only and does no I/O: what reads the
// environment, /proc or SQLite is in common/ (fpscope/common/). The injector, the collector, the
// analyzer, the GUI, the tools and the reference trainer include these instead of restating any of
// it (docs/architecture.md has the map).
#pragma once

#include "fpscope/contract/allow_rules.h"
#include "fpscope/contract/collectives.h"
#include "fpscope/contract/environment.h"
#include "fpscope/contract/loss_scaler.h"
#include "fpscope/contract/memory_categories.h"
#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/nvtx.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/contract/scaling_recipes.h"
#include "fpscope/contract/tensor_names.h"
#include "fpscope/contract/ring_layout.h"
#include "fpscope/contract/tensor_role.h"
#include "fpscope/contract/wire.h"
