// The GPU statistics kernels (stats_kernels.cu) compiled for the host emulation.
#include "stats_kernels.cu"
