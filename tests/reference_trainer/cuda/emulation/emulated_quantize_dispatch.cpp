// The CUDA backend's quantize dispatch compiled against the host emulation.
#include "quantize_dispatch.cpp"
