#include "metal/sim/racecheck.h"

#include <dlfcn.h>
#if defined(__ELF__)
#include <elf.h>
#include <link.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metal/sim/kernel_abi.h"

namespace mb::sim::race {

#if defined(__ELF__)
__thread Tracker* tls_tracker __attribute__((tls_model("initial-exec"))) = nullptr;
#else
__thread Tracker* tls_tracker = nullptr;
#endif

// ---------------------------------------------------------------- code address -> .metal line

namespace {

std::string base_name(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "file:line" frames of pc, innermost first, from addr2line (or llvm-symbolizer); empty if neither runs.
std::vector<std::string> frames(const void* pc) {
    Dl_info info{};
    if (!dladdr(pc, &info) || !info.dli_fname) return {};
    uintptr_t addr = reinterpret_cast<uintptr_t>(pc) - 1;  // inside the call instruction
#if defined(__ELF__)
    // A position-independent object is symbolised by offset, a fixed-address executable by address.
    const auto* ehdr = static_cast<const ElfW(Ehdr)*>(info.dli_fbase);
    if (ehdr->e_type != ET_EXEC) addr -= reinterpret_cast<uintptr_t>(info.dli_fbase);
#else
    addr -= reinterpret_cast<uintptr_t>(info.dli_fbase);
#endif
    std::string file = info.dli_fname;
    if (file.find('\'') != std::string::npos) return {};
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(addr));
    const std::string cmds[] = {"addr2line -i -e '" + file + "' " + hex + " 2>/dev/null",
                                "llvm-symbolizer --no-functions --inlines --obj='" + file + "' " + hex +
                                    " 2>/dev/null"};
    for (const std::string& cmd : cmds) {
        FILE* f = popen(cmd.c_str(), "r");
        if (!f) continue;
        std::vector<std::string> out;
        char line[4096];
        while (std::fgets(line, sizeof line, f)) {
            std::string s(line);
            while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
            if (s.empty()) continue;
            // addr2line: "path:line" or "path:line (discriminator n)"; llvm-symbolizer: "path:line:col".
            const size_t sp = s.find(" (");
            if (sp != std::string::npos) s.resize(sp);
            if (s.rfind("??", 0) == 0) continue;
            out.push_back(s);
        }
        pclose(f);
        if (!out.empty()) return out;
    }
    return {};
}

// "path:line[:col]" -> "name:line".
std::string short_frame(const std::string& frame) {
    std::string s = base_name(frame);
    const size_t c1 = s.find(':');
    if (c1 == std::string::npos) return s;
    const size_t c2 = s.find(':', c1 + 1);
    return c2 == std::string::npos ? s : s.substr(0, c2);
}

}  // namespace

std::string source_line(const void* pc) {
    static std::mutex mutex;
    static std::map<const void*, std::string> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(pc);
    if (it != cache.end()) return it->second;
    std::string result;
    std::vector<std::string> fs = frames(pc);
    std::string first, metal;
    for (const std::string& f : fs) {
        const std::string s = short_frame(f);
        if (s.rfind("msl_shim.h:", 0) == 0) continue;
        if (first.empty()) first = s;
        if (metal.empty() && s.find(".metal:") != std::string::npos) metal = s;
    }
    if (first.empty()) {
        char hex[64];
        std::snprintf(hex, sizeof hex, "code address %p", pc);
        result = std::string(hex) + " (no .metal line: addr2line not found or no line tables)";
    } else if (metal.empty() || metal == first) {
        result = first;
    } else {
        result = first + " called from " + metal;
    }
    cache.emplace(pc, result);
    return result;
}

std::string group_name(uint32_t group, const uint32_t grid[3]) {
    const uint32_t x = group % grid[0], y = group / grid[0] % grid[1], z = group / grid[0] / grid[1];
    return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}

// ---------------------------------------------------------------- Footprint

Footprint::Page* Footprint::page(uintptr_t key) {
    if (key == last_key_) return last_;
    auto& p = pages_[key];
    if (!p) p = std::make_unique<Page>();
    last_key_ = key;
    last_ = p.get();
    return last_;
}

void Footprint::add(uintptr_t addr, size_t n, bool write, const Site& site) {
    while (n) {
        Page* p = page(addr / kPage);
        const size_t off = addr % kPage;
        const size_t take = std::min(n, kPage - off);
        uint64_t* bits = write ? p->write : p->read;
        for (size_t b = off; b < off + take; ++b) bits[b / 64] |= uint64_t(1) << (b % 64);
        bool* seen = write ? p->write_seen : p->read_seen;
        Site* sites = write ? p->write_site : p->read_site;
        for (size_t l = off / kLine; l <= (off + take - 1) / kLine; ++l) {
            if (!seen[l]) {
                seen[l] = true;
                sites[l] = site;
            }
        }
        addr += take;
        n -= take;
    }
}

void Footprint::merge(const Footprint& other) {
    for (const auto& kv : other.pages_) {
        Page* p = page(kv.first);
        const Page& q = *kv.second;
        for (size_t i = 0; i < kPage / 64; ++i) {
            p->read[i] |= q.read[i];
            p->write[i] |= q.write[i];
        }
        for (size_t l = 0; l < kPage / kLine; ++l) {
            if (!p->read_seen[l] && q.read_seen[l]) {
                p->read_seen[l] = true;
                p->read_site[l] = q.read_site[l];
            }
            if (!p->write_seen[l] && q.write_seen[l]) {
                p->write_seen[l] = true;
                p->write_site[l] = q.write_site[l];
            }
        }
    }
}

bool Footprint::conflict(const Footprint& a, const Footprint& b, Conflict* out) {
    bool found = false;
    for (const auto& kv : a.pages_) {
        auto it = b.pages_.find(kv.first);
        if (it == b.pages_.end()) continue;
        const Page& p = *kv.second;
        const Page& q = *it->second;
        for (size_t i = 0; i < kPage / 64; ++i) {
            const uint64_t aw = p.write[i] & (q.read[i] | q.write[i]);
            const uint64_t bw = q.write[i] & p.read[i];
            if (!(aw | bw)) continue;
            const bool a_writes = aw && (!bw || __builtin_ctzll(aw) <= __builtin_ctzll(bw));
            const uint64_t m = a_writes ? aw : bw;
            const uintptr_t addr = kv.first * kPage + i * 64 + static_cast<uintptr_t>(__builtin_ctzll(m));
            if (!found || addr < out->addr) {
                const size_t l = (addr % kPage) / kLine;
                const uint64_t bit = uint64_t(1) << (addr % 64);
                out->addr = addr;
                out->a_writes = a_writes;
                if (a_writes) {
                    out->a = p.write_site[l];
                    out->other_writes = (q.write[i] & bit) != 0;
                    out->b = out->other_writes ? q.write_site[l] : q.read_site[l];
                } else {
                    out->b = q.write_site[l];
                    out->other_writes = false;
                    out->a = p.read_site[l];
                }
                found = true;
            }
            break;  // the lowest of this page; later pages may still be lower (unordered map)
        }
    }
    return found;
}

// ---------------------------------------------------------------- Tracker

void Tracker::begin_dispatch(const unsigned char* arena, size_t arena_bytes, const size_t* tg_offset,
                             const size_t* tg_size, uint32_t n_tg_slots, std::vector<Range> device,
                             Footprint* footprint) {
    tg_lo_ = reinterpret_cast<uintptr_t>(arena);
    tg_len_ = arena ? arena_bytes : 0;
    if (cells_.size() < tg_len_) cells_.resize(tg_len_);
    tg_offset_ = tg_offset;
    tg_size_ = tg_size;
    n_tg_slots_ = n_tg_slots;
    std::sort(device.begin(), device.end(), [](const Range& x, const Range& y) { return x.lo < y.lo; });
    device_.clear();
    for (const Range& r : device) {
        if (r.hi <= r.lo) continue;
        if (!device_.empty() && r.lo <= device_.back().hi) {
            device_.back().hi = std::max(device_.back().hi, r.hi);
        } else {
            device_.push_back(r);
        }
    }
    dev_lo_ = device_.empty() ? 0 : device_.front().lo;
    dev_len_ = device_.empty() ? 0 : device_.back().hi - dev_lo_;
    writes_.clear();
    local_fp_ = Footprint();
    footprint_ = footprint != nullptr;
    race_ = Race{};
}

void Tracker::end_dispatch() {
    tg_lo_ = tg_len_ = 0;
    dev_lo_ = dev_len_ = 0;
}

void Tracker::new_epoch() {
    if (++epoch_ == 0) {
        // 2^32 barriers: start the shadow over (no record can match a live epoch then).
        std::fill(cells_.begin(), cells_.end(), Cell{});
        epoch_ = 1;
    }
}

void Tracker::begin_group(uint32_t group) {
    group_ = group;
    new_epoch();
    stamp_ = epoch_;
    std::fill(std::begin(simd_), std::end(simd_), 0u);
}

void Tracker::raise(RaceKind kind, size_t off, const Acc& first, bool first_writes, bool second_writes,
                    const void* pc) {
    race_.kind = kind;
    race_.offset = off;
    race_.first = first;
    race_.first_writes = first_writes;
    race_.second_writes = second_writes;
    race_.second_tid = tid_;
    race_.second_pc = pc;
    abi::fail("racecheck", nullptr, 0);  // a fiber: does not return
    __builtin_trap();
}

void Tracker::tg_access(size_t off, size_t n, bool write, const void* pc) {
    const size_t end = std::min(off + n, static_cast<size_t>(tg_len_));
    const uint16_t simd = static_cast<uint16_t>(simd_[tid_]);
    const Acc me{epoch_, static_cast<uint16_t>(tid_), simd, pc};
    for (size_t b = off; b < end; ++b) {
        Cell& c = cells_[b];
        if (write) {
            if (concurrent(c.w)) raise(RaceKind::ThreadgroupRace, b, c.w, true, true, pc);
            if (concurrent(c.r1)) raise(RaceKind::ThreadgroupRace, b, c.r1, false, true, pc);
            if (concurrent(c.r2)) raise(RaceKind::ThreadgroupRace, b, c.r2, false, true, pc);
            c.w = me;
            c.init = stamp_;
        } else {
            if (c.init != stamp_) raise(RaceKind::Uninitialized, b, Acc{}, false, false, pc);
            if (concurrent(c.w)) raise(RaceKind::ThreadgroupRace, b, c.w, true, false, pc);
            if (c.r1.epoch != epoch_ || c.r1.tid == tid_) {
                c.r1 = me;
            } else if (c.r2.epoch != epoch_ || c.r2.tid == tid_) {
                c.r2 = me;
            }
        }
    }
}

void Tracker::device_access(uintptr_t a, size_t n, bool write, bool atomic, const void* pc) {
    bool inside = false;
    for (const Range& r : device_) {
        if (a >= r.lo && a < r.hi) {
            inside = true;
            break;
        }
    }
    if (!inside) return;
    const Site site{pc, group_, tid_};
    if (footprint_) local_fp_.add(a, n, write || atomic, site);
    if (!write || atomic) return;
    if (!writes_.empty()) {
        DeviceWrite& last = writes_.back();
        if (last.site.group == group_ && last.site.tid == tid_ && last.addr + last.n == a) {
            last.n += n;
            return;
        }
    }
    writes_.push_back(DeviceWrite{a, n, site});
}

void Tracker::atomic(const void* p, size_t n, const void* pc) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a - tg_lo_ < tg_len_) {
        const size_t end = std::min(a - tg_lo_ + n, static_cast<size_t>(tg_len_));
        for (size_t b = a - tg_lo_; b < end; ++b) cells_[b].init = stamp_;
    } else if (a - dev_lo_ < dev_len_) {
        device_access(a, n, true, true, pc);
    }
}

std::string Tracker::tg_place(size_t off) const {
    for (uint32_t i = 0; i < n_tg_slots_; ++i) {
        if (tg_size_[i] && off >= tg_offset_[i] && off < tg_offset_[i] + tg_size_[i]) {
            return "threadgroup(" + std::to_string(i) + ") byte " + std::to_string(off - tg_offset_[i]);
        }
    }
    return "threadgroup memory past its buffers (arena byte " + std::to_string(off) + ")";
}

std::string Tracker::take_report() {
    const Race r = race_;
    race_ = Race{};
    auto who = [](uint32_t tid, bool writes, const void* pc) {
        return "thread " + std::to_string(tid) + (writes ? " writes" : " reads") + " at " + source_line(pc);
    };
    if (r.kind == RaceKind::Uninitialized) {
        return "initcheck: thread " + std::to_string(r.second_tid) + " reads " + tg_place(r.offset) + " at " +
               source_line(r.second_pc) + ", which no thread of the threadgroup wrote";
    }
    return "racecheck: threadgroup memory race on " + tg_place(r.offset) + ": " +
           who(r.first.tid, r.first_writes, r.first.pc) + ", " + who(r.second_tid, r.second_writes, r.second_pc) +
           ", with no threadgroup_barrier between them";
}

// ---------------------------------------------------------------- device writes of one dispatch

std::string check_device_writes(std::vector<DeviceWrite>& writes, const uint32_t grid[3],
                                const std::string& where_prefix, std::string (*describe)(uintptr_t, const void*),
                                const void* ctx) {
    std::sort(writes.begin(), writes.end(), [](const DeviceWrite& x, const DeviceWrite& y) {
        if (x.addr != y.addr) return x.addr < y.addr;
        if (x.site.group != y.site.group) return x.site.group < y.site.group;
        return x.site.tid < y.site.tid;
    });
    // best: the write reaching furthest; other: the furthest of a group other than best's.
    const DeviceWrite* best = nullptr;
    const DeviceWrite* other = nullptr;
    for (const DeviceWrite& w : writes) {
        const DeviceWrite* hit = nullptr;
        if (best && w.site.group != best->site.group && w.addr < best->addr + best->n) {
            hit = best;
        } else if (best && other && w.site.group == best->site.group && w.addr < other->addr + other->n) {
            hit = other;
        }
        if (hit) {
            const uintptr_t addr = w.addr;
            return where_prefix + "racecheck: device memory race on " + describe(addr, ctx) + ": threadgroup " +
                   group_name(hit->site.group, grid) + " thread " + std::to_string(hit->site.tid) + " writes at " +
                   source_line(hit->site.pc) + ", threadgroup " + group_name(w.site.group, grid) + " thread " +
                   std::to_string(w.site.tid) + " writes at " + source_line(w.site.pc) +
                   " (two threadgroups of one dispatch write the same bytes, not atomically)";
        }
        const uintptr_t end = w.addr + w.n;
        if (!best || end > best->addr + best->n) {
            if (best && w.site.group != best->site.group) other = best;
            best = &w;
        } else if (w.site.group != best->site.group && (!other || end > other->addr + other->n)) {
            other = &w;
        }
    }
    return {};
}

}  // namespace mb::sim::race

// ---------------------------------------------------------------- the instrumentation's entry points

// What -fsanitize=thread calls in the racecheck build of the kernels. Outside a racecheck dispatch
// (tls_tracker null) they do nothing but the access itself for the atomics.
using mb::sim::race::tls_tracker;

#define MB_RC_VIS extern "C" __attribute__((visibility("hidden")))

#define MB_RC_ACCESS(n)                                                                                  \
    MB_RC_VIS void __tsan_read##n(void* p) {                                                            \
        if (auto* t = tls_tracker) t->access(p, n, false, __builtin_return_address(0));                 \
    }                                                                                                    \
    MB_RC_VIS void __tsan_write##n(void* p) {                                                           \
        if (auto* t = tls_tracker) t->access(p, n, true, __builtin_return_address(0));                  \
    }                                                                                                    \
    MB_RC_VIS void __tsan_unaligned_read##n(void* p) {                                                  \
        if (auto* t = tls_tracker) t->access(p, n, false, __builtin_return_address(0));                 \
    }                                                                                                    \
    MB_RC_VIS void __tsan_unaligned_write##n(void* p) {                                                 \
        if (auto* t = tls_tracker) t->access(p, n, true, __builtin_return_address(0));                  \
    }
MB_RC_ACCESS(1)
MB_RC_ACCESS(2)
MB_RC_ACCESS(4)
MB_RC_ACCESS(8)
MB_RC_ACCESS(16)
#undef MB_RC_ACCESS

MB_RC_VIS void __tsan_read_range(void* p, unsigned long n) {
    if (auto* t = tls_tracker) t->access(p, n, false, __builtin_return_address(0));
}
MB_RC_VIS void __tsan_write_range(void* p, unsigned long n) {
    if (auto* t = tls_tracker) t->access(p, n, true, __builtin_return_address(0));
}
// clang's instrumentation turns memcpy/memset/memmove into these (gcc leaves them to libc, unseen).
MB_RC_VIS void* __tsan_memcpy(void* dst, const void* src, unsigned long n) {
    if (auto* t = tls_tracker) {
        t->access(src, n, false, __builtin_return_address(0));
        t->access(dst, n, true, __builtin_return_address(0));
    }
    return std::memcpy(dst, src, n);
}
MB_RC_VIS void* __tsan_memmove(void* dst, const void* src, unsigned long n) {
    if (auto* t = tls_tracker) {
        t->access(src, n, false, __builtin_return_address(0));
        t->access(dst, n, true, __builtin_return_address(0));
    }
    return std::memmove(dst, src, n);
}
MB_RC_VIS void* __tsan_memset(void* dst, int value, unsigned long n) {
    if (auto* t = tls_tracker) t->access(dst, n, true, __builtin_return_address(0));
    return std::memset(dst, value, n);
}
MB_RC_VIS void __tsan_init() {}
MB_RC_VIS void __tsan_func_entry(void*) {}
MB_RC_VIS void __tsan_func_exit() {}
MB_RC_VIS void __tsan_vptr_update(void**, void*) {}
MB_RC_VIS void __tsan_vptr_read(void**) {}
MB_RC_VIS void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
MB_RC_VIS void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// The atomics: performed sequentially consistent, recorded as atomic (no race with each other).
#define MB_RC_NOTE(p, n) \
    if (auto* t = tls_tracker) t->atomic((const void*)(p), n, __builtin_return_address(0))
#define MB_RC_ATOMICS(bits, T)                                                                              \
    MB_RC_VIS T __tsan_atomic##bits##_load(const volatile T* a, int) {                                     \
        if (auto* t = tls_tracker) t->access((const void*)a, sizeof(T), false, __builtin_return_address(0)); \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                       \
    }                                                                                                       \
    MB_RC_VIS void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                  \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                          \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                  \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                 \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                 \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                 \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                  \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                  \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                 \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                \
    }                                                                                                       \
    MB_RC_VIS int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {      \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
    }                                                                                                       \
    MB_RC_VIS int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {        \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
    }                                                                                                       \
    MB_RC_VIS T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {            \
        MB_RC_NOTE(a, sizeof(T));                                                                           \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
        return c;                                                                                           \
    }
MB_RC_ATOMICS(8, unsigned char)
MB_RC_ATOMICS(16, unsigned short)
MB_RC_ATOMICS(32, unsigned int)
MB_RC_ATOMICS(64, unsigned long long)
#undef MB_RC_ATOMICS
#undef MB_RC_NOTE
#undef MB_RC_VIS
