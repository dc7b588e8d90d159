#include "metal/apple/shader_library.h"

#include <dispatch/dispatch.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"
#include "metal/apple/embedded_shaders.h"
#include "metal/apple/objc_bridge.h"

namespace mb::metal {

namespace {

MTLFunctionConstantValues* constant_values(const std::vector<FunctionConstant>& constants) {
    MTLFunctionConstantValues* values = [MTLFunctionConstantValues new];
    for (const auto& c : constants) {
        // Each value in the width its kind declares in the shader.
        const bool b = c.i != 0;
        const int16_t i16 = static_cast<int16_t>(c.i);
        const int32_t i32 = static_cast<int32_t>(c.i);
        switch (c.kind) {
            case FunctionConstant::Kind::Bool: [values setConstantValue:&b type:MTLDataTypeBool atIndex:c.index]; break;
            case FunctionConstant::Kind::Int16:
                [values setConstantValue:&i16 type:MTLDataTypeShort atIndex:c.index]; break;
            case FunctionConstant::Kind::Int32:
                [values setConstantValue:&i32 type:MTLDataTypeInt atIndex:c.index]; break;
            case FunctionConstant::Kind::Float:
                [values setConstantValue:&c.f type:MTLDataTypeFloat atIndex:c.index]; break;
        }
    }
    return values;
}

}  // namespace

ShaderLibrary::ShaderLibrary(id<MTLDevice> device) : device_(device) {
    for (size_t i = 0; i < kMetalShaderFamilyCount; ++i) {
        Family f;
        f.name = kMetalShaderFamilies[i].name;
        f.source = kMetalShaderFamilies[i].source;
        families_.push_back(f);
    }
}

std::vector<std::string> ShaderLibrary::families() const {
    std::vector<std::string> out;
    for (const Family& f : families_) out.push_back(f.name);
    return out;
}

FamilyResult ShaderLibrary::compile_one(size_t i) {
    const auto start = std::chrono::steady_clock::now();
    id<MTLLibrary> library = nil;
    std::string error;
    @autoreleasepool {
        NSError* ns_error = nil;
        NSString* source = [NSString stringWithUTF8String:families_[i].source];
        library = [device_ newLibraryWithSource:source options:nil error:&ns_error];
        if (!library) error = describe(ns_error);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mutex_);
    Family& f = families_[i];
    f.done = true;
    f.library = library;
    f.error = error;
    f.compile_ms = ms;
    if (library) {
        for (NSString* name in library.functionNames) kernel_family_[utf8(name)] = i;
    }
    return {f.name, library != nil, f.error, ms};
}

void ShaderLibrary::compile(const std::vector<std::string>& families,
                            const std::function<void(const FamilyResult&)>& done) {
    std::vector<size_t> todo;
    std::vector<FamilyResult> known;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const std::string& name : families) {
            size_t i = 0;
            while (i < families_.size() && families_[i].name != name) ++i;
            if (i == families_.size()) fail<InvalidArgumentError>("Metal::compile", "no shader family '", name, "'");
            const Family& f = families_[i];
            if (f.done) {
                known.push_back({f.name, f.library != nil, f.error, f.compile_ms});
            } else {
                todo.push_back(i);
            }
        }
    }
    for (const FamilyResult& r : known) done(r);
    if (todo.empty()) return;
    // Metal's compiler service compiles the libraries in parallel; each block waits for its own.
    dispatch_group_t group = dispatch_group_create();
    dispatch_queue_t queue = dispatch_get_global_queue(QOS_CLASS_USER_INITIATED, 0);
    const std::function<void(const FamilyResult&)>* report = &done;
    for (size_t i : todo) {
        dispatch_group_async(group, queue, ^{
            (*report)(compile_one(i));
        });
    }
    // The blocks use `report` and `this`: both outlive the wait.
    dispatch_group_wait(group, DISPATCH_TIME_FOREVER);
}

id<MTLComputePipelineState> ShaderLibrary::pipeline_state(const std::string& name,
                                                          const std::vector<FunctionConstant>& constants) {
    id<MTLLibrary> lib = nil;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = kernel_family_.find(name);
        if (it != kernel_family_.end()) lib = families_[it->second].library;
    }
    if (!lib)
        fail<UnsupportedOpError>("Metal::pipeline", "no kernel named '", name, "' in the compiled shader families");
    NSString* fname = [NSString stringWithUTF8String:name.c_str()];
    // Always specialised, also with no values: a kernel whose constants are all optional
    // (is_function_constant_defined) is otherwise a function no pipeline can be made from.
    NSError* error = nil;
    id<MTLFunction> fn = [lib newFunctionWithName:fname constantValues:constant_values(constants) error:&error];
    if (!fn) {
        fail<InvalidArgumentError>("Metal::pipeline", "cannot specialise '", name, "' with its function constants: ",
                                   describe(error));
    }
    id<MTLComputePipelineState> state = [device_ newComputePipelineStateWithFunction:fn error:&error];
    if (!state) fail<DeviceError>("Metal::pipeline", "cannot build '", name, "': ", describe(error));
    return state;
}

}  // namespace mb::metal
