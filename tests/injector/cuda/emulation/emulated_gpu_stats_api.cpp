// The GPU statistics API (gpu_stats_api.cpp) compiled for the host emulation.
#include "gpu_stats_api.cpp"
