// A stand-in for liblz4 when the machine has none: it writes valid LZ4 blocks
// made of one literal run (no matches), i.e. stored, not compressed. Any LZ4
// decoder reads them; FST readers keep working, files are just larger.
#include "lz4.h"

#include <cstring>

extern "C" int LZ4_compressBound(int inputSize) {
    if (inputSize < 0 || inputSize > 0x7E000000) return 0;
    return inputSize + inputSize / 255 + 16;
}

extern "C" int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity) {
    if (srcSize < 0 || dstCapacity < LZ4_compressBound(srcSize)) return 0;
    unsigned char* out = reinterpret_cast<unsigned char*>(dst);
    int length = srcSize;
    // Token: literal length in the high nibble (15 = more length bytes follow).
    *out++ = static_cast<unsigned char>((length >= 15 ? 15 : length) << 4);
    if (length >= 15) {
        int rest = length - 15;
        while (rest >= 255) { *out++ = 255; rest -= 255; }
        *out++ = static_cast<unsigned char>(rest);
    }
    std::memcpy(out, src, static_cast<size_t>(srcSize));
    out += srcSize;
    return static_cast<int>(out - reinterpret_cast<unsigned char*>(dst));
}
