// Device-side error reporting for the CUDA backend's index kernels (kernels/cuda/errors.py).
//
// Each device has one persistent error record: eight int64 words
//     [0] the error site's id (0: no error; -1 while the first reporter fills the record in)
//     [1] the offending value (an index), [2] its bound (a size), [3] the dim, [4] extra
// A kernel that meets a bad index reports it here and carries on without dereferencing it. The
// first report wins (a compare-and-swap claims word 0), so the record stays consistent however
// many threads, blocks or launches fail before the host looks; later reports are dropped until
// the host has read the record and reset it to zeros. The host reads it right after the launch
// (synchronous launches: the emulator, CUDA_LAUNCH_BLOCKING=1) or at the next synchronising
// call, so launches themselves never wait for the device.
#pragma once

__device__ __forceinline__ void gt_report_error(long long* record, long long site,
                                                long long value, long long bound,
                                                long long dim, long long extra = 0) {
    if (record == nullptr) return;
    unsigned long long* head = reinterpret_cast<unsigned long long*>(record);
    if (*reinterpret_cast<volatile unsigned long long*>(head) != 0ULL) return;  // already taken
    if (atomicCAS(head, 0ULL, ~0ULL) != 0ULL) return;  // another report won the race
    volatile long long* r = record;
    r[1] = value;
    r[2] = bound;
    r[3] = dim;
    r[4] = extra;
    __threadfence();  // the fields are visible before the site id that publishes them
    atomicExch(head, (unsigned long long)site);
}
