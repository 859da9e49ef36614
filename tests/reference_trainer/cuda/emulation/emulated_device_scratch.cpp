// The CUDA backend's device_scratch.cpp compiled for the host emulation (host_emulation.h).
#include "device_scratch.cpp"
