// Host access to buffer memory that queued device work may still be using (see core/pending_access.h).
// The rule: a zero-copy view or a host read of bytes that queued work writes raises PendingWorkError
// naming that work; a view of bytes that queued work only reads is handed out read-only; a host
// write to bytes that queued work reads or writes raises.
#pragma once

#include <cstddef>
#include <string>

#include "bindings/bindings.h"

namespace mb {
class Buffer;
}

namespace mb::bindings {

// Raises PendingWorkError when queued work writes any byte of [offset, offset + n) of `buf` and the host
// can see that memory (device-private memory is read through copies ordered after queued work).
void check_host_read(const Buffer& buf, const char* who, const std::string& what, size_t offset, size_t n);
// Raises PendingWorkError when queued work reads or writes any byte of [offset, offset + n) of `buf`:
// host writes (set, memset, clear) follow the same rule as views, for every kind of memory, since
// none of them is ordered after queued work.
void check_host_write(const Buffer& buf, const char* who, const std::string& what, size_t offset, size_t n);
// Whether queued work reads any byte of [offset, offset + n): views are then handed out read-only.
bool pending_read(const Buffer& buf, size_t offset, size_t n);

void init_host_view(py::module_& m);

}  // namespace mb::bindings
