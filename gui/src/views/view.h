// The base of every view: a tab in the main window that draws its content from the open traces and
// the shared selection. One file per view; app.cpp keeps the list of views in tab order.
#pragma once

#include <memory>
#include <vector>

#include "selection.h"
#include "trace_set.h"

namespace fpscope::gui {

struct ViewContext {
  TraceSet& traces;
  Selection& selection;
  // Set by --bench-frames: the timeline pans by this fraction of its visible width this frame.
  double scripted_pan = 0;
};

class View {
 public:
  virtual ~View() = default;
  virtual const char* name() const = 0;   // as given to --view
  virtual const char* title() const = 0;  // the tab label
  virtual void draw(ViewContext& ctx) = 0;
};

std::unique_ptr<View> make_summary_view();
std::unique_ptr<View> make_timeline_view();
std::unique_ptr<View> make_ranges_view();
std::unique_ptr<View> make_loss_view();
std::unique_ptr<View> make_memory_view();
std::unique_ptr<View> make_events_view();
std::unique_ptr<View> make_fp8_view();
std::unique_ptr<View> make_updates_view();

// Every view, in tab order (app.cpp): the window's tabs, and the names --view accepts.
std::vector<std::unique_ptr<View>> make_views();

}  // namespace fpscope::gui
