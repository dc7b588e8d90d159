// GCC's <objc/runtime.h> defines object_getClass() inline by reading id->class_pointer, which clang
// rejects under the runtimes that allow ARC (there `id` is opaque). The syntax check never calls it,
// so GCC's inline body is compiled against the struct type instead and the name is declared plainly.
#define object_getClass mb_gcc_object_getClass
#define id struct objc_object *
#include_next <objc/runtime.h>
#undef id
#undef object_getClass
Class object_getClass(id object);
