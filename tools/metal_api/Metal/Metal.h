// The subset of Apple's Metal framework that the files of src/metal/apple/ call,
// declared as Apple's SDK declares it, so that tools/metal_syntax_check.sh can type-check those files
// on Linux (clang, GNUstep Foundation). Declarations only; nothing here runs. Each line names the
// Apple documentation symbol it mirrors. Adding a call to the runtime means adding its declaration
// here, copied from Apple's documentation, not invented.
//
// The residency-set API exists from the macOS 15 SDK on; like the SDK, it is declared only when
// __MAC_OS_X_VERSION_MAX_ALLOWED says so, and the syntax check runs once per SDK level.
#pragma once

#import <Foundation/Foundation.h>

#include <stdint.h>

// Apple's <os/availability.h> macros; GNUstep has none, and on Linux the attribute would be ignored.
#ifndef API_AVAILABLE
#define API_AVAILABLE(...)
#endif
// Apple's clang predefines these spellings of _Nullable/_Nonnull on Darwin only.
#ifndef __nullable
#define __nullable _Nullable
#endif
#ifndef __nonnull
#define __nonnull _Nonnull
#endif
#ifndef NS_RETURNS_INNER_POINTER
#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
#endif
#ifndef NS_TYPED_ENUM
#define NS_TYPED_ENUM
#endif
// CoreFoundation's CFTimeInterval (CFDate.h), which Metal.h brings in on Apple; GNUstep has none.
typedef double CFTimeInterval;
// Foundation's NSErrorUserInfoKey (NSError.h) on Apple; GNUstep's Foundation has none.
typedef NSString* NSErrorUserInfoKey;

NS_ASSUME_NONNULL_BEGIN

@protocol MTLDevice;
@protocol MTLBuffer;
@protocol MTLLibrary;
@protocol MTLFunction;
@protocol MTLComputePipelineState;
@protocol MTLCommandQueue;
@protocol MTLCommandBuffer;
@protocol MTLComputeCommandEncoder;
@protocol MTLBlitCommandEncoder;
@protocol MTLCounterSet;
@protocol MTLCounterSampleBuffer;
@class MTLCounterSampleBufferDescriptor;
@class MTLCompileOptions;
@class MTLFunctionConstantValues;

// ------------------------------------------------------------------ types and enums

// doc: MTLSize
typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

// doc: MTLSizeMake(_:_:_:)
static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
    MTLSize size = {width, height, depth};
    return size;
}

// doc: MTLGPUFamily (the runtime asks by number, Apple<n> = 1000 + n and Metal3 = 5001, so that
// families newer than the SDK or the deployment target can be asked too)
typedef NS_ENUM(NSInteger, MTLGPUFamily) {
    MTLGPUFamilyApple1 = 1001,
    MTLGPUFamilyApple7 = 1007,
    MTLGPUFamilyMetal3 = 5001,
};

// doc: MTLStorageMode
typedef NS_ENUM(NSUInteger, MTLStorageMode) {
    MTLStorageModeShared = 0,
    MTLStorageModeManaged = 1,
    MTLStorageModePrivate = 2,
    MTLStorageModeMemoryless = 3,
};

// doc: MTLResourceStorageModeShift (MTLResourceOptions bit position of the storage mode)
#define MTLResourceStorageModeShift 4

// doc: MTLResourceOptions
typedef NS_OPTIONS(NSUInteger, MTLResourceOptions) {
    MTLResourceStorageModeShared = MTLStorageModeShared << MTLResourceStorageModeShift,
    MTLResourceStorageModePrivate = MTLStorageModePrivate << MTLResourceStorageModeShift,
};

// doc: MTLDataType (the scalar cases the function constants use)
typedef NS_ENUM(NSUInteger, MTLDataType) {
    MTLDataTypeFloat = 3,
    MTLDataTypeInt = 29,
    MTLDataTypeShort = 37,
    MTLDataTypeBool = 53,
};

// doc: MTLDispatchType
typedef NS_ENUM(NSUInteger, MTLDispatchType) {
    MTLDispatchTypeSerial = 0,
    MTLDispatchTypeConcurrent = 1,
};

// doc: MTLBarrierScope
typedef NS_OPTIONS(NSUInteger, MTLBarrierScope) {
    MTLBarrierScopeBuffers = 1 << 0,
};

// doc: MTLCommandBufferStatus
typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus) {
    MTLCommandBufferStatusNotEnqueued = 0,
    MTLCommandBufferStatusEnqueued = 1,
    MTLCommandBufferStatusCommitted = 2,
    MTLCommandBufferStatusScheduled = 3,
    MTLCommandBufferStatusCompleted = 4,
    MTLCommandBufferStatusError = 5,
};

// doc: MTLCounterSamplingPoint
typedef NS_ENUM(NSUInteger, MTLCounterSamplingPoint) {
    MTLCounterSamplingPointAtStageBoundary,
    MTLCounterSamplingPointAtDrawBoundary,
    MTLCounterSamplingPointAtDispatchBoundary,
    MTLCounterSamplingPointAtTileDispatchBoundary,
    MTLCounterSamplingPointAtBlitBoundary
} API_AVAILABLE(macos(11.0), ios(14.0));

// doc: MTLTimestamp
typedef uint64_t MTLTimestamp;

// doc: MTLCaptureDestination
typedef NS_ENUM(NSInteger, MTLCaptureDestination) {
    MTLCaptureDestinationDeveloperTools = 1,
    MTLCaptureDestinationGPUTraceDocument = 2,
};

// ------------------------------------------------------------------ resources

#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
// doc: MTLAllocation (macOS 15: what a residency set holds; MTLResource conforms to it)
API_AVAILABLE(macos(15.0))
@protocol MTLAllocation <NSObject>
@end

// doc: MTLResource
@protocol MTLResource <MTLAllocation>
@end
#else
// doc: MTLResource
@protocol MTLResource <NSObject>
@end
#endif

// doc: MTLBuffer
@protocol MTLBuffer <MTLResource>
// doc: MTLBuffer/contents()
- (void *)contents NS_RETURNS_INNER_POINTER;
@end

#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
// doc: MTLResidencySetDescriptor
API_AVAILABLE(macos(15.0))
@interface MTLResidencySetDescriptor : NSObject <NSCopying>
// doc: MTLResidencySetDescriptor/label
@property (copy, atomic, nullable) NSString *label;
@end

// doc: MTLResidencySet
API_AVAILABLE(macos(15.0))
@protocol MTLResidencySet <NSObject>
// doc: MTLResidencySet/requestResidency()
- (void)requestResidency;
// doc: MTLResidencySet/endResidency()
- (void)endResidency;
// doc: MTLResidencySet/addAllocation(_:)
- (void)addAllocation:(id<MTLAllocation>)allocation;
// doc: MTLResidencySet/removeAllocation(_:)
- (void)removeAllocation:(id<MTLAllocation>)allocation;
// doc: MTLResidencySet/commit()
- (void)commit;
@end
#endif

// ------------------------------------------------------------------ counters (MTLCounters.h)

// doc: MTLCounterErrorValue
#define MTLCounterErrorValue ((uint64_t)~0ULL)

// doc: MTLCommonCounterSet
typedef NSString * const MTLCommonCounterSet NS_TYPED_ENUM API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLCommonCounterSetTimestamp
#ifdef __cplusplus
extern "C"
#endif
MTLCommonCounterSet MTLCommonCounterSetTimestamp API_AVAILABLE(macos(10.15), ios(14.0));

// doc: MTLCounterResultTimestamp
typedef struct {
    uint64_t timestamp;
} MTLCounterResultTimestamp API_AVAILABLE(macos(10.15), ios(14.0));

// doc: MTLCounterSet
API_AVAILABLE(macos(10.15), ios(14.0))
@protocol MTLCounterSet <NSObject>
// doc: MTLCounterSet/name
@property (readonly, copy) NSString *name API_AVAILABLE(macos(10.15), ios(14.0));
@end

// doc: MTLCounterSampleBufferDescriptor
API_AVAILABLE(macos(10.15), ios(14.0))
@interface MTLCounterSampleBufferDescriptor : NSObject <NSCopying>
// doc: MTLCounterSampleBufferDescriptor/counterSet
@property (nullable, readwrite, retain) id<MTLCounterSet> counterSet API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLCounterSampleBufferDescriptor/label
@property (readwrite, copy) NSString *label API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLCounterSampleBufferDescriptor/storageMode
@property (readwrite) MTLStorageMode storageMode API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLCounterSampleBufferDescriptor/sampleCount
@property (readwrite) NSUInteger sampleCount API_AVAILABLE(macos(10.15), ios(14.0));
@end

// doc: MTLCounterSampleBuffer
API_AVAILABLE(macos(10.15), ios(14.0))
@protocol MTLCounterSampleBuffer <NSObject>
// doc: MTLCounterSampleBuffer/resolveCounterRange(_:)
- (nullable NSData *)resolveCounterRange:(NSRange)range API_AVAILABLE(macos(10.15), ios(14.0));
@end

// ------------------------------------------------------------------ library and pipelines

// doc: MTLCompileOptions
@interface MTLCompileOptions : NSObject <NSCopying>
@end

// doc: MTLFunctionConstantValues
@interface MTLFunctionConstantValues : NSObject <NSCopying>
// doc: MTLFunctionConstantValues/setConstantValue(_:type:index:)
- (void)setConstantValue:(const void *)value type:(MTLDataType)type atIndex:(NSUInteger)index;
@end

// doc: MTLFunction
@protocol MTLFunction <NSObject>
@end

// doc: MTLLibrary
@protocol MTLLibrary <NSObject>
// doc: MTLLibrary/functionNames
@property (readonly) NSArray<NSString *> *functionNames;
// doc: MTLLibrary/makeFunction(name:)
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
// doc: MTLLibrary/makeFunction(name:constantValues:)
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)name
                                 constantValues:(MTLFunctionConstantValues *)constantValues
                                          error:(__autoreleasing NSError **)error;
@end

// doc: MTLComputePipelineState
@protocol MTLComputePipelineState <NSObject>
// doc: MTLComputePipelineState/maxTotalThreadsPerThreadgroup
@property (readonly) NSUInteger maxTotalThreadsPerThreadgroup;
// doc: MTLComputePipelineState/threadExecutionWidth
@property (readonly) NSUInteger threadExecutionWidth;
@end

// ------------------------------------------------------------------ encoders and command buffers

// doc: MTLCommandEncoder
@protocol MTLCommandEncoder <NSObject>
// doc: MTLCommandEncoder/label
@property (nullable, copy, atomic) NSString *label;
// doc: MTLCommandEncoder/endEncoding()
- (void)endEncoding;
@end

// doc: MTLCommandBufferErrorOption
typedef NS_OPTIONS(NSUInteger, MTLCommandBufferErrorOption) {
    MTLCommandBufferErrorOptionNone = 0,
    MTLCommandBufferErrorOptionEncoderExecutionStatus = 1 << 0,
} API_AVAILABLE(macos(11.0), ios(14.0));

// doc: MTLCommandEncoderErrorState
typedef NS_ENUM(NSInteger, MTLCommandEncoderErrorState) {
    MTLCommandEncoderErrorStateUnknown = 0,
    MTLCommandEncoderErrorStateCompleted = 1,
    MTLCommandEncoderErrorStateAffected = 2,
    MTLCommandEncoderErrorStatePending = 3,
    MTLCommandEncoderErrorStateFaulted = 4,
} API_AVAILABLE(macos(11.0), ios(14.0));

// doc: MTLCommandBufferEncoderInfoErrorKey
extern NSErrorUserInfoKey const MTLCommandBufferEncoderInfoErrorKey API_AVAILABLE(macos(11.0), ios(14.0));

// doc: MTLCommandBufferEncoderInfo
@protocol MTLCommandBufferEncoderInfo <NSObject>
// doc: MTLCommandBufferEncoderInfo/label
@property (readonly, nonatomic) NSString *label;
// doc: MTLCommandBufferEncoderInfo/debugSignposts
@property (readonly, nonatomic) NSArray<NSString *> *debugSignposts;
// doc: MTLCommandBufferEncoderInfo/errorState
@property (readonly, nonatomic) MTLCommandEncoderErrorState errorState;
@end

// doc: MTLCommandBufferDescriptor
API_AVAILABLE(macos(11.0), ios(14.0))
@interface MTLCommandBufferDescriptor : NSObject <NSCopying>
// doc: MTLCommandBufferDescriptor/retainedReferences
@property (readwrite, nonatomic) BOOL retainedReferences;
// doc: MTLCommandBufferDescriptor/errorOptions
@property (readwrite, nonatomic) MTLCommandBufferErrorOption errorOptions;
@end

// doc: MTLComputeCommandEncoder
@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
// doc: MTLComputeCommandEncoder/setComputePipelineState(_:)
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
// doc: MTLComputeCommandEncoder/setBytes(_:length:index:)
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
// doc: MTLComputeCommandEncoder/setBuffer(_:offset:index:)
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
// doc: MTLComputeCommandEncoder/setThreadgroupMemoryLength(_:index:)
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
// doc: MTLComputeCommandEncoder/dispatchThreadgroups(_:threadsPerThreadgroup:)
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
// doc: MTLComputeCommandEncoder/memoryBarrier(scope:)
- (void)memoryBarrierWithScope:(MTLBarrierScope)scope;
// doc: MTLComputeCommandEncoder/sampleCounters(sampleBuffer:sampleIndex:barrier:)
- (void)sampleCountersInBuffer:(id<MTLCounterSampleBuffer>)sampleBuffer
                 atSampleIndex:(NSUInteger)sampleIndex
                   withBarrier:(BOOL)barrier API_AVAILABLE(macos(10.15), ios(14.0));
@end

// doc: MTLBlitCommandEncoder
@protocol MTLBlitCommandEncoder <MTLCommandEncoder>
// doc: MTLBlitCommandEncoder/copy(from:sourceOffset:to:destinationOffset:size:)
- (void)copyFromBuffer:(id<MTLBuffer>)sourceBuffer
          sourceOffset:(NSUInteger)sourceOffset
              toBuffer:(id<MTLBuffer>)destinationBuffer
     destinationOffset:(NSUInteger)destinationOffset
                  size:(NSUInteger)size;
// doc: MTLBlitCommandEncoder/fill(buffer:range:value:)
- (void)fillBuffer:(id<MTLBuffer>)buffer range:(NSRange)range value:(uint8_t)value;
@end

// doc: MTLCommandBuffer
@protocol MTLCommandBuffer <NSObject>
// doc: MTLCommandBuffer/label
@property (nullable, copy, atomic) NSString *label;
// doc: MTLCommandBuffer/status
@property (readonly) MTLCommandBufferStatus status;
// doc: MTLCommandBuffer/error
@property (nullable, readonly) NSError *error;
// doc: MTLCommandBuffer/gpuStartTime
@property (readonly) CFTimeInterval GPUStartTime API_AVAILABLE(macos(10.15), macCatalyst(13.0), ios(10.3));
// doc: MTLCommandBuffer/gpuEndTime
@property (readonly) CFTimeInterval GPUEndTime API_AVAILABLE(macos(10.15), macCatalyst(13.0), ios(10.3));
// doc: MTLCommandBuffer/commit()
- (void)commit;
// doc: MTLCommandBuffer/waitUntilCompleted()
- (void)waitUntilCompleted;
// doc: MTLCommandBuffer/makeComputeCommandEncoder(dispatchType:)
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType;
// doc: MTLCommandBuffer/makeBlitCommandEncoder()
- (nullable id<MTLBlitCommandEncoder>)blitCommandEncoder;
@end

// doc: MTLCommandQueue
@protocol MTLCommandQueue <NSObject>
// doc: MTLCommandQueue/makeCommandBuffer()
- (nullable id<MTLCommandBuffer>)commandBuffer;
// doc: MTLCommandQueue/makeCommandBuffer(descriptor:)
- (nullable id<MTLCommandBuffer>)commandBufferWithDescriptor:(MTLCommandBufferDescriptor *)descriptor
    API_AVAILABLE(macos(11.0), ios(14.0));
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
// doc: MTLCommandQueue/addResidencySet(_:)
- (void)addResidencySet:(id<MTLResidencySet>)residencySet API_AVAILABLE(macos(15.0));
// doc: MTLCommandQueue/removeResidencySet(_:)
- (void)removeResidencySet:(id<MTLResidencySet>)residencySet API_AVAILABLE(macos(15.0));
#endif
@end

// ------------------------------------------------------------------ device

// doc: MTLDevice
@protocol MTLDevice <NSObject>
// doc: MTLDevice/name
@property (readonly) NSString *name;
// doc: MTLDevice/hasUnifiedMemory
@property (readonly) BOOL hasUnifiedMemory;
// doc: MTLDevice/recommendedMaxWorkingSetSize
@property (readonly) uint64_t recommendedMaxWorkingSetSize;
// doc: MTLDevice/currentAllocatedSize
@property (readonly) NSUInteger currentAllocatedSize;
// doc: MTLDevice/maxThreadgroupMemoryLength
@property (readonly) NSUInteger maxThreadgroupMemoryLength;
// doc: MTLDevice/maxBufferLength
@property (readonly) NSUInteger maxBufferLength;
// doc: MTLDevice/supportsFamily(_:)
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily;
// doc: MTLDevice/counterSets
@property (readonly, nullable) NSArray<id<MTLCounterSet>> *counterSets API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLDevice/supportsCounterSampling(_:)
- (BOOL)supportsCounterSampling:(MTLCounterSamplingPoint)samplingPoint API_AVAILABLE(macos(11.0), ios(14.0));
// doc: MTLDevice/makeCounterSampleBuffer(descriptor:)
- (nullable id<MTLCounterSampleBuffer>)newCounterSampleBufferWithDescriptor:(MTLCounterSampleBufferDescriptor *)descriptor
                                                                      error:(NSError **)error
    API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLDevice/sampleTimestamps(_:gpuTimestamp:)
- (void)sampleTimestamps:(MTLTimestamp *)cpuTimestamp
            gpuTimestamp:(MTLTimestamp *)gpuTimestamp API_AVAILABLE(macos(10.15), ios(14.0));
// doc: MTLDevice/makeCommandQueue()
- (nullable id<MTLCommandQueue>)newCommandQueue;
// doc: MTLDevice/makeBuffer(length:options:)
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
// doc: MTLDevice/makeBuffer(bytesNoCopy:length:options:deallocator:)
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void *)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^__nullable)(void *pointer, NSUInteger length))deallocator;
// doc: MTLDevice/makeLibrary(source:options:)
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString *)source
                                        options:(nullable MTLCompileOptions *)options
                                          error:(__autoreleasing NSError **)error;
// doc: MTLDevice/makeComputePipelineState(function:)
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                      error:(__autoreleasing NSError **)error;
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
// doc: MTLDevice/makeResidencySet(descriptor:)
- (nullable id<MTLResidencySet>)newResidencySetWithDescriptor:(MTLResidencySetDescriptor *)desc
                                                        error:(NSError **)error API_AVAILABLE(macos(15.0));
#endif
@end

// doc: MTLCreateSystemDefaultDevice()
#ifdef __cplusplus
extern "C"
#endif
id<MTLDevice> __nullable MTLCreateSystemDefaultDevice(void) NS_RETURNS_RETAINED;

// ------------------------------------------------------------------ capture

// doc: MTLCaptureDescriptor
@interface MTLCaptureDescriptor : NSObject <NSCopying>
// doc: MTLCaptureDescriptor/captureObject
@property (nonatomic, strong, nullable) id captureObject;
// doc: MTLCaptureDescriptor/destination
@property (nonatomic, assign) MTLCaptureDestination destination;
// doc: MTLCaptureDescriptor/outputURL
@property (nonatomic, copy, nullable) NSURL *outputURL;
@end

// doc: MTLCaptureManager
@interface MTLCaptureManager : NSObject
// doc: MTLCaptureManager/shared()
+ (MTLCaptureManager *)sharedCaptureManager;
// doc: MTLCaptureManager/supportsDestination(_:)
- (BOOL)supportsDestination:(MTLCaptureDestination)destination;
// doc: MTLCaptureManager/startCapture(with:)
- (BOOL)startCaptureWithDescriptor:(MTLCaptureDescriptor *)descriptor error:(__autoreleasing NSError **)error;
// doc: MTLCaptureManager/stopCapture()
- (void)stopCapture;
// doc: MTLCaptureManager/isCapturing
@property (readonly) BOOL isCapturing;
@end

NS_ASSUME_NONNULL_END
