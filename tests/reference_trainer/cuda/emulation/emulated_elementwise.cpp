// The CUDA kernels of elementwise.cu compiled for the host emulation (host_emulation.h).
#include "elementwise.cu"
