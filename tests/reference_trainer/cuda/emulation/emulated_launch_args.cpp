// The CUDA backend's launch_args.cpp compiled for the host emulation (host_emulation.h).
#include "launch_args.cpp"
