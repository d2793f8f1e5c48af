// CUDA emulator runtime: runs a kernel's blocks one after another on the calling OS thread,
// each CUDA thread a fiber on a pooled, guard-paged stack. Built once as a shared library that
// every emulated module links against.
//
// Scheduling: a block runs in passes. In a pass every runnable fiber runs, in thread order (or
// reversed), until it finishes or waits (block barrier / warp exchange); a fiber that stops
// switches straight to the next runnable one, and the last one of the pass returns to the
// scheduler. A finished fiber hands its stack to the next fresh one without any switch, so
// barrier-free kernels run as a plain loop. When all live fibers wait at the same
// __syncthreads they are released (exited fibers count as arrived); a warp exchange completes
// as soon as every lane of its mask has arrived. Anything else that leaves no runnable fiber is
// a divergence / deadlock, reported as an error. Errors (assert, __trap, deadlock, stack
// overflow) abandon the launch and come back to Python as a message; the process is never
// aborted. A stray memory access outside the guard pages is still a real SIGSEGV (it goes to
// the handler that was installed before the emulator's).
#include "cuda_shim.h"
// The shim's CUDA qualifier macros are for kernel code: newer libstdc++ headers write
// __attribute__((__noinline__)), which the macro would break.
#undef __noinline__

#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) || defined(GT_EMU_FORCE_UCONTEXT)
#define GT_EMU_UCONTEXT 1
#include <ucontext.h>
#endif

namespace gt_emu {

enum State : unsigned char { RUNNABLE, WAIT_BLOCK, WAIT_WARP, DONE };

struct Ctx {  // a suspended execution context: a fiber's or the scheduler's
#ifdef GT_EMU_UCONTEXT
    ucontext_t uc;
#else
    void* sp;
#endif
};

struct Fiber {
    ThreadCoords coords;  // must stay first: threadIdx reads through g_cur
    State state;
    unsigned lane, warp;
    const char* bar_file;
    int bar_line;
    const char* warp_what;
    unsigned warp_mask;
    unsigned long long xin, xout;
    int src, pred;
    unsigned ballot;
    int slot;  // stack slot while started, -1 before the first run
    Ctx ctx;
};

struct Warp {
    unsigned exists;   // lanes present in this (possibly partial) warp
    unsigned waiting;  // lanes parked in a warp exchange
};

ThreadCoords* g_cur = nullptr;
uint3 g_block_idx;
dim3 g_block_dim, g_grid_dim;
unsigned char* g_dyn_shared = nullptr;

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kReverse = 1;

Fiber* cur() { return reinterpret_cast<Fiber*>(g_cur); }

std::vector<Fiber> g_fibers;
std::vector<int> g_free_slots;  // stack slots not held by a started, unfinished fiber
int g_pending_free = -1;        // slot of a finished fiber, freed once we are off its stack
int g_pass_k = 0;               // position of the current pass over the block's fibers
int g_reverse = 0;
Ctx g_sched;
std::vector<Warp> g_warps;
int g_nthreads = 0;
int g_done = 0;  // fibers of the current block that finished (a pass can end the block)
void (*g_kernel)(const unsigned char*) = nullptr;  // the module's thunk for the kernel
const unsigned char* g_kernel_args = nullptr;       // its 8-byte argument slots
bool g_failed = false;
std::string g_error;
std::mutex g_launch_mutex;

// ---- stacks: one mmap'ed pool, a PROT_NONE guard page below each stack --------------------
char* g_pool = nullptr;
size_t g_pool_bytes = 0, g_stack_bytes = 0, g_slot_bytes = 0;
int g_pool_slots = 0;
size_t g_page = 4096;

bool ensure_pool(int nthreads, size_t stack_bytes) {
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    g_page = page;
    stack_bytes = (stack_bytes + g_page - 1) / g_page * g_page;
    if (g_pool && nthreads <= g_pool_slots && stack_bytes == g_stack_bytes) return true;
    if (g_pool) munmap(g_pool, g_pool_bytes);
    g_pool = nullptr;
    g_slot_bytes = stack_bytes + g_page;
    g_pool_bytes = g_slot_bytes * (size_t)nthreads;
    void* p = mmap(nullptr, g_pool_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    g_pool = static_cast<char*>(p);
    for (int i = 0; i < nthreads; ++i) mprotect(g_pool + (size_t)i * g_slot_bytes, g_page, PROT_NONE);
    g_pool_slots = nthreads;
    g_stack_bytes = stack_bytes;
    return true;
}

bool in_guard_page(const void* addr) {
    const char* a = static_cast<const char*>(addr);
    if (!g_pool || a < g_pool || a >= g_pool + g_pool_bytes) return false;
    return (size_t)(a - g_pool) % g_slot_bytes < g_page;
}

void fail(const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!g_failed) g_error = buf;
    g_failed = true;
}

std::string where(const Fiber* f) {
    char buf[160];
    snprintf(buf, sizeof buf, "block (%u, %u, %u), thread (%u, %u, %u)", g_block_idx.x,
             g_block_idx.y, g_block_idx.z, f->coords.tid.x, f->coords.tid.y, f->coords.tid.z);
    return buf;
}

std::string block_name() {
    char buf[80];
    snprintf(buf, sizeof buf, "block (%u, %u, %u)", g_block_idx.x, g_block_idx.y, g_block_idx.z);
    return buf;
}

}  // namespace
}  // namespace gt_emu

// ---- context switch -------------------------------------------------------------------------
extern "C" void gt_emu_fiber_main();

#ifndef GT_EMU_UCONTEXT
// gt_emu_switch(void** save_sp, void* new_sp): push the callee-saved registers, swap stacks,
// pop the other side's registers. A fresh fiber's stack is laid out to "return" into the
// trampoline with a 16-byte aligned stack (see start_fiber).
asm(R"(
    .text
    .globl gt_emu_switch
    .hidden gt_emu_switch
    .type gt_emu_switch, @function
gt_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size gt_emu_switch, .-gt_emu_switch

    .globl gt_emu_trampoline
    .hidden gt_emu_trampoline
    .type gt_emu_trampoline, @function
gt_emu_trampoline:
    call gt_emu_fiber_main
    ud2
    .size gt_emu_trampoline, .-gt_emu_trampoline
)");
extern "C" void gt_emu_switch(void** save_sp, void* new_sp) __attribute__((visibility("hidden")));
extern "C" void gt_emu_trampoline() __attribute__((visibility("hidden")));
#endif

namespace gt_emu {
namespace {

void start_fiber(Fiber& f, int slot) {
    f.slot = slot;
    char* lo = g_pool + (size_t)slot * g_slot_bytes + g_page;
#ifndef GT_EMU_UCONTEXT
    // Stagger stack tops by slot: slots are a multiple of 4 KiB apart, so without this every
    // fiber's hot top-of-stack lines would land in the same L1 cache set.
    char* top = lo + g_stack_bytes - (size_t)(slot % 15) * 272;
    void** sp = reinterpret_cast<void**>(top - 72);  // 6 registers + return address
    for (int i = 0; i < 6; ++i) sp[i] = nullptr;
    sp[6] = reinterpret_cast<void*>(&gt_emu_trampoline);
    f.ctx.sp = sp;
#else
    getcontext(&f.ctx.uc);
    f.ctx.uc.uc_stack.ss_sp = lo;
    f.ctx.uc.uc_stack.ss_size = g_stack_bytes;
    f.ctx.uc.uc_link = nullptr;
    makecontext(&f.ctx.uc, &gt_emu_fiber_main, 0);
#endif
}

inline void jump(Ctx* from, Ctx* to) {
#ifndef GT_EMU_UCONTEXT
    gt_emu_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
    // Back on some stack: the fiber that switched here may have finished on its own stack.
    if (g_pending_free >= 0) {
        g_free_slots.push_back(g_pending_free);
        g_pending_free = -1;
    }
}

// Next runnable fiber of the current pass (advancing the pass), started if it is fresh.
Fiber* next_runnable() {
    const int n = g_nthreads;
    while (g_pass_k < n) {
        Fiber& f = g_fibers[g_reverse ? n - 1 - g_pass_k : g_pass_k];
        ++g_pass_k;
        if (f.state == RUNNABLE) return &f;
    }
    return nullptr;
}

void ensure_started(Fiber& f) {
    if (f.slot >= 0) return;
    int slot = g_free_slots.back();
    g_free_slots.pop_back();
    start_fiber(f, slot);
}

// The running fiber f stops (waits or finished): switch straight to the next runnable fiber of
// this pass, or back to the scheduler at the end of the pass. Returns when f is resumed.
void suspend(Fiber* f) {
    Fiber* n = g_failed ? nullptr : next_runnable();
    if (!n) {
        jump(&f->ctx, &g_sched);
        return;
    }
    ensure_started(*n);
    g_cur = &n->coords;
    jump(&f->ctx, &n->ctx);
}

}  // namespace
}  // namespace gt_emu

// Entry of every fiber stack. A thread that finishes hands its stack directly to the next
// fresh thread of the pass (a plain loop: no context switch for barrier-free kernels).
extern "C" __attribute__((visibility("hidden"))) void gt_emu_fiber_main() {
    using namespace gt_emu;
    if (g_pending_free >= 0) {  // we were switched to by a thread that just finished
        g_free_slots.push_back(g_pending_free);
        g_pending_free = -1;
    }
    for (;;) {
        try {
            g_kernel(g_kernel_args);
        } catch (...) {
            fail("a C++ exception escaped the kernel in %s", where(cur()).c_str());
        }
        Fiber* f = cur();
        f->state = DONE;
        ++g_done;
        Fiber* n = g_failed ? nullptr : next_runnable();
        if (n && n->slot < 0) {  // fresh: run it right here, on this stack
            n->slot = f->slot;
            f->slot = -1;
            g_cur = &n->coords;
            continue;
        }
        g_pending_free = f->slot;
        f->slot = -1;
        if (n) {
            g_cur = &n->coords;
            jump(&f->ctx, &n->ctx);
        } else {
            jump(&f->ctx, &g_sched);
        }
        __builtin_unreachable();  // a finished fiber is never resumed
    }
}

namespace gt_emu {
namespace {

// ---- stack-overflow detection: SIGSEGV on a guard page, handled on an alternate stack ------
// The handler stays installed between launches (installing it and an alternate stack cost four
// syscalls per launch): each launch only checks, with one query, that nobody replaced it. The
// handler that was there before our FIRST install is what a foreign fault is handed back to;
// it is never updated afterwards, so two runtime libraries in one process (each chaining to
// the one installed before it) can never form a cycle. A library destructor puts it back.
sigjmp_buf g_overflow_jmp;
struct sigaction g_old_segv;
bool g_have_old_segv = false;

void segv_handler(int sig, siginfo_t* info, void* uctx) {
    if (in_guard_page(info->si_addr)) siglongjmp(g_overflow_jmp, 1);
    // Not ours: restore the previous handler and let the fault happen again under it (the
    // next launch re-installs ours).
    sigaction(SIGSEGV, &g_old_segv, nullptr);
    (void)sig;
    (void)uctx;
}

void ensure_segv_handler() {
    struct sigaction cur {};
    sigaction(SIGSEGV, nullptr, &cur);
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == &segv_handler) return;
    struct sigaction sa {};
    sa.sa_sigaction = segv_handler;
    // SA_NODEFER: SIGSEGV stays unblocked in the handler, so jumping out of it needs no saved
    // signal mask (sigsetjmp(.., 0): no sigprocmask syscall per launch).
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (!g_have_old_segv) {
        g_old_segv = cur;
        g_have_old_segv = true;
    }
    sigaction(SIGSEGV, &sa, nullptr);
}

// The guard-page fault happens on the overflowing fiber stack, so the handler must run on an
// alternate signal stack, which is per OS thread. A thread that already has one big enough
// (Python's faulthandler installs one) keeps it; otherwise it gets its own, once. The check
// result is cached per thread; the buffer is freed when the thread exits.
constexpr size_t kAltStackBytes = 64 * 1024;
constexpr size_t kMinAltStackBytes = 16 * 1024;  // the handler needs a few hundred bytes

struct AltStack {
    bool checked = false;
    void* mem = nullptr;
    ~AltStack() {
        if (!mem) return;
        stack_t cur{};
        if (sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == mem) {
            stack_t off{};
            off.ss_flags = SS_DISABLE;
            sigaltstack(&off, nullptr);
        }
        std::free(mem);
    }
};
thread_local AltStack t_altstack;

bool ensure_altstack() {
    if (t_altstack.checked) return true;
    stack_t cur{};
    if (sigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) &&
        cur.ss_size >= kMinAltStackBytes) {
        t_altstack.checked = true;
        return true;
    }
    void* mem = std::malloc(kAltStackBytes);
    if (!mem) return false;
    stack_t ss{};
    ss.ss_sp = mem;
    ss.ss_size = kAltStackBytes;
    if (sigaltstack(&ss, nullptr) != 0) {
        std::free(mem);
        return false;
    }
    t_altstack.mem = mem;
    t_altstack.checked = true;
    return true;
}

// Unload (process exit, or a dlclose): hand SIGSEGV back to whoever had it before us.
__attribute__((destructor)) void restore_segv_handler() {
    struct sigaction cur {};
    sigaction(SIGSEGV, nullptr, &cur);
    if (g_have_old_segv && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == &segv_handler)
        sigaction(SIGSEGV, &g_old_segv, nullptr);
}

// After a failure the launch is abandoned: the failing fiber goes straight to the scheduler.
[[noreturn]] void abandon(Fiber* f) {
    jump(&f->ctx, &g_sched);
    __builtin_unreachable();
}

}  // namespace

// ---- device-side entry points (declared in cuda_shim.h) ------------------------------------
unsigned lane_id() { return cur()->lane; }

void syncthreads(const char* file, int line) {
    Fiber* f = cur();
    f->state = WAIT_BLOCK;
    f->bar_file = file;
    f->bar_line = line;
    suspend(f);
}

unsigned long long warp_exchange(unsigned mask, unsigned long long value, int src_lane, int pred,
                                 unsigned* ballot, const char* what) {
    Fiber* f = cur();
    if (!(mask & (1u << f->lane))) {
        fail("%s: mask 0x%08x does not include the calling lane %u (%s)", what, mask, f->lane,
             where(f).c_str());
        abandon(f);
    }
    Warp& w = g_warps[f->warp];
    if (mask & ~w.exists) {  // undefined behaviour on a GPU: lanes that can never arrive
        fail("%s: mask 0x%08x names lanes missing from a partial warp (warp %u has %d threads; "
             "blockDim (%u, %u, %u)) in %s", what, mask, f->warp, __builtin_popcount(w.exists),
             g_block_dim.x, g_block_dim.y, g_block_dim.z, where(f).c_str());
        abandon(f);
    }
    Fiber* base = g_fibers.data() + (size_t)f->warp * 32;
    f->xin = value;
    f->src = src_lane;
    f->pred = pred;
    f->warp_mask = mask;
    f->warp_what = what;
    f->state = WAIT_WARP;
    w.waiting |= 1u << f->lane;
    if ((w.waiting & mask) == mask) {
        // Every lane has deposited its value: compute all results now, so lanes that run on
        // and start the next exchange cannot clobber a value another lane has yet to read.
        unsigned votes = 0;
        for (unsigned m = mask; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            if (base[l].pred) votes |= 1u << l;
        }
        for (unsigned m = mask; m; m &= m - 1) {
            Fiber& g = base[__builtin_ctz(m)];
            int s = g.src;
            bool ok = s >= 0 && s < 32 && (w.exists & (1u << s));
            g.xout = ok ? base[s].xin : g.xin;
            g.ballot = votes;
            g.state = RUNNABLE;
        }
        w.waiting &= ~mask;
    } else {
        suspend(f);
    }
    if (ballot) *ballot = f->ballot;
    return f->xout;
}

void trap(const char* what, const char* file, int line) {
    Fiber* f = cur();
    fail("%s at %s:%d in %s", what, file, line, f ? where(f).c_str() : "host code");
    if (f) abandon(f);
    std::fprintf(stderr, "gputensor CUDA emulator: %s\n", g_error.c_str());
    std::abort();  // unreachable from kernels: trap is only reached from device code
}

// Scheduler body for one block. Returns false after recording an error.
static bool run_block() {
    const int n = g_nthreads;
    // Stacks are handed out when a fiber first runs and taken back when it finishes, so
    // threads that never wait all reuse one hot stack (no page/TLB churn).
    g_free_slots.clear();
    for (int i = n - 1; i >= 0; --i) g_free_slots.push_back(i);
    g_pending_free = -1;
    g_done = 0;
    for (int i = 0; i < n; ++i) {
        g_fibers[i].state = RUNNABLE;
        g_fibers[i].slot = -1;
    }
    for (Warp& w : g_warps) w.waiting = 0;
    for (;;) {
        // One pass: fibers hand control to each other; the last one of the pass comes back.
        g_pass_k = 0;
        if (Fiber* f = next_runnable()) {
            ensure_started(*f);
            g_cur = &f->coords;
            jump(&g_sched, &f->ctx);
            if (g_failed) return false;
        }
        if (g_done == n) return true;  // every thread finished: no state scan needed
        int live = 0, at_bar = 0, runnable = 0;
        const Fiber* first = nullptr;
        bool same_site = true;
        for (int i = 0; i < n; ++i) {
            const Fiber& f = g_fibers[i];
            if (f.state == DONE) continue;
            ++live;
            if (f.state == RUNNABLE) ++runnable;
            if (f.state == WAIT_BLOCK) {
                ++at_bar;
                if (!first) first = &f;
                else if (f.bar_line != first->bar_line ||
                         (f.bar_file != first->bar_file && std::strcmp(f.bar_file, first->bar_file)))
                    same_site = false;
            }
        }
        if (live == 0) return true;
        if (runnable) continue;
        if (at_bar == live && same_site) {  // exited threads count as arrived
            for (int i = 0; i < n; ++i)
                if (g_fibers[i].state == WAIT_BLOCK) g_fibers[i].state = RUNNABLE;
            continue;
        }
        // Nothing can run: describe who waits where.
        std::string desc;
        int shown = 0;
        for (int i = 0; i < n && shown < 4; ++i) {
            const Fiber& f = g_fibers[i];
            if (f.state == DONE || (at_bar == live && &f != first && f.bar_line == first->bar_line))
                continue;
            char buf[256];
            if (f.state == WAIT_BLOCK)
                snprintf(buf, sizeof buf, "; thread (%u, %u, %u) waits at __syncthreads %s:%d",
                         f.coords.tid.x, f.coords.tid.y, f.coords.tid.z, f.bar_file, f.bar_line);
            else
                snprintf(buf, sizeof buf, "; thread (%u, %u, %u) waits in %s(mask=0x%08x)",
                         f.coords.tid.x, f.coords.tid.y, f.coords.tid.z, f.warp_what, f.warp_mask);
            desc += buf;
            ++shown;
        }
        const int done = n - live;
        if (at_bar == live)
            fail("divergent __syncthreads in %s: threads wait at different barriers%s",
                 block_name().c_str(), desc.c_str());
        else
            fail("deadlock in %s: %d of %d threads exited, %d wait at __syncthreads, %d in warp "
                 "operations%s", block_name().c_str(), done, n, at_bar, live - at_bar,
                 desc.c_str());
        return false;
    }
}

}  // namespace gt_emu

// assert() in kernel code lands here: each module defines a local __assert_fail (see build.py)
// that forwards to this, so a failed assert raises KernelError instead of calling abort().
extern "C" __attribute__((visibility("default"), noreturn)) void gt_emu_assert_fail(
    const char* expr, const char* file, unsigned line, const char* func) noexcept {
    using namespace gt_emu;
    char what[512];
    snprintf(what, sizeof what, "assertion `%s` failed in %s", expr, func);
    trap(what, file, (int)line);
}

// The last launch's error message (valid until the next launch; launches are serialised).
extern "C" __attribute__((visibility("default"))) const char* gt_emu_last_error() {
    return gt_emu::g_error.c_str();
}

namespace gt_emu {
namespace {

// Per-launch state kept between launches, so a launch allocates nothing once warm: the fiber
// and warp tables are rebuilt only when the block shape changes (run_block resets the
// per-block state), the dynamic shared buffer only grows.
unsigned g_table_dims[3] = {0, 0, 0};
std::vector<unsigned char> g_dyn_buf;

void setup_block_tables(const unsigned* bd, int n) {
    if (bd[0] == g_table_dims[0] && bd[1] == g_table_dims[1] && bd[2] == g_table_dims[2]) return;
    g_fibers.assign((size_t)n, Fiber{});
    g_warps.assign((size_t)(n + 31) / 32, Warp{});
    for (int i = 0; i < n; ++i) {
        Fiber& f = g_fibers[i];
        f.coords.tid = uint3{(unsigned)i % bd[0], ((unsigned)i / bd[0]) % bd[1],
                             (unsigned)i / (bd[0] * bd[1])};
        f.lane = (unsigned)i % 32;
        f.warp = (unsigned)i / 32;
        g_warps[f.warp].exists |= 1u << f.lane;
    }
    g_table_dims[0] = bd[0];
    g_table_dims[1] = bd[1];
    g_table_dims[2] = bd[2];
}

}  // namespace
}  // namespace gt_emu

// Runs a whole grid described by `blob`: a LaunchHeader (cuda_shim.h) followed by one 8-byte
// slot per kernel argument, which `kernel` (the module's generated thunk) unpacks.
// [shared_begin, shared_end) is the calling module's static __shared__ section.
// Returns 0 on success, 1 with the message in gt_emu_last_error() on failure.
extern "C" __attribute__((visibility("default"))) int gt_emu_launch(
    const unsigned char* blob, void (*kernel)(const unsigned char*), unsigned char* shared_begin,
    unsigned char* shared_end) {
    using namespace gt_emu;
    std::lock_guard<std::mutex> lock(g_launch_mutex);
    LaunchHeader h;
    std::memcpy(&h, blob, sizeof h);
    const unsigned* grid = h.grid;
    const unsigned* bd = h.block;
    g_failed = false;
    g_error.clear();
    const long long nl = (long long)bd[0] * bd[1] * bd[2];
    if (nl <= 0 || nl > kMaxThreads) {
        fail("block has an invalid number of threads");
        return 1;
    }
    const int n = (int)nl;
    if (!ensure_pool(n, (size_t)h.stack_bytes)) {
        fail("could not allocate fiber stacks");
        return 1;
    }
    if (!ensure_altstack()) {
        fail("could not allocate the signal stack that detects fiber stack overflows");
        return 1;
    }
    ensure_segv_handler();
    g_nthreads = n;
    setup_block_tables(bd, n);
    const size_t shared_bytes = (size_t)h.shared_bytes;
    if (g_dyn_buf.size() < shared_bytes + 16) g_dyn_buf.resize(shared_bytes + 16);
    g_dyn_shared = g_dyn_buf.data() +
                   (16 - (reinterpret_cast<uintptr_t>(g_dyn_buf.data()) & 15)) % 16;
    g_grid_dim = dim3(grid[0], grid[1], grid[2]);
    g_block_dim = dim3(bd[0], bd[1], bd[2]);
    g_kernel = kernel;
    g_kernel_args = blob + sizeof(LaunchHeader);
    g_reverse = h.flags & kReverse;
    const size_t static_shared = (size_t)(shared_end - shared_begin);
    bool ok = true;
    if (sigsetjmp(g_overflow_jmp, 0)) {
        Fiber* f = cur();
        fail("stack overflow in %s (fiber stacks hold %zu bytes; pass a larger stack_size)",
             f ? where(f).c_str() : "kernel", g_stack_bytes);
        ok = false;
    } else {
        for (unsigned z = 0; z < grid[2] && ok; ++z)
            for (unsigned y = 0; y < grid[1] && ok; ++y)
                for (unsigned x = 0; x < grid[0] && ok; ++x) {
                    g_block_idx = uint3{x, y, z};
                    // Poison shared memory (0xFF.. is a NaN for floats) to expose missing writes.
                    std::memset(shared_begin, 0xFF, static_shared);
                    std::memset(g_dyn_shared, 0xFF, shared_bytes);
                    ok = run_block();
                }
    }
    g_cur = nullptr;
    g_dyn_shared = nullptr;
    return ok ? 0 : 1;
}
