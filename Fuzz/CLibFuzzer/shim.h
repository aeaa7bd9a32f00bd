// libFuzzer's driver, linked by `-sanitize=fuzzer` (compiler-rt's FuzzerInterface.h declares it
// the same way). Declared here so that Swift calls it with the C calling convention.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
