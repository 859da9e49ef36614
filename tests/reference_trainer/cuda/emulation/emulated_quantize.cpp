// The CUDA kernels of quantize.cu compiled for the host emulation (host_emulation.h).
#include "quantize.cu"
