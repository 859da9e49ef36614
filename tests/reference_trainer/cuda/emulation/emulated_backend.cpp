// The CUDA backend's backend.cpp compiled for the host emulation (host_emulation.h).
#include "backend.cpp"
