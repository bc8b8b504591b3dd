#include "error.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace doorbell {

namespace {
thread_local char t_last_error[512] = "";

/* set once by an adapter, read by any thread: the pair is published with
 * the handler (release) and read after it (acquire) */
std::atomic<doorbell_debug_cb_t> g_debug_cb{nullptr};
std::atomic<void *>              g_debug_arg{nullptr};
} // namespace

doorbell_status_t set_error(doorbell_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof(t_last_error), fmt, ap);
    va_end(ap);
    return status;
}

void debug(const char *fmt, ...)
{
    doorbell_debug_cb_t cb = g_debug_cb.load(std::memory_order_acquire);
    if (cb == nullptr) {
        return;
    }
    char    line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cb(g_debug_arg.load(std::memory_order_relaxed), line);
}

} // namespace doorbell

extern "C" void doorbell_set_debug_handler(doorbell_debug_cb_t cb, void *arg)
{
    doorbell::g_debug_arg.store(arg, std::memory_order_relaxed);
    doorbell::g_debug_cb.store(cb, std::memory_order_release);
}

extern "C" const char *doorbell_last_error(void)
{
    return doorbell::t_last_error;
}

extern "C" const char *doorbell_status_string(doorbell_status_t status)
{
    switch (status) {
    case DOORBELL_OK:
        return "success";
    case DOORBELL_INPROGRESS:
        return "operation in progress";
    case DOORBELL_ERR_NO_RESOURCE:
        return "no resources (retry after progress)";
    case DOORBELL_ERR_INVALID_PARAM:
        return "invalid parameter";
    case DOORBELL_ERR_NO_MEMORY:
        return "out of memory";
    case DOORBELL_ERR_IO:
        return "input/output error";
    case DOORBELL_ERR_NO_DEVICE:
        return "no such device";
    case DOORBELL_ERR_UNREACHABLE:
        return "destination unreachable";
    case DOORBELL_ERR_REMOTE_ACCESS:
        return "remote access error";
    case DOORBELL_ERR_TIMED_OUT:
        return "peer timed out";
    case DOORBELL_ERR_CANCELED:
        return "operation canceled";
    case DOORBELL_ERR_UNSUPPORTED:
        return "unsupported operation";
    case DOORBELL_ERR_REMOTE:
        return "peer reported a protocol error";
    }
    return "unknown status";
}
