#include "core/pending_access.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/storage.h"

namespace mb {

std::string PendingWork::describe() const {
    std::string out = work ? *work : std::string("queued work");
    if (op != Op::NONE) out += ", node '" + node + "' (" + op_name(op) + ")";
    return out;
}

void PendingAccess::add(const void* owner, size_t begin, size_t end, Access access, PendingWork what) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back({owner, begin, end, access, std::move(what)});
}

void PendingAccess::clear(const void* owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.owner == owner; }),
                   entries_.end());
}

std::string PendingAccess::write_in(size_t begin, size_t end) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
        if (e.access == Access::Write && e.begin < end && begin < e.end) return e.what.describe();
    }
    return "";
}

bool PendingAccess::read_in(size_t begin, size_t end) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
        if (e.access == Access::Read && e.begin < end && begin < e.end) return true;
    }
    return false;
}

std::string PendingAccess::access_in(size_t begin, size_t end, bool* writes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
        if (e.begin < end && begin < e.end) {
            *writes = e.access == Access::Write;
            return e.what.describe();
        }
    }
    return "";
}

void PendingMarks::mark(const std::shared_ptr<Storage>& storage, size_t begin, size_t end, Access access,
                        PendingWork what) {
    if (!storage || begin >= end) return;
    storage->pending().add(owner_, begin, end, access, std::move(what));
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(storages_.begin(), storages_.end(), storage) == storages_.end()) storages_.push_back(storage);
}

void PendingMarks::clear() {
    std::vector<std::shared_ptr<Storage>> storages;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        storages.swap(storages_);
    }
    for (const auto& s : storages) s->pending().clear(owner_);
}

void check_no_pending_write(const Storage& storage, const char* who, const std::string& what, size_t offset, size_t n) {
    // An empty range still names memory the user is about to look at.
    std::string work = storage.pending().write_in(offset, offset + std::max<size_t>(n, 1));
    if (!work.empty()) {
        fail<PendingWorkError>(who, what, " is written by queued work (", work,
                               ") that has not finished; call that backend's synchronize() first");
    }
}

void check_no_pending_access(const Storage& storage, const char* who, const std::string& what, size_t offset,
                             size_t n) {
    if (n == 0) return;  // writes nothing
    bool writes = false;
    std::string work = storage.pending().access_in(offset, offset + n, &writes);
    if (!work.empty()) {
        fail<PendingWorkError>(who, "cannot write ", what, " [", offset, ", ", offset + n, "): queued work (", work,
                               ") ", writes ? "writes" : "reads", " it and has not finished; call that backend's "
                               "synchronize() first");
    }
}

}  // namespace mb
