// GNUstep Base on Debian is built for GCC's Objective-C runtime; with clang's blocks enabled its
// headers want libobjc2's <objc/blocks_runtime.h>, which Debian does not ship. The Blocks runtime
// declarations are the same ones libblocksruntime-dev installs as <Block.h>.
#include <Block.h>
