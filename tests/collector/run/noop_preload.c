/* Stands in for libfpscope_inject.so in the `fpscope run` tests that need no injector: a shared
 * library that can be preloaded and does nothing. */
int fpscope_test_noop_preload_marker = 1;
