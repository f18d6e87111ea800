// A main() for fuzz targets built without libFuzzer: runs LLVMFuzzerTestOneInput once per file argument, so a
// crashing input found by a fuzzer can be replayed under gdb or a sanitizer build.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    const std::string data = bytes.str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    std::cout << argv[i] << ": ok (" << data.size() << " bytes)\n";
  }
  return 0;
}
