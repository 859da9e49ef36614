// The sections of `fpscope report` and `fpscope compare`, built from libfpscope_analysis results.
#pragma once

#include "fpscope/analysis.h"
#include "output.h"

namespace fpscope::cli {

Section summary_section(const analysis::Trace& trace);
Section nonfinite_section(const analysis::Trace& trace);
Section why_section(const analysis::Trace& trace);
// view: which tensors the per-row range table shows (forward activations by default).
Section ranges_section(const analysis::Trace& trace, analysis::RangeView view = analysis::RangeView::Activations,
                       analysis::SideOutputs side_outputs = analysis::SideOutputs::Apart);
Section loss_scale_section(const analysis::Trace& trace);
Section memory_section(const analysis::Trace& trace);
Section ranks_section(const analysis::Trace& trace);
Section fp8_section(const analysis::Trace& trace);
Section learning_section(const analysis::Trace& trace);  // learning_section.cpp
// The parameters' updates of two runs side by side (learning_section.cpp).
Section updates_comparison_section(const analysis::Comparison& c);
std::vector<Section> comparison_sections(const analysis::Comparison& c);

}  // namespace fpscope::cli
