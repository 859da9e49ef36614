// The CUDA backend's gemm.cpp compiled for the host emulation (host_emulation.h).
#include "gemm.cpp"
