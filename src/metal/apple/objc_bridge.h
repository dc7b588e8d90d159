// Where Objective-C meets C++ in the Apple runtime: autorelease pools that let C++ exceptions through,
// and Foundation strings and errors as std::string. An Objective-C++ header: only the .mm files include it.
#pragma once

#import <Foundation/Foundation.h>

#include <exception>
#include <string>
#include <utility>

namespace mb::metal {

inline std::string utf8(NSString* s) {
    const char* c = s ? s.UTF8String : nullptr;
    return c ? std::string(c) : std::string();
}

inline std::string describe(NSError* error) {
    std::string s = error ? utf8(error.localizedDescription) : std::string();
    return s.empty() ? std::string("Metal gave no reason") : s;
}

// Runs f inside an autorelease pool: Python's threads and the backend's have none, and Metal returns
// autoreleased objects. An exception would leave the pool undrained (its pop is not an exception
// cleanup), so it is caught inside and rethrown once the pool is gone.
template <typename F>
void pooled(F&& f) {
    std::exception_ptr error;
    @autoreleasepool {
        try {
            std::forward<F>(f)();
        } catch (...) {
            error = std::current_exception();
        }
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace mb::metal
