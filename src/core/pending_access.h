// Queued device work that will read or write a Storage's bytes. Host views (numpy arrays, memoryviews,
// DLPack capsules) are zero-copy, so a view handed out while such work is queued would show bytes the
// device has yet to write, silently. Backends record here what they queue and clear it once they have
// waited for it (synchronize); the bindings ask before handing out a view or reading host memory.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/op.h"

namespace mb {

class Storage;

// -> mb.PendingWorkError (MetalBackendError, RuntimeError): host access to memory that queued work
// writes; the message names the work and the backend to synchronize.
struct PendingWorkError : Error {
    using Error::Error;
};

enum class Access { Read, Write };

// Who queued an access: a description shared by all accesses of one queued call (made once per call, as
// graphs mark hundreds of ranges), and the node, for graph computes.
struct PendingWork {
    std::shared_ptr<const std::string> work;
    Op op = Op::NONE;
    std::string node;
    std::string describe() const;
};

class PendingAccess {
public:
    void add(const void* owner, size_t begin, size_t end, Access access, PendingWork what);
    void clear(const void* owner);
    // The description of the first queued write overlapping [begin, end), or "" when there is none.
    std::string write_in(size_t begin, size_t end) const;
    // Whether queued work reads any byte of [begin, end).
    bool read_in(size_t begin, size_t end) const;
    // The description of the first queued read or write overlapping [begin, end) ("" when none),
    // and in *writes whether that one writes.
    std::string access_in(size_t begin, size_t end, bool* writes) const;

private:
    struct Entry {
        const void* owner;
        size_t begin, end;
        Access access;
        PendingWork what;
    };
    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
};

// The marks one backend has placed, so it can lift them all when its work is done.
class PendingMarks {
public:
    explicit PendingMarks(const void* owner) : owner_(owner) {}
    ~PendingMarks() { clear(); }
    PendingMarks(const PendingMarks&) = delete;
    PendingMarks& operator=(const PendingMarks&) = delete;

    void mark(const std::shared_ptr<Storage>& storage, size_t begin, size_t end, Access access, PendingWork what);
    void clear();

private:
    const void* owner_;
    std::mutex mutex_;
    std::vector<std::shared_ptr<Storage>> storages_;
};

// Throws PendingWorkError when queued work writes any byte of [offset, offset + n) of `storage`;
// `what` names the memory for the message ("tensor 'y' f32 (4, 4)").
void check_no_pending_write(const Storage& storage, const char* who, const std::string& what, size_t offset, size_t n);
// Throws PendingWorkError when queued work reads or writes any byte of [offset, offset + n): a host
// write there would be seen by the work that reads it, or lost under the work that writes it.
void check_no_pending_access(const Storage& storage, const char* who, const std::string& what, size_t offset,
                             size_t n);

}  // namespace mb
