# MetalSim kernels: each .metal file becomes a C++ source (tools/metalsim/metal_sim_gen.py) compiled
# with the MSL shim. The one place that states how kernels are compiled; used by the module
# (shaders/) and by the native tests (tests/kernels/).
#
#   mb_metalsim_kernels(<out-var> SHADERS <file.metal>... INCLUDE_DIRS <dir>... [DEPENDS <file>...])
#
# sets <out-var> to the generated sources, each carrying MB_KERNEL_FLAGS.
set(MB_ROOT_DIR ${CMAKE_CURRENT_LIST_DIR}/..)

if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(MB_KERNEL_FLAGS -Wno-unknown-attributes -Xclang -ffloat16-excess-precision=none)
else()
    set(MB_KERNEL_FLAGS -Wno-attributes)
endif()
# Kernels use half everywhere; without F16C gcc converts every half through a libgcc call. Only
# where the build machine has it: MetalSim is a test device, built where it runs.
if(NOT MB_PORTABLE AND NOT CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64"
   AND EXISTS /proc/cpuinfo)
    file(READ /proc/cpuinfo MB_CPUINFO)
    if(MB_CPUINFO MATCHES " f16c")
        list(APPEND MB_KERNEL_FLAGS -mf16c)
    endif()
endif()
list(APPEND MB_KERNEL_FLAGS -ffp-contract=off -fsigned-char -fno-strict-aliasing -fwrapv -fno-math-errno
     -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable)

function(mb_metalsim_kernels out_var)
    cmake_parse_arguments(ARG "" "" "SHADERS;INCLUDE_DIRS;DEPENDS" ${ARGN})
    set(gen ${MB_ROOT_DIR}/tools/metalsim/metal_sim_gen.py)
    set(include_args)
    foreach(dir ${ARG_INCLUDE_DIRS})
        list(APPEND include_args -I ${dir})
    endforeach()
    set(sources)
    foreach(shader ${ARG_SHADERS})
        get_filename_component(shader_name ${shader} NAME)
        set(generated ${CMAKE_CURRENT_BINARY_DIR}/metalsim/${shader_name}.cpp)
        add_custom_command(
            OUTPUT ${generated}
            COMMAND ${Python_EXECUTABLE} ${gen} ${shader} -o ${generated} ${include_args}
            DEPENDS ${shader} ${ARG_DEPENDS} ${gen} ${MB_ROOT_DIR}/tools/metalsim/msl_parse.py
            COMMENT "MetalSim: generating ${shader_name}.cpp"
            VERBATIM)
        list(APPEND sources ${generated})
    endforeach()
    set_source_files_properties(${sources} PROPERTIES COMPILE_OPTIONS "${MB_KERNEL_FLAGS}")
    set(${out_var} ${sources} PARENT_SCOPE)
endfunction()
