// The CUDA kernels of layers.cu compiled for the host emulation (host_emulation.h).
#include "layers.cu"
