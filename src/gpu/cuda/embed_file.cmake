# cmake -DINPUT=file -DOUTPUT=file.cc -DSYMBOL=name [-DTEXT=ON] -P embed_file.cmake
# Writes a C++ source defining `extern "C" const unsigned char SYMBOL[]` with
# the bytes of INPUT (NUL-terminated when TEXT is set, as cuModuleLoadData
# wants PTX) and `extern "C" const unsigned long SYMBOL_size`, the byte count
# without that NUL.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
if(TEXT)
  string(APPEND hex "00")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Break the initializer into lines of 16 bytes for the compiler's sake.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by embed_file.cmake; do not edit.\n"
  "extern \"C\" alignas(16) const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n"
  "extern \"C\" const unsigned long ${SYMBOL}_size = ${size};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
