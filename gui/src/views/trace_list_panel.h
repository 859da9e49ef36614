// The left-hand panel: open traces (loading progress, errors, how each run ended), the comparison
// roles, and the shared selection with a button to clear it.
#pragma once

#include "selection.h"
#include "trace_set.h"

namespace fpscope::gui {

void draw_trace_list_panel(TraceSet& traces, Selection& selection);

}  // namespace fpscope::gui
