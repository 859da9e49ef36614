# What the GPU checks need built, and how: sourced by gpu-checks.sh and gpu-checks-pack.sh.
#   gpu_build ROOT BUILD_DIR LOG_DIR   configures with CUDA (Release, no GUI) and builds the targets;
#                                      the logs go to LOG_DIR/configure.txt and LOG_DIR/build.txt

gpu_programs=(mpt_cuda_tests fpscope_gpu_tests cuda_kernels_benchmark gpu_stats_benchmark mptrain fpscope)
gpu_targets=("${gpu_programs[@]}" fpscope_torch_front_end)  # the programs and the PyTorch front end

gpu_build() {
  local root="$1" build="$2" logs="$3"
  cmake -S "$root" -B "$build" -DFPSCOPE_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DFPSCOPE_BUILD_GUI=OFF \
    > "$logs/configure.txt" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" --target "${gpu_targets[@]}" > "$logs/build.txt" 2>&1
}
