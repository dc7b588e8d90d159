# MetalSim kernels: each .metal file becomes a C++ source (tools/metalsim/metal_sim_gen.py) compiled
# with the MSL shim. The one place that states how kernels are compiled; used by the module
# (shaders/) and by the native tests (tests/kernels/).
#
#   mb_metalsim_kernels(<out-var> SHADERS <file.metal>... INCLUDE_DIRS <dir>... [DEPENDS <file>...])
#
# sets <out-var> to the generated sources, each carrying MB_KERNEL_FLAGS, and, with MB_SIM_RACECHECK, to
# their racecheck build: each generated source compiled once more (MB_SIM_RACECHECK defined: the kernels in
# namespace mbsim_racecheck) with the compiler's ThreadSanitizer instrumentation and line tables, whose
# calls src/metal/sim/racecheck.cpp answers (no sanitizer runtime is linked). The normal build is untouched.
set(MB_ROOT_DIR ${CMAKE_CURRENT_LIST_DIR}/..)

option(MB_SIM_RACECHECK "Also build MetalSim's kernels for the racecheck backend option" ON)
if(MB_SIM_RACECHECK)
    # Compile only (no sanitizer runtime needs to be installed): does the compiler instrument?
    include(CheckCXXSourceCompiles)
    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
    set(CMAKE_REQUIRED_FLAGS -fsanitize=thread)
    check_cxx_source_compiles("int f(int* p) { return *p; }" MB_HAVE_TSAN_INSTRUMENTATION)
    unset(CMAKE_REQUIRED_FLAGS)
    unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
    if(NOT MB_HAVE_TSAN_INSTRUMENTATION)
        message(STATUS "MetalSim racecheck: the compiler has no -fsanitize=thread; racecheck=1 will be refused")
        set(MB_SIM_RACECHECK OFF)
    endif()
endif()

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
        if(MB_SIM_RACECHECK)
            set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/metalsim/${shader_name}.racecheck.cpp)
            file(CONFIGURE OUTPUT ${wrapper} CONTENT
                 "// The racecheck build of ${shader_name} (cmake/MetalSimKernels.cmake).\n#define MB_SIM_RACECHECK 1\n#include \"${generated}\"\n")
            set_source_files_properties(${wrapper} PROPERTIES OBJECT_DEPENDS ${generated})
            list(APPEND racecheck_sources ${wrapper})
        endif()
    endforeach()
    set_source_files_properties(${sources} PROPERTIES COMPILE_OPTIONS "${MB_KERNEL_FLAGS}")
    if(MB_SIM_RACECHECK)
        set(racecheck_flags ${MB_KERNEL_FLAGS} -fsanitize=thread -g1)
        if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
            list(APPEND racecheck_flags --param=tsan-instrument-func-entry-exit=0)
        endif()
        set_source_files_properties(${racecheck_sources} PROPERTIES COMPILE_OPTIONS "${racecheck_flags}")
        list(APPEND sources ${racecheck_sources})
    endif()
    set(${out_var} ${sources} PARENT_SCOPE)
endfunction()
