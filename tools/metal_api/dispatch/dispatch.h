// The subset of Apple's libdispatch (Grand Central Dispatch) that src/metal/apple/ calls, declared as
// Apple's SDK declares it under ARC (dispatch objects are Objective-C objects), so that
// tools/metal_syntax_check.sh can type-check those files on Linux. Declarations only; nothing here
// runs. Each line names the Apple documentation symbol it mirrors.
#pragma once

#import <Foundation/Foundation.h>

#include <stdint.h>

// doc: dispatch_block_t
typedef void (^dispatch_block_t)(void);
// doc: dispatch_time_t, DISPATCH_TIME_FOREVER
typedef uint64_t dispatch_time_t;
#define DISPATCH_TIME_FOREVER (~0ull)

// doc: dispatch_queue_t, dispatch_queue_global_t
@protocol OS_dispatch_queue <NSObject>
@end
@protocol OS_dispatch_queue_global <OS_dispatch_queue>
@end
typedef NSObject<OS_dispatch_queue>* dispatch_queue_t;
typedef NSObject<OS_dispatch_queue_global>* dispatch_queue_global_t;
// doc: dispatch_group_t
@protocol OS_dispatch_group <NSObject>
@end
typedef NSObject<OS_dispatch_group>* dispatch_group_t;

// doc: qos_class_t (sys/qos.h), QOS_CLASS_USER_INITIATED
typedef unsigned int qos_class_t;
#define QOS_CLASS_USER_INITIATED 0x19

// doc: dispatch_get_global_queue
dispatch_queue_global_t dispatch_get_global_queue(intptr_t identifier, uintptr_t flags);
// doc: dispatch_group_create
dispatch_group_t dispatch_group_create(void);
// doc: dispatch_group_async
void dispatch_group_async(dispatch_group_t group, dispatch_queue_t queue, dispatch_block_t block);
// doc: dispatch_group_wait
intptr_t dispatch_group_wait(dispatch_group_t group, dispatch_time_t timeout);
